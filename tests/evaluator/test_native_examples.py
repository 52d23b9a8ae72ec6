"""The native examples of PTXBench's task set compile with the real nvcc and ptxas for sm_90a, fit
every shape of their problem, and carry the architecture evidence their design promises: the
wgmma + TMA ones show HGMMA (QGMMA for fp8) and UTMALDG in the SASS and meet their problem's
required features; the plain CUDA ones miss them where the problem requires them. Whether they
compute the right numbers is proven on a GPU (benchmarks/native_examples.sh)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.problems import get_problem
from evaluator.ptx import validate_upload
from evaluator.ptx.spec import extract_spec_text, parse_spec
from evaluator.ptx.toolchain import find_tool

pytestmark = pytest.mark.skipif(find_tool("nvcc") is None or find_tool("ptxas") is None,
                                reason="nvcc and ptxas are not installed")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "cuda"
#: example file -> (problem, SASS families it must show, features it must miss on sm_90a)
CASES = {
    "attention_fwd.cu": ("attention_fwd", {"HMMA", "LDSM"}, ["wgmma", "tma"]),
    "attention_fwd_wgmma_tma.cu": ("attention_fwd", {"HGMMA", "UTMALDG", "HMMA", "SYNCS"}, []),
    "attention_bwd.cu": ("attention_bwd", {"HMMA", "LDSM"}, ["wgmma", "tma"]),
    "gemm_fp8.cu": ("gemm_fp8", {"HMMA", "LDSM"}, ["wgmma", "tma"]),
    "gemm_fp8_wgmma_tma.cu": ("gemm_fp8", {"QGMMA", "UTMALDG", "SYNCS"}, []),
    "paged_decode_attention.cu": ("paged_decode_attention", set(), ["wgmma", "tma"]),
    "rmsnorm.cu": ("rmsnorm", set(), []),
    "moe_unpermute.cu": ("moe_unpermute", set(), []),
}


def test_every_native_example_in_the_folder_is_checked_here() -> None:
    assert {path.name for path in EXAMPLES.glob("*.cu")} == set(CASES) | {"vector_add.cu"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_example_compiles_fits_every_shape_and_shows_its_evidence(name: str) -> None:
    problem, families, missing = CASES[name]
    result = validate_upload("cuda", (EXAMPLES / name).read_text(), None, get_problem(problem), ["sm_90a"])
    assert result.ok, result.messages()
    arch = result.archs[0]
    kernel = next(k for k in arch.kernels if k.name == arch.entry)
    assert kernel.spill_store_bytes == 0 and kernel.spill_load_bytes == 0
    assert arch.evidence is not None
    assert families <= set(arch.evidence.sass_families), arch.evidence.sass_families
    assert arch.evidence.missing == missing


@pytest.mark.parametrize("name", ["attention_fwd_wgmma_tma.cu", "gemm_fp8_wgmma_tma.cu"])
def test_the_tma_examples_ask_for_tensor_maps_that_fit_every_shape(name: str) -> None:
    """A TMA box must tile the problem's tensors: the harness encodes one map per tensor and shape."""
    problem = get_problem(CASES[name][0])
    spec = parse_spec(extract_spec_text((EXAMPLES / name).read_text()) or "", problem.axes)
    maps = [param for param in spec.params if param.kind == "tensormap"]
    assert maps and all(param.swizzle == "128B" for param in maps)
    assert {param.tensor for param in maps} <= set(problem.ptx["tensormaps"])


def test_the_plain_attention_example_compiles_for_blackwell_from_the_same_source() -> None:
    """No sm_90a-only instruction in the plain examples: one source serves H100/H200 and B200."""
    source = (EXAMPLES / "attention_fwd.cu").read_text()
    result = validate_upload("cuda", source, None, get_problem("attention_fwd"), ["sm_100a"])
    assert result.ok, result.messages()
    assert result.archs[0].evidence is not None and result.archs[0].evidence.missing == ["tcgen05", "tma"]
