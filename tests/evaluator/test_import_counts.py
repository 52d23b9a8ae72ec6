"""Counts without a hand: a problem imported without counts gets them derived from its reference
(flops by class, compulsory bytes), labelled as such, and ranks; one whose counts are missing
says "no counts" rather than "0 us". And the baseline, which IS the reference, is held to the
tolerance against the reference's float64 formulation (docs/importing.md).

Modules: `evaluator/importers/derived_counts.py`, `evaluator/importers/independent.py`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from evaluator.importers import import_problems
from evaluator.importers.render import write_folder
from evaluator.problems import load_problem
from tests.evaluator.import_sources import rk_task, run_module, sxb_definition, workload

V_PROJ = """
import torch

def run(hidden_states, v_proj_weight):
    return torch.matmul(hidden_states, v_proj_weight.t())
"""

ROUTER = """
import torch

def run(hidden_states, gate_weight, scale_hidden, scale_weight):
    logits = torch._scaled_mm(hidden_states, gate_weight.t(), scale_a=scale_hidden, scale_b=scale_weight,
                              out_dtype=torch.bfloat16)
    return logits[:, :64]
"""


def evaluator(*args: str, imported: Path) -> subprocess.CompletedProcess[str]:
    return run_module("evaluator", *args, imported=imported)


@pytest.fixture(scope="module")
def derived(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bf16 projection GEMM (hidden 5120 -> 1024) and an fp8 router (3584 -> 128 padded experts),
    imported without counts."""
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("out")
    sxb_definition(
        src / "v_proj",
        name="v_proj",
        reference=V_PROJ,
        axes={
            "batch_size": {"type": "var"},
            "seq_len": {"type": "var"},
            "hidden_size": {"type": "const", "value": 5120},
            "kv_size": {"type": "const", "value": 1024},
        },
        inputs={
            "hidden_states": {"shape": ["batch_size", "seq_len", "hidden_size"], "dtype": "bfloat16"},
            "v_proj_weight": {"shape": ["kv_size", "hidden_size"], "dtype": "bfloat16"},
        },
        outputs={"v": {"shape": ["batch_size", "seq_len", "kv_size"], "dtype": "bfloat16"}},
        workloads=[
            workload("small", {"batch_size": 1, "seq_len": 4}),
            workload("b16", {"batch_size": 16, "seq_len": 128}),
        ],
    )
    sxb_definition(
        src / "router",
        name="fp8_router",
        reference=ROUTER,
        axes={
            "M": {"type": "var"},
            "hidden_size": {"type": "const", "value": 3584},
            "padded_experts": {"type": "const", "value": 128},
            "num_experts": {"type": "const", "value": 64},
        },
        inputs={
            "hidden_states": {"shape": ["M", "hidden_size"], "dtype": "float8_e4m3fn"},
            "gate_weight": {"shape": ["padded_experts", "hidden_size"], "dtype": "float8_e4m3fn"},
            "scale_hidden": {"shape": [], "dtype": "float32"},
            "scale_weight": {"shape": [], "dtype": "float32"},
        },
        outputs={"router_logits": {"shape": ["M", "num_experts"], "dtype": "bfloat16"}},
        workloads=[workload("m16", {"M": 16}), workload("m1024", {"M": 1024})],
    )
    report = import_problems("sol-execbench", src, out)
    assert [item.status for item in report.problems] == ["converted", "converted"], [
        p.reason for p in report.problems
    ]
    assert all(item.counts == "derived" and item.rankable for item in report.problems)
    return out


