"""Every single-GPU problem takes PTX and CUDA C++: its [ptx] table is sound, its scalars and
constants reach native kernels, and a kernel with the signature generated from the table passes
upload validation with the real ptxas on both targets."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from evaluator.problems import CATALOGUE_DIR, get_problem, load_catalogue
from evaluator.ptx import validate_upload
from evaluator.ptx.native_abi import describe, from_problem
from evaluator.ptx.table import languages_markdown, table_errors
from evaluator.ptx.toolchain import find_tool

CATALOGUE = load_catalogue()
SINGLE = sorted(name for name, problem in CATALOGUE.items() if problem.kind == "single")
MULTI = sorted(name for name, problem in CATALOGUE.items() if problem.kind == "multi")
REPO = Path(__file__).resolve().parents[2]
needs_ptxas = pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas is not installed")


def test_every_single_gpu_problem_takes_python_ptx_and_cuda() -> None:
    assert len(SINGLE) >= 33
    assert [name for name in SINGLE if set(CATALOGUE[name].languages) != {"python", "ptx", "cuda"}] == []


def test_multi_gpu_problems_take_python_only() -> None:
    assert MULTI and all(CATALOGUE[name].languages == ("python",) for name in MULTI)


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_every_ptx_table_names_only_what_its_problem_has(name: str) -> None:
    assert table_errors(CATALOGUE[name]) == []


def test_docs_show_the_problems_by_language_as_they_are() -> None:
    native = [problem for problem in CATALOGUE.values() if problem.folder.parent == CATALOGUE_DIR]
    assert languages_markdown(native) in (REPO / "docs" / "ptx.md").read_text(), (
        "regenerate the table of docs/ptx.md section 3 with evaluator.ptx.table.languages_markdown")


def test_the_table_check_finds_every_kind_of_mistake() -> None:
    problem = get_problem("attention_fwd")
    broken = replace(problem, ptx={
        "tensors": ["q", "k", "v", "O", "scores"], "scalars": ["B", "H", "S", "D", "window"], "tile": 64,
        "constants": {"softmax_scale": "1/sqrt(D)"}, "required_features": {"sm_90a": ["wgmma", "warp_magic"]},
    })
    errors = "\n".join(table_errors(broken))
    for words in (
        "unknown key [ptx].tile",
        "'scores', which is not a tensor",
        "leaves out the output 'LSE'",
        "'window', which is not an axis",
        "leaves out 'causal', which Python kernels get as a keyword",
        "softmax_scale must be a finite number",
        "'warp_magic'; known: wgmma",
    ):
        assert words in errors


def test_a_tensor_offered_as_a_tma_descriptor_must_fit_every_shape() -> None:
    problem = get_problem("softmax")  # rows of 5003 bf16: a pitch TMA cannot take
    errors = table_errors(replace(problem, ptx={**problem.ptx, "tensormaps": ["x"]}))
    assert len(errors) == 1 and "'x'" in errors[0] and "multiple of 16" in errors[0]


@pytest.mark.parametrize("name", [n for n in SINGLE if CATALOGUE[n].scalar_args])
def test_keyword_scalars_of_python_kernels_reach_native_kernels_as_parameters(name: str) -> None:
    abi = describe(from_problem(CATALOGUE[name]))
    axes = [param.axis for param in abi.parameters if param.kind in ("u32", "u64")]
    assert set(CATALOGUE[name].scalar_args) <= set(axes)


def _constant(module: str, name: str) -> float:
    import importlib

    return float(getattr(importlib.import_module(f"evaluator.problems.{module}.reference"), name))


CONSTANTS = {
    ("rmsnorm", "eps"): lambda: _constant("rmsnorm", "EPS"),
    ("layernorm", "eps"): lambda: _constant("layernorm", "EPS"),
    ("fp8_quant_per_token", "eps"): lambda: _constant("fp8_quant_per_token", "EPS"),
    ("fp8_quant_per_token", "fp8_max"): lambda: _constant("fp8_quant_per_token", "FP8_MAX"),
    ("fp8_quant_per_block", "eps"): lambda: _constant("fp8_quant_per_token", "EPS"),
    ("fp8_quant_per_block", "fp8_max"): lambda: _constant("fp8_quant_per_token", "FP8_MAX"),
    ("mla_decode", "softmax_scale"): lambda: _constant("mla_decode", "SCALE"),
    ("paged_decode_attention", "softmax_scale"): lambda: 1 / math.sqrt(128),
}


def test_every_constant_is_the_one_the_reference_uses() -> None:
    declared = {
        (name, key): value
        for name in SINGLE
        for key, value in CATALOGUE[name].ptx.get("constants", {}).items()
    }
    head_dim_scales = {key for key in declared if key[1] == "softmax_scale" and key not in CONSTANTS}
    assert set(declared) == set(CONSTANTS) | head_dim_scales
    for key, expected in CONSTANTS.items():
        assert declared[key] == pytest.approx(expected(), rel=1e-15), key
    for name, _ in head_dim_scales:  # attention_fwd/bwd: 1/sqrt(D) holds only while D is one number
        assert {shape.axes["D"] for shape in CATALOGUE[name].shapes} == {128}
        assert declared[(name, "softmax_scale")] == pytest.approx(1 / math.sqrt(128), rel=1e-15)


def test_the_generated_abi_lists_pointers_then_scalars_then_constants_in_the_harness_order() -> None:
    abi = describe(from_problem(get_problem("attention_fwd")))
    assert [(p.kind, p.tensor or p.axis or p.constant) for p in abi.parameters] == [
        ("ptr", "q"), ("ptr", "k"), ("ptr", "v"), ("ptr", "O"), ("ptr", "LSE"), ("u32", "B"), ("u32", "H"),
        ("u32", "S"), ("u32", "D"), ("u32", "causal"), ("f32", "softmax_scale")]
    assert [p.name for p in abi.parameters if p.tensormap_allowed] == ["q", "k", "v", "O"]
    assert abi.required_features == {"sm_90a": ["wgmma", "tma"], "sm_100a": ["tcgen05", "tma"]}
    assert (
        "const __nv_bfloat16* __restrict__ q" in abi.cuda_skeleton
        and "float softmax_scale" in abi.cuda_skeleton
    )


def test_a_multi_gpu_problem_says_why_it_has_no_native_abi() -> None:
    abi = describe(from_problem(CATALOGUE[MULTI[0]]))
    assert not abi.native and "multi-GPU" in abi.reason and abi.parameters == []


@needs_ptxas
@pytest.mark.parametrize("name", SINGLE)
def test_the_generated_ptx_skeleton_passes_validation_on_both_targets(name: str) -> None:
    """The table, the generator and upload validation agree for every problem: a kernel with the
    generated signature and spec is accepted by ptxas for sm_90a and sm_100a on every shape."""
    skeleton = describe(from_problem(CATALOGUE[name])).ptx_skeleton
    result = validate_upload("ptx", skeleton, None, CATALOGUE[name], ["sm_90a", "sm_100a"])
    assert result.ok, result.messages()
    assert [arch.arch for arch in result.archs] == ["sm_90a", "sm_100a"]


@pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")
def test_the_generated_cuda_skeleton_compiles_and_passes_validation() -> None:
    skeleton = describe(from_problem(get_problem("top_k_sampling"))).cuda_skeleton
    result = validate_upload("cuda", skeleton, None, "top_k_sampling", ["sm_90a"])
    assert result.ok, result.messages()


def _spec_with(problem: str, replace_text: tuple[str, str]) -> tuple[str, Any]:
    skeleton = describe(from_problem(get_problem(problem))).ptx_skeleton
    return skeleton.replace(*replace_text), get_problem(problem)


@needs_ptxas
def test_an_f32_parameter_must_name_a_constant_of_the_problem() -> None:
    source, problem = _spec_with("rmsnorm", ('constant="eps"', 'constant="epsilon"'))
    result = validate_upload("ptx", source, None, problem, ["sm_90a"])
    assert not result.ok and "rmsnorm has no constant 'epsilon' (constants: eps)" in "\n".join(
        result.messages()
    )


@needs_ptxas
def test_an_f32_constant_needs_a_four_byte_float_parameter() -> None:
    source, problem = _spec_with("rmsnorm", (".param .f32 rmsnorm_param_7", ".param .u64 rmsnorm_param_7"))
    result = validate_upload("ptx", source, None, problem, ["sm_90a"])
    assert not result.ok and "an f32 constant needs a 4-byte float parameter" in "\n".join(result.messages())


@needs_ptxas
def test_a_tensor_map_on_a_tensor_that_some_shape_gives_an_odd_pitch_is_refused_at_upload() -> None:
    """layernorm's x has 5003-element rows in one shape: refused at upload, naming that shape, rather
    than at the launch of that shape on a runner."""
    problem = get_problem("layernorm")
    loose = replace(problem, ptx={**problem.ptx, "tensormaps": ["x", "weight", "bias"]})
    source = describe(from_problem(loose)).ptx_skeleton
    source = source.replace('{kind="ptr", tensor="x"}', '{kind="tensormap", tensor="x", box=[64, 8]}')
    source = source.replace(".param .u64 layernorm_param_0", ".param .align 64 .b8 layernorm_param_0[128]")
    result = validate_upload("ptx", source, None, loose, ["sm_90a"])
    assert not result.ok
    assert "params[0]: shape T=1000, H=5003: a row pitch of 'x' [1000, 5003] is 10006 bytes" in "\n".join(
        result.messages())


def test_the_launcher_packs_an_f32_constant_as_a_float() -> None:
    import ctypes

    from evaluator.ptx.launch import ParamArray

    array = ParamArray(["ptr", "u32", "f32"], {1: 7, 2: 1e-6})
    assert ctypes.c_float.from_address(array.slot(2)).value == pytest.approx(1e-6, rel=1e-7)
    assert ctypes.c_uint32.from_address(array.slot(1)).value == 7
