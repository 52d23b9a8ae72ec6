"""Imported problems take PTX and CUDA C++ like native ones (issue 39): the importers declare the
same ``[ptx]`` table from what the source declares (tensors in the harness's order, every axis as a
scalar, the fixed real numbers as fp32 constants, the tensors TMA can describe on every shape), the
catalogue refuses a wrong table whoever wrote it, and a kernel with the generated signature passes
upload validation with the real ptxas.

Modules: `evaluator/importers/native_table.py`, `evaluator/problems/__init__.py` (``_check_ptx_table``).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from evaluator.importers import ImportReport, import_problems
from evaluator.problems import CatalogueError, load_problem
from evaluator.ptx import validate_upload
from evaluator.ptx.native_abi import describe, from_problem
from evaluator.ptx.table import table_errors
from evaluator.ptx.toolchain import find_tool
from tests.evaluator.import_sources import rk_task
from tests.harness_helpers import REPO

FIXTURES = REPO / "tests" / "fixtures" / "import"
needs_ptxas = pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas is not installed")
needs_nvcc = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")
#: Every fixture that converts, in both formats.
CONVERTED = [
    "rmsnorm_h256",
    "embedding_gather_v1000_h128",
    "pmpp_like_histogram_py",
    "pmpp_like_matmul_py",
    "pmpp_like_prefixsum_py",
    "pmpp_like_softmax_py",
    "pmpp_like_vectoradd_py",
    "pmpp_like_vectorsum_py",
]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[ImportReport]]:
    out = tmp_path_factory.mktemp("imported")
    reports = [import_problems("sol-execbench", FIXTURES / "sol-execbench", out),
               import_problems("reference-kernels", FIXTURES / "reference-kernels", out)]
    return out, reports


def _outcome(reports: list[ImportReport], name: str) -> Any:
    return next(item for report in reports for item in report.problems if item.name == name)


@pytest.mark.parametrize("name", CONVERTED)
def test_every_imported_problem_takes_ptx_and_cuda_with_a_sound_table(imported: Any, name: str) -> None:
    problem = load_problem(imported[0] / name)
    assert problem.languages == ("python", "ptx", "cuda")
    assert problem.ptx["tensors"] == [spec.name for spec in (*problem.inputs, *problem.outputs)]
    assert problem.ptx["scalars"] == list(problem.axes)
    assert table_errors(problem) == []
    notes = "\n".join(_outcome(imported[1], name).notes)
    assert "native kernels (ptx, cuda) take" in notes


@needs_ptxas
@pytest.mark.parametrize("name", CONVERTED)
def test_the_generated_ptx_skeleton_of_an_imported_problem_passes_validation(
    imported: Any, name: str
) -> None:
    problem = load_problem(imported[0] / name)
    skeleton = describe(from_problem(problem)).ptx_skeleton
    result = validate_upload("ptx", skeleton, None, problem, ["sm_90a", "sm_100a"])
    assert result.ok, result.messages()


def test_a_fixed_float_scalar_reaches_native_kernels_as_an_fp32_constant(imported: Any) -> None:
    """SOL-ExecBench's rmsnorm takes eps as a scalar input: a Python kernel never sees it (the
    definition fixes it), a native one gets it as the constant parameter eps."""
    problem = load_problem(imported[0] / "rmsnorm_h256")
    assert problem.ptx["constants"] == {"eps": 1e-6}
    assert problem.ptx["tensormaps"] == ["input", "weight", "output"]  # 256 bf16 = 512-byte rows
    abi = describe(from_problem(problem))
    assert [(p.kind, p.name) for p in abi.parameters] == [
        ("ptr", "input"), ("ptr", "weight"), ("ptr", "output"), ("u32", "batch_size"), ("u32", "hidden_size"),
        ("f32", "eps")]


@needs_nvcc
def test_a_real_cuda_kernel_of_an_imported_problem_builds_for_both_targets(imported: Any) -> None:
    source = (FIXTURES / "solutions" / "rmsnorm_h256.cu").read_text()
    result = validate_upload(
        "cuda", source, None, load_problem(imported[0] / "rmsnorm_h256"), ["sm_90a", "sm_100a"]
    )
    assert result.ok, result.messages()


def test_tensors_with_odd_row_pitches_are_not_offered_as_tma_descriptors(imported: Any) -> None:
    problem = load_problem(imported[0] / "pmpp_like_vectoradd_py")
    assert problem.ptx["tensormaps"] == []  # some test shape has rows of an odd number of floats
    odd = [shape.axes for shape in problem.shapes if (shape.axes["size"] * 4) % 16]
    assert odd


# ---------------------------------------------------------------- the data's plain values (GPU MODE)


SCALED = """
import torch
from utils import make_match_reference

def ref_kernel(data):
    x, scale, out = data
    out[...] = x * scale
    return out

def generate_input(size, seed):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    x = torch.randn(size, size, device="cuda", generator=gen)
    return (x, SCALE, torch.empty_like(x))

check_implementation = make_match_reference(ref_kernel)
"""


def _import_scaled(tmp_path: Path, scale: str) -> tuple[Any, Any]:
    """(outcome, problem) of the task above with ``SCALE`` as the data's plain value."""
    task = rk_task(tmp_path / "problems" / "pmpp", "scale_py", reference=SCALED.replace("SCALE", scale),
                   tests=[{"size": 8, "seed": 1}, {"size": 16, "seed": 2}])
    (item,) = import_problems("reference-kernels", task, tmp_path / "out").problems
    assert item.status == "converted", item.reason
    return item, load_problem(tmp_path / "out" / "pmpp_scale_py")


def test_a_float_the_data_holds_at_every_shape_becomes_an_fp32_constant(tmp_path: Path) -> None:
    item, problem = _import_scaled(tmp_path, "0.125")
    assert problem.ptx["constants"] == {"constant1": 0.125}
    assert "constant1 = 0.125 reaches native kernels as an fp32 constant" in "\n".join(item.notes)


def test_a_value_that_follows_an_axis_reaches_native_kernels_as_that_scalar(tmp_path: Path) -> None:
    item, problem = _import_scaled(tmp_path, "size")
    assert problem.languages == ("python", "ptx", "cuda")
    assert "equals the axis size at every shape" in "\n".join(item.notes)


def test_a_value_no_native_kernel_could_receive_keeps_the_problem_python_only_and_says_why(
    tmp_path: Path,
) -> None:
    item, problem = _import_scaled(tmp_path, "size * 3 + 1")
    assert problem.languages == ("python",) and problem.ptx == {}
    assert (
        "native kernels (ptx, cuda): not offered: the task's data holds a plain value (constant1: 25, 49) "
        "that changes with the shape and is no axis"
    ) in "\n".join(item.notes)
    assert "takes Python kernels only" in describe(from_problem(problem)).reason


# ---------------------------------------------------------------- a hand-written table


def test_the_catalogue_refuses_a_problem_whose_ptx_table_is_wrong(imported: Any, tmp_path: Path) -> None:
    folder = tmp_path / "rmsnorm_h256"
    shutil.copytree(imported[0] / "rmsnorm_h256", folder)
    toml = (folder / "problem.toml").read_text()
    (folder / "problem.toml").write_text(toml.replace('tensors = ["input", "weight", "output"]',
                                                      'tensors = ["input", "weight"]'))
    with pytest.raises(
        CatalogueError,
        match=r"\[ptx\] table: rmsnorm_h256: \[ptx\].tensors leaves out the output "
        r"'output'",
    ):
        load_problem(folder)
