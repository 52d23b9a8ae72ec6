"""SOL-ExecBench solution.json uploads through the site (``leaderboard/foreign_uploads.py``): a
Python solution is taken as it is, a CUDA one becomes a CUDA submission where it maps onto the
imported problem's native ABI (its .cu built by the real nvcc and ptxas), and is refused with the
reason where it does not (a PyTorch extension, no launch spec, a problem that takes no native
kernel); nothing is saved or queued for a refusal.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from evaluator.importers import import_problems
from evaluator.problems import IMPORTED_DIR_ENV, load_catalogue
from evaluator.ptx.toolchain import find_tool
from leaderboard.models import Evaluation, Submission
from leaderboard.submissions import create_submission
from leaderboard.sync import sync_problems

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "import"
KERNEL = (FIXTURES / "solutions" / "rmsnorm_h256.cu").read_text()
PYTHON_RUN = "import torch\n\n\ndef run(input, weight, eps):\n    return input\n"
TORCH_EXTENSION = """#include <torch/extension.h>
__global__ void k(const float* x, float* y) {}
torch::Tensor run(torch::Tensor input, torch::Tensor weight, double eps) { return input; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }
"""


@pytest.fixture(scope="module")
def imported_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("imported")
    (item,) = import_problems("sol-execbench", FIXTURES / "sol-execbench" / "rmsnorm_h256", out).problems
    assert item.status == "converted", item.reason
    return out


@pytest.fixture
def site(imported_folder: Path, monkeypatch: pytest.MonkeyPatch, gpu_types: Any, broker: str,
         django_capture_on_commit_callbacks: Any) -> Iterator[Any]:
    monkeypatch.setenv(IMPORTED_DIR_ENV, str(imported_folder))
    load_catalogue.cache_clear()
    sync_problems()
    yield lambda: django_capture_on_commit_callbacks(execute=True)
    load_catalogue.cache_clear()


def solution(language: str, sources: dict[str, str], entry: str = "kernel.cu::run") -> str:
    return json.dumps(
        {
            "name": "mine",
            "definition": "rmsnorm_h256",
            "author": "someone",
            "spec": {
                "language": language,
                "target_hardware": ["NVIDIA_H100"],
                "entry_point": entry,
                "binding": "torch",
                "destination_passing_style": False,
            },
            "sources": [{"path": path, "content": text} for path, text in sources.items()],
        }
    )


def refused(
    user: Any, site: Any, text: str, problem: str = "rmsnorm_h256", gpus: tuple[str, ...] = ("h200",)
) -> str:
    with site(), pytest.raises(ValidationError) as error:
        create_submission(user, problem, "python", text, list(gpus), "test")
    assert not Submission.objects.exists() and not Evaluation.objects.exists()
    return "\n".join(error.value.messages)


def test_a_python_solution_json_is_taken_as_it_is(alice: Any, site: Any) -> None:
    """A JSON file defines no module-level kernel: the site let no solution.json through before."""
    text = solution("pytorch", {"kernel.py": PYTHON_RUN}, entry="kernel.py::run")
    with site():
        submission = create_submission(alice, "rmsnorm_h256", "python", text, ["cpu"], "test")
    assert submission.language == "python" and submission.source == text


@pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")
def test_a_cuda_solution_json_that_maps_becomes_a_cuda_submission(alice: Any, site: Any) -> None:
    with site():
        submission = create_submission(
            alice, "rmsnorm_h256", "python", solution("cuda", {"kernel.cu": KERNEL}), ["h200"], "test"
        )
    assert submission.language == "cuda" and submission.source == KERNEL
    assert submission.static_evidence["archs"]["sm_90a"]["entry"] == "rmsnorm_rows"


def test_a_pytorch_extension_is_refused_with_the_native_abi_to_write_instead(alice: Any, site: Any) -> None:
    message = refused(alice, site, solution("cuda", {"kernel.cu": TORCH_EXTENSION}))
    assert "kernel.cu is a PyTorch extension (torch/extension.h, <torch/, PYBIND11_MODULE" in message
    assert (
        "(const __nv_bfloat16* __restrict__ input, const __nv_bfloat16* __restrict__ weight, "
        "__nv_bfloat16* __restrict__ output, unsigned batch_size, unsigned hidden_size, float eps)"
    ) in message
    assert "solboard problem rmsnorm_h256 --launch-spec" in message


def test_a_cuda_solution_without_a_launch_spec_or_with_two_kernels_files_is_refused(
    alice: Any, site: Any
) -> None:
    bare = KERNEL.replace("solboard-launch:", "launch:")
    assert "kernel.cu has no launch spec" in refused(alice, site, solution("cuda", {"kernel.cu": bare}))
    two = solution("cuda", {"a.cu": KERNEL, "b.cu": KERNEL})
    assert "maps onto one CUDA C++ file (a .cu source), this one has 2: a.cu, b.cu" in refused(
        alice, site, two
    )


def test_a_solution_json_for_a_native_problem_is_refused_with_what_it_takes(alice: Any, site: Any) -> None:
    text = solution("pytorch", {"kernel.py": PYTHON_RUN}, entry="kernel.py::run")
    message = refused(alice, site, text, problem="vector_add", gpus=("cpu",))
    assert "taken only by problems imported from SOL-ExecBench; vector_add takes python, ptx, cuda" in message