def test_a_projection_gemm_gets_the_hand_counts_flops_bytes_and_speed_of_light(derived: Path) -> None:
    problem = load_problem(derived / "v_proj")
    assert problem.imported["counts"] == "derived" and problem.ranked_shapes == problem.shapes
    counts = problem.counts({"batch_size": 16, "seq_len": 128, "hidden_size": 5120, "kv_size": 1024})
    assert counts.flops == {"bf16_tensor": 2 * 2048 * 5120 * 1024}  # 2.147e10
    assert counts.bytes == 35_651_584  # 2 (MK + NK + MN) bytes
    result = evaluator("sol", "v_proj", "--gpu", "h200", "--json", imported=derived)
    assert result.returncode == 0, result.stderr
    row = next(row for row in json.loads(result.stdout)["shapes"] if row["axes"]["batch_size"] == 16)
    assert row["bound"] == "compute" and abs(row["t_sol_us"] - 21.714) < 0.01


def test_an_fp8_router_counts_fp8_tensor_flops_of_the_padded_gemm(derived: Path) -> None:
    problem = load_problem(derived / "fp8_router")
    counts = problem.counts({"M": 1024, "hidden_size": 3584, "padded_experts": 128, "num_experts": 64})
    assert counts.flops == {"fp8_tensor": 2 * 1024 * 3584 * 128}  # 9.395e8


def test_a_problem_without_counts_says_no_counts(derived: Path, tmp_path: Path) -> None:
    from evaluator.importers.common import Candidate

    missing = Candidate(
        source=tmp_path,
        format="sol-execbench",
        upstream_name="no_counts",
        name="no_counts",
        title="t",
        description="d",
        axes=["n"],
        inputs=[{"name": "x", "shape": ["n"], "dtype": "float32"}],
        outputs=[{"name": "y", "shape": ["n"], "dtype": "float32"}],
        tolerance={"atol": 0.0, "rtol": 0.0, "matched_ratio": 1.0},
        shapes=[{"n": 8, "ranked": True, "id": "n8", "cpu": True}],
        baseline="b",
        adapter={"format": "sol-execbench"},
    )
    write_folder(missing, tmp_path / "imported" / "no_counts", 1)
    result = evaluator("sol", "no_counts", "--gpu", "h200", imported=tmp_path / "imported")
    assert result.returncode == 0, result.stderr
    assert "no counts" in result.stdout and "0.000" not in result.stdout and "compute" not in result.stdout


MATMUL = """
import torch
from utils import make_match_reference

def ref_kernel(data):
    a, b = data
    return a @ b

def generate_input(m, seed):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    a = torch.randn(m, 256, device="cuda", generator=gen)
    return a, torch.randn(256, m, device="cuda", generator=gen)

check_implementation = make_match_reference(ref_kernel, rtol=RTOL, atol=ATOL)
"""


BF16_CHAIN = """
import torch
from utils import make_match_reference

def ref_kernel(data):
    (x,) = data
    return (x * 1.1) * 1.3

def generate_input(n, seed):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    return (torch.randn(n, 64, device="cuda", generator=gen).to(torch.bfloat16),)

check_implementation = make_match_reference(ref_kernel, rtol=1e-3, atol=0.0)
"""

SILU_PROJECTION = """
import torch

def run(x, w):
    return torch.nn.functional.silu(x @ w.t())
"""


