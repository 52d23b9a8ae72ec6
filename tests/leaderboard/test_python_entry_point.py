"""A Python file with no ``kernel`` is refused at upload (``validate`` included), before any runner
job; a file that defines it in any way a module can, or may define it at run time, is let through.

The cast (tests/conftest.py): alice uploads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from leaderboard.models import Evaluation
from leaderboard.python_uploads import MISSING_ENTRY_POINT, entry_point_problem
from tests.leaderboard.api_support import catalogue, client_for, submit_body

__all__ = ["catalogue"]  # a fixture used by name
REPO = Path(__file__).resolve().parents[2]
#: Files under tests/fixtures that are not submissions: the import fixtures' references, tasks and
#: helpers, and the fixture that exists to lack a kernel.
# Scripts the jail tests run directly (not submissions), importer inputs, the deliberate no-kernel file.
NOT_SUBMISSIONS = ("/import/", "no_kernel.py", "keyring_plant.py")


@pytest.mark.parametrize("source", [
    "def kernel(a, b, c):\n    pass\n",
    "async def kernel(a):\n    pass\n",
    "from mine import kernel\n",
    "from mine import fast as kernel\n",
    "import torch\nkernel = torch.add\n",
    "kernel: object = print\n",
    "try:\n    from fast import kernel\nexcept ImportError:\n    def kernel(a): pass\n",
    "if True:\n    class kernel:\n        pass\n",
    "for kernel in [print]:\n    pass\n",
    "with open(__file__) as kernel:\n    pass\n",
    "(kernel := print)\n",
    "def custom_kernel(data):\n    return data\n",  # GPU MODE's submission.py
    "globals()['kernel'] = print\n",  # made at run time: the evaluator decides
    "from helpers import *\n",
    "def __getattr__(name):\n    return print\n",
    "import sys\nsetattr(sys.modules[__name__], 'kernel', print)\n",
    "def make():\n    global kernel\n    kernel = print\nmake()\n",
])
def test_a_file_that_may_define_kernel_is_let_through(source: str) -> None:
    assert entry_point_problem(source) is None


@pytest.mark.parametrize("source", [
    "import torch\n",
    "def kernal(a, b, c):\n    pass\n",
    "def helper():\n    kernel = 1\n    return kernel\n",
    "class Model:\n    def kernel(self):\n        pass\n",
    "print('kernel')\n",
    "lambda kernel: kernel\n",
])
def test_a_file_that_certainly_defines_no_kernel_is_refused(source: str) -> None:
    assert entry_point_problem(source) == MISSING_ENTRY_POINT


def test_no_kernel_or_fixture_of_the_repository_is_refused() -> None:
    """The honest-rejection rate: every Python submission in examples/ and tests/fixtures (honest
    kernels and cheats alike define ``kernel``) passes."""
    files = sorted({*REPO.glob("examples/**/*.py"), *REPO.glob("tests/fixtures/**/*.py")})
    submissions = [path for path in files if not any(part in str(path) for part in NOT_SUBMISSIONS)]
    assert len(submissions) >= 60
    refused = [path.name for path in submissions if entry_point_problem(path.read_text())]
    assert refused == []
    assert entry_point_problem((REPO / "tests/fixtures/good/no_kernel.py").read_text()) == MISSING_ENTRY_POINT


@pytest.mark.django_db
def test_validate_and_submit_refuse_it_at_once_without_a_runner_job(alice: Any, catalogue: None) -> None:
    api = client_for(alice)
    source = "import torch\n\ndef add(a, b, c):\n    torch.add(a, b, out=c)\n"
    for path in ("/api/submissions/validate", "/api/submissions"):
        response = api.post(path, submit_body(source=source), format="json")
        error = response.json()["error"]
        assert (response.status_code, error["code"], error["field"]) == (400, "invalid_source", "source")
        assert "defines no `kernel` function" in error["message"]
        assert "custom_kernel(data)" in error["message"]  # what a GPU MODE user looks for
    assert not Evaluation.objects.exists()
