"""Upload validation with the real ptxas/nvcc: what is refused, and why, before anything is queued."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.ptx import validate_upload
from evaluator.ptx.abi import parse_entries
from evaluator.ptx.archs import ARCHS
from evaluator.ptx.errors import SpecError
from evaluator.ptx.limits import check_static
from evaluator.ptx.spec import parse_spec
from evaluator.ptx.toolchain import find_tool

pytestmark = pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas is not installed")

ROOT = Path(__file__).resolve().parents[2]
VADD = (ROOT / "examples/ptx/vector_add.ptx").read_text()
SPEC = """
entry = "vector_add_v4"
grid = ["cdiv(N, 1024)", 1, 1]
block = [256, 1, 1]
params = [
    {kind="ptr", tensor="a"}, {kind="ptr", tensor="b"}, {kind="ptr", tensor="c"}, {kind="u64", axis="N"},
]
"""


def refused(
    spec: str = SPEC, source: str = VADD, archs: list[str] | None = None, problem: str = "vector_add"
) -> str:
    result = validate_upload("ptx", source, spec, problem, archs or ["sm_90a"])
    assert not result.ok
    return "\n".join(result.messages())


def test_the_vector_add_example_is_accepted_with_its_resources() -> None:
    result = validate_upload("ptx", VADD, None, "vector_add", ["h200"])
    assert result.ok, result.messages()
    arch = result.archs[0]
    assert arch.arch == "sm_90a" and arch.entry == "vector_add_v4"
    kernel = next(k for k in arch.kernels if k.name == "vector_add_v4")
    assert kernel.registers and kernel.spill_store_bytes == 0


def test_it_rejects_ptx_that_does_not_assemble_with_the_line_number() -> None:
    broken = VADD.replace("add.rn.f32          %f9, %f1, %f5;", "add.rn.f32          %f9, %f1, %q5;")
    line = broken.splitlines().index(next(row for row in broken.splitlines() if "%q5" in row)) + 1
    result = validate_upload("ptx", broken, SPEC, "vector_add", ["sm_90a"])
    errors = result.archs[0].errors
    assert not result.ok and errors[0].stage == "ptxas"
    assert any(e.line == line and "%q5" in e.message for e in errors)


def test_it_rejects_an_entry_that_does_not_exist() -> None:
    assert "entry 'vadd' not found in the PTX; entries: vector_add_v4" in refused(
        SPEC.replace('"vector_add_v4"', '"vadd"')
    )


def test_it_rejects_a_spec_with_too_few_parameters() -> None:
    message = refused(SPEC.replace(', {kind="u64", axis="N"}', ""))
    assert "takes 4 parameter(s)" in message and "the spec gives 3" in message


def test_it_rejects_a_parameter_of_the_wrong_size() -> None:
    message = refused(SPEC.replace('{kind="u64", axis="N"}', '{kind="u32", axis="N"}'))
    assert "params[3]" in message and "4-byte integer" in message and ".u64 param_n" in message


def test_it_rejects_a_tensor_map_where_the_kernel_takes_a_pointer() -> None:
    spec = SPEC.replace('{kind="ptr", tensor="a"}', '{kind="tensormap", tensor="a", box=[64]}')
    assert "params[0]" in refused(spec)


def test_it_rejects_an_unknown_tensor_or_axis() -> None:
    assert "unknown tensor 'x'" in refused(SPEC.replace('tensor="c"', 'tensor="x"'))
    assert "unknown axis 'M'" in refused(SPEC.replace('axis="N"', 'axis="M"'))


def test_it_requires_a_parameter_for_every_output() -> None:
    assert "output 'c'" in refused(SPEC.replace('tensor="c"', 'tensor="b"'))


def test_it_refuses_unsafe_grid_expressions() -> None:
    assert "__import__" in refused(SPEC.replace('"cdiv(N, 1024)"', "\"__import__('os')\""))


def test_it_rejects_a_block_of_more_than_1024_threads() -> None:
    assert "2048 threads" in refused(SPEC.replace("[256, 1, 1]", "[1024, 2, 1]"))


def test_it_rejects_a_block_beyond_the_entrys_maxntid() -> None:
    source = VADD.replace(".maxntid 1024, 1, 1", ".maxntid 128, 1, 1")
    assert ".maxntid [128, 1, 1]" in refused(source=source)


def test_it_rejects_dynamic_shared_memory_over_the_arch_limit() -> None:
    message = refused(SPEC + "dynamic_smem = 233472\n")
    assert "exceeds sm_90a's limit of 232448 bytes" in message


def test_a_grid_that_overflows_for_some_shape_names_the_shape() -> None:
    message = refused(SPEC.replace('"cdiv(N, 1024)", 1, 1', '1, "N", 1'))
    assert "shape N=" in message and "out of range" in message


def test_it_rejects_a_cluster_on_an_arch_without_clusters() -> None:
    spec = parse_spec(SPEC + "cluster = [2, 1, 1]\n", ("N",))
    entry = parse_entries(VADD)["vector_add_v4"]
    check_static(spec, ARCHS["sm_90a"], entry)
    with pytest.raises(SpecError, match="sm_80 has no thread-block clusters"):
        check_static(spec, ARCHS["sm_80"], entry)


def test_a_cluster_must_divide_the_grid() -> None:
    assert "not a multiple of cluster" in refused(SPEC + "cluster = [2, 1, 1]\n")


def test_sm_100a_needs_ptx_isa_8_6() -> None:
    source = VADD.replace(".target sm_90", ".target sm_100a")
    assert "sm_100a needs PTX .version 8.6 or newer" in refused(source=source, archs=["sm_100a"])


def test_arch_specific_ptx_cannot_target_another_arch() -> None:
    source = VADD.replace(".target sm_90", ".target sm_90a")
    assert ".target sm_90a is specific" in refused(source=source, archs=["b200"])


def test_a_missing_spec_is_refused_with_a_hint() -> None:
    assert "solboard-launch" in refused(spec="", source=VADD.replace("// solboard-launch:", "// nothing"))


@pytest.mark.parametrize(
    "path",
    ["examples/ptx/vector_add.ptx", "examples/ptx/gemm_bf16_mma.ptx", "examples/ptx/gemm_bf16_wgmma_tma.ptx"],
)
def test_each_ptx_example_assembles_for_sm_90a_and_fits_its_problem(path: str) -> None:
    problem = "vector_add" if "vector_add" in path else "gemm_bf16"
    result = validate_upload("ptx", (ROOT / path).read_text(), None, problem, ["sm_90a"])
    assert result.ok, result.messages()


@pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")
class TestCudaSources:
    def test_the_cuda_example_compiles_and_fits_its_problem(self) -> None:
        source = (ROOT / "examples/cuda/vector_add.cu").read_text()
        result = validate_upload("cuda", source, None, "vector_add", ["sm_90a"])
        assert result.ok, result.messages()

    def test_a_compile_error_keeps_nvccs_words_and_line(self) -> None:
        source = (ROOT / "examples/cuda/vector_add.cu").read_text().replace("c4[1] =", "c5[1] =")
        line = next(i for i, row in enumerate(source.splitlines(), 1) if "c5[1]" in row)
        errors = validate_upload("cuda", source, None, "vector_add", ["sm_90a"]).archs[0].errors
        assert any(e.stage == "nvcc" and e.line == line and "c5" in e.message for e in errors)

    @pytest.mark.parametrize(
        "include",
        [
            '#include "/etc/passwd"',
            "#include </etc/passwd>",
            "#include <../x.h>",
            "#define F </etc/passwd>\n#include F",
            '#inc\\\nlude "/etc/passwd"',
            '%:include "/etc/passwd"',
        ],
    )
    def test_it_refuses_includes_that_could_read_host_files(self, include: str) -> None:
        """Jailed, /etc/passwd is not there; unjailed, the include check refuses it (test_compile_jail)."""
        source = include + "\n" + (ROOT / "examples/cuda/vector_add.cu").read_text()
        result = validate_upload("cuda", source, None, "vector_add", ["sm_90a"])
        assert not result.ok and "root:" not in "\n".join(result.messages())


def test_validation_imports_neither_torch_nor_the_cuda_driver() -> None:
    """The web calls validate_upload and never imports torch (README.md, "Architecture")."""
    import subprocess
    import sys

    code = (
        "import sys; from evaluator.ptx import validate_upload; "
        "r = validate_upload('ptx', open('examples/ptx/vector_add.ptx').read(), None, 'vector_add', "
        "['sm_90a']); "
        "assert r.ok; print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'cuda')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
