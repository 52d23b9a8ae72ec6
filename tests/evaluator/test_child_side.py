"""What both kinds of untrusted child share (evaluator/harness/child_side.py): one call of the bound
kernel answered over a real pipe, and a child process's exit status."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from evaluator.harness import channel  # noqa: E402
from evaluator.harness.child_side import INTERNAL_ERROR_EXIT, ChildSide, numel  # noqa: E402
from evaluator.problems import get_problem  # noqa: E402
from evaluator.vocabulary import Status  # noqa: E402
from tests.harness_helpers import REPO  # noqa: E402


class PipedChild(ChildSide):
    """A child bound to vector_add's buffers, its framing checks reporting ``busy``."""

    def __init__(self, wfd: int, kernel: Callable[..., Any], busy: str | None = None) -> None:
        super().__init__(-1, wfd)
        self.problem = get_problem("vector_add")
        self.busy = busy
        self.kernel = kernel
        self.bound = ([torch.ones(4), torch.ones(4)], [torch.zeros(4)])

    def sync(self) -> None:
        """CPU tensors: nothing to wait for."""

    def call_problem(self) -> str | None:
        return self.busy

    def failed_call_facts(self) -> dict[str, Any]:
        return {"fatal": False}


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    yield read_end, write_end
    os.close(read_end)
    os.close(write_end)


def _answer(pipe: tuple[int, int], kernel: Callable[..., Any], busy: str | None = None) -> dict[str, Any]:
    PipedChild(pipe[1], kernel, busy).call({"type": "call"})
    return channel.read_frame(pipe[0])


def test_an_honest_call_is_answered_with_no_problem(pipe: tuple[int, int]) -> None:
    def kernel(a: Any, b: Any, out: Any) -> None:
        torch.add(a, b, out=out)

    answer = _answer(pipe, kernel)
    assert answer == {"type": "called", "problem": None, "problem_status": None, "note": ""}


def test_a_kernel_that_raises_is_reported_with_the_childs_own_facts(pipe: tuple[int, int]) -> None:
    def kernel(*tensors: Any) -> None:
        raise ValueError("no good")

    answer = _answer(pipe, kernel)
    assert answer["error"] == "the kernel raised ValueError: no good" and answer["fatal"] is False


def test_what_the_framing_checks_saw_rejects_the_call(pipe: tuple[int, int]) -> None:
    answer = _answer(pipe, lambda a, b, out: None, busy="a thread started during the call")
    assert answer["problem_status"] == Status.REJECTED
    assert answer["problem"] == "a thread started during the call"


def test_an_output_the_kernel_replaced_is_named_and_a_returned_value_ignored(pipe: tuple[int, int]) -> None:
    def kernel(a: Any, b: Any, out: Any) -> Any:
        out.data = out.data.double()
        return 3

    answer = _answer(pipe, kernel)
    assert answer["problem_status"] == Status.INCORRECT_DTYPE and "output c" in answer["problem"]
    assert answer["note"] == "kernel returned a int; ignored (outputs are written in place)"


def test_numel_counts_a_zero_axis_as_one() -> None:
    assert numel({"m": 4, "n": 8}) == 32 and numel({"m": 0, "n": 8}) == 8


@pytest.mark.parametrize(
    ("failure", "status"), [("RuntimeError('harness bug')", INTERNAL_ERROR_EXIT), ("ChannelError('gone')", 0)]
)
def test_a_child_leaves_with_a_status_that_says_whose_failure_it_was(failure: str, status: int) -> None:
    script = (
        "from evaluator.harness.channel import ChannelError\n"
        "from evaluator.harness.child_side import serve\n"
        "class Failing:\n"
        "    def __init__(self, rfd, wfd): pass\n"
        f"    def run(self): raise {failure}\n"
        "serve(Failing, ['--in-fd', '0', '--out-fd', '1'])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == status
    assert ("harness bug" in done.stderr) == (status == INTERNAL_ERROR_EXIT)