def test_a_tolerance_tighter_than_the_references_own_rounding_is_widened_and_labelled(tmp_path: Path) -> None:
    from evaluator.importers.independent import SAFETY_FACTOR

    # a bf16 reference that rounds twice (after each product), held to rtol 1e-3: a third of one
    # bf16 rounding (2^-8 relative), so a kernel that rounds once fails where the reference does not
    chain = rk_task(
        tmp_path / "problems" / "pmpp", "scale_py", reference=BF16_CHAIN, tests=[{"n": 64, "seed": 1}]
    )
    (item,) = import_problems("reference-kernels", chain, tmp_path / "out").problems
    assert item.status == "converted", item.reason
    problem = load_problem(tmp_path / "out" / "pmpp_scale_py")
    factors = problem.imported["tolerance_factors"]
    assert problem.imported["tolerance"] == "widened"
    assert problem.imported["upstream_tolerance"] == {"atol": 0.0, "rtol": 1e-3, "matched_ratio": 1.0}
    # no atol to widen alone: rtol grows by the least factor that passes, one bf16 rounding over rtol
    # (2^-8 / 1e-3 = 3.9, at most twice that near the bottom of a binade), times the safety factor
    factor = factors["rtol"]
    assert factors["atol"] == factor and SAFETY_FACTOR * 3 <= factor <= SAFETY_FACTOR * 8.5, factors
    assert problem.rtol == pytest.approx(1e-3 * factor, rel=1e-2) and problem.atol == 0.0
    assert "Tolerance widened at import" in problem.description and "rtol 0.001" in problem.description
    assert any("float64 formulation (within the widened tolerance of it)" in note for note in item.notes), (
        item.notes
    )
    text = (tmp_path / "out" / "pmpp_scale_py" / "problem.toml").read_text()
    assert "widened at import (atol x" in text.split("[tolerance]")[0]
    # the catalogue's self-check holds the baseline to the float64 formulation under the widened tolerance
    check = run_module("evaluator.problems.selfcheck", "pmpp_scale_py", "--device", "cpu", "--shapes", "cpu",
                       imported=tmp_path / "out")
    assert check.returncode == 0, check.stderr
    assert '"independent"' in check.stdout


def test_every_workload_tolerance_is_widened_by_the_same_factor(tmp_path: Path) -> None:
    # a bf16 projection and SiLU (two roundings) whose workloads ask for 1e-3 and 2e-3 on 0.99 of elements
    tight, tighter = {"max_atol": 2e-3, "max_rtol": 2e-3, "required_matched_ratio": 0.99}, {
        "max_atol": 1e-3, "max_rtol": 1e-3, "required_matched_ratio": 0.99}
    folder = sxb_definition(
        tmp_path / "src" / "silu_proj",
        name="silu_proj",
        reference=SILU_PROJECTION,
        axes={"rows": {"type": "var"}, "hidden": {"type": "const", "value": 64}},
        inputs={
            "x": {"shape": ["rows", "hidden"], "dtype": "bfloat16"},
            "w": {"shape": ["hidden", "hidden"], "dtype": "bfloat16"},
        },
        outputs={"y": {"shape": ["rows", "hidden"], "dtype": "bfloat16"}},
        workloads=[
            workload("r64", {"rows": 64}, tolerance=tighter),
            workload("r128", {"rows": 128}, tolerance=tight),
            workload("r256", {"rows": 256}, tolerance=tight),
        ],
    )
    (item,) = import_problems("sol-execbench", folder, tmp_path / "out").problems
    assert item.status == "converted", item.reason
    problem = load_problem(tmp_path / "out" / "silu_proj")
    factors = problem.imported["tolerance_factors"]
    assert max(factors.values()) > 1 and problem.imported["upstream_tolerance"]["rtol"] == 2e-3
    widened = {shape.axes["rows"]: problem.tolerance_for("y", dict(shape.axes)) for shape in problem.shapes}
    for rows, upstream in ((64, 1e-3), (128, 2e-3), (256, 2e-3)):
        assert widened[rows].atol == pytest.approx(upstream * factors["atol"], rel=1e-2)
        assert widened[rows].rtol == pytest.approx(upstream * factors["rtol"], rel=1e-2)
    assert widened[64].matched_ratio == 0.99


def test_an_exact_check_of_values_the_reference_rounds_is_still_refused(tmp_path: Path) -> None:
    exact = rk_task(
        tmp_path / "problems" / "pmpp",
        "matmul_py",
        reference=MATMUL.replace("RTOL", "0.0").replace("ATOL", "0.0"),
        tests=[{"m": 32, "seed": 1}],
    )
    (item,) = import_problems("reference-kernels", exact, tmp_path / "out").problems
    assert item.status == "refused" and "tighter than the reference's own rounding" in str(item.reason), (
        item.reason
    )


