"""The launch spec and its arithmetic: parsed with a whitelist, never evaluated as Python."""

from __future__ import annotations

import pytest

from evaluator.ptx.errors import SpecError
from evaluator.ptx.expr import evaluate, parse_expression
from evaluator.ptx.spec import extract_spec_text, parse_spec

AXES = ("M", "N", "K")
SPEC = """
entry = "k"
grid = ["ceil(N/256)", "cdiv(M, 128)", 1]
block = [256, 1, 1]
dynamic_smem = "max(1024, K * 2)"
params = [ {kind="ptr", tensor="A"}, {kind="u32", axis="N"}, {kind="u64", value="M*N"} ]
"""


def value(text: str, **axes: int) -> int:
    return evaluate(parse_expression(text, AXES, "test"), {"M": 1, "N": 1, "K": 1, **axes}, "test")


def test_it_reads_the_launch_block_from_leading_comments() -> None:
    source = (
        '// a kernel\n// solboard-launch:\n// entry = "k"\n// block = [32]\n//\n// not the spec\n'
        ".version 8.0\n"
    )
    assert extract_spec_text(source) == 'entry = "k"\nblock = [32]'


def test_the_block_ends_at_the_first_line_that_is_not_a_comment() -> None:
    source = '// solboard-launch:\n// entry = "k"\n.version 8.0\n// grid = [1]\n'
    assert extract_spec_text(source) == 'entry = "k"'


def test_it_evaluates_grid_block_smem_and_scalars_per_shape() -> None:
    spec = parse_spec(SPEC, AXES)
    axes = {"M": 129, "N": 7168, "K": 5120}
    assert spec.grid_for(axes) == (28, 2, 1)
    assert spec.block_for(axes) == (256, 1, 1)
    assert spec.smem_for(axes) == 10240
    assert [spec.scalar_for(p, axes) for p in spec.params[1:]] == [7168, 129 * 7168]


def test_division_is_exact_so_ceil_rounds_up_any_remainder() -> None:
    assert value("ceil(N/256)", N=257) == 2
    assert value("ceil(N/256)", N=256) == 1
    assert value("cdiv(N, 3) + N // 3 + N % 3", N=10) == 4 + 3 + 1


def test_a_non_integer_result_is_refused() -> None:
    with pytest.raises(SpecError, match="not an integer"):
        value("N/3", N=10)


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",
        "N.__class__",
        "(lambda: 1)()",
        "N ** 40",
        "[N][0]",
        "open('x')",
        "1.5 * N",
        "N if N else 1",
    ],
)
def test_it_refuses_anything_but_integer_arithmetic(text: str) -> None:
    with pytest.raises(SpecError):
        parse_expression(text, AXES, "grid[0]")


def test_it_refuses_unknown_axis_names() -> None:
    with pytest.raises(SpecError, match="unknown name 'Q'"):
        parse_expression("ceil(Q/2)", AXES, "grid[0]")


def test_it_refuses_a_grid_expression_that_does_not_parse() -> None:
    with pytest.raises(SpecError, match="does not parse"):
        parse_spec(SPEC.replace('"ceil(N/256)"', '"ceil(N/"'), AXES)


def test_huge_intermediate_values_are_refused() -> None:
    with pytest.raises(SpecError, match="out of range"):
        value("N*N*N*N*N*N*N", N=2**20)


def test_a_scalar_needs_exactly_one_of_axis_or_value() -> None:
    with pytest.raises(SpecError, match="exactly one"):
        parse_spec(SPEC.replace('{kind="u32", axis="N"}', '{kind="u32"}'), AXES)


def test_unknown_keys_are_named() -> None:
    with pytest.raises(SpecError, match="unknown key"):
        parse_spec(SPEC + "gird = [1]\n", AXES)


def test_a_tensor_map_box_must_fit_tma_limits() -> None:
    bad = SPEC.replace('{kind="ptr", tensor="A"}', '{kind="tensormap", tensor="A", box=[512, 64]}')
    with pytest.raises(SpecError, match="between 1 and 256"):
        parse_spec(bad, AXES)


def test_a_cluster_over_eight_blocks_is_refused() -> None:
    with pytest.raises(SpecError, match="at most 8"):
        parse_spec(SPEC + "cluster = [4, 4, 1]\n", AXES)