def test_the_widening_is_the_least_factor_that_passes(tmp_path: Path) -> None:
    import math

    import torch

    from evaluator.importers.independent import Shortfall, _need, widening

    expected = torch.tensor([1.0, 2.0, 4.0, 8.0], dtype=torch.float64)
    got = expected + torch.tensor([0.0, 0.02, 0.4, 0.08], dtype=torch.float64)
    allowed = 0.01 * expected  # rtol 1e-2: the errors need 0, 1, 10 and 1 times it
    assert _need(got, expected, allowed, 1.0) == pytest.approx(10.0)
    assert _need(got, expected, allowed, 0.75) == pytest.approx(1.0)
    assert math.isinf(_need(got, expected, torch.zeros_like(expected), 1.0))
    # atol alone grows where the errors past rtol are small: 0 and 0.02 - 0.02, but 0.4 - 0.04 = 0.36
    # for the third element, so atol 1e-3 needs x360 for every element and x0 for 3 of 4
    kept = 0.01 * expected
    assert _need(got, expected, 1e-3, 1.0, kept) == pytest.approx(360.0)
    assert _need(got, expected, 1e-3, 0.75, kept) == pytest.approx(0.0)
    # the need times the safety factor, rounded up to two significant digits
    assert widening(Shortfall("s", "y", 0.5, 1.0, 0.0, 1e-3, 10.0)) == {"atol": 40.0, "rtol": 40.0}
    assert widening(Shortfall("s", "y", 0.5, 1.0, 0.0, 1e-3, 2.912)) == {"atol": 12.0, "rtol": 12.0}
    assert widening(Shortfall("s", "y", 0.5, 1.0, 1e-5, 5e-2, 2.0, 3.3, atol_room=True)) == {
        "atol": 14.0,
        "rtol": 1.0,
    }
    with pytest.raises(Exception, match="compares little"):  # rtol 0.4
        widening(Shortfall("s", "y", 0.5, 1.0, 0.0, 1e-2, 10.0))
    with pytest.raises(Exception, match="tighter than the reference's own rounding"):
        widening(Shortfall("s", "y", 0.5, 1.0, 0.0, 0.0, math.inf))


def test_a_fair_tolerance_is_kept(tmp_path: Path) -> None:
    fair = rk_task(tmp_path / "fair" / "pmpp", "matmul_py", reference=MATMUL.replace("RTOL", "1e-4").replace(
        "ATOL", "1e-4"), tests=[{"m": 32, "seed": 1}])
    (item,) = import_problems("reference-kernels", fair, tmp_path / "out").problems
    assert item.status == "converted", item.reason
    assert any("float64 formulation (within the tolerance of it)" in note for note in item.notes), item.notes
    problem = load_problem(tmp_path / "out" / "pmpp_matmul_py")
    assert problem.imported["tolerance"] == "upstream" and (problem.atol, problem.rtol) == (1e-4, 1e-4)
    assert "Tolerance widened" not in problem.description


def test_a_shape_without_derived_counts_reads_as_no_counts_not_an_error() -> None:
    """A partial conversion derives counts for some shapes only (the others unranked). counts() at
    one of the others raised KeyError, and with it sync_problems: every later import and `make run`."""
    from evaluator.importers.render import DERIVED_COUNTS

    table = json.dumps({'{"n":1024}': {"flops": {"fp32_simt": 2048.0}, "bytes": 8192.0}}, indent=4)
    source = DERIVED_COUNTS.format(name="partial", method="-", table=table)
    namespace: dict[str, object] = {}
    exec(compile(source, "counts.py", "exec"), namespace)
    counts = namespace["counts"]
    assert callable(counts)
    assert counts({"n": 1024}).bytes == 8192.0
    unranked = counts({"n": 4096})
    assert (unranked.flops, unranked.bytes) == ({}, 0.0)
