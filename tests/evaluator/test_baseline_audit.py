"""The baseline audit (issue 16) on the CPU: benchmarks/baseline_audit.py runs its smoke test, and
every replaced baseline is a faster formulation of the same arithmetic, not a different answer.

The timings need a GPU (benchmarks/results/baseline_audit.md says which are still to be measured).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from evaluator.problems import get_problem

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "baseline_audit.py"


def audit() -> ModuleType:
    spec = importlib.util.spec_from_file_location("baseline_audit", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_changed_problem_is_a_newer_version_than_the_baseline_it_replaced() -> None:
    for name, (replaced, _) in audit().CHANGED.items():
        assert get_problem(name).version > replaced, name


def test_the_new_baselines_give_the_old_ones_results_on_the_cpu_shapes() -> None:
    """Same arithmetic (softmax: fp32 inside, one rounding of the output; attention_fwd, attention_bwd and
    histogram run version 1's CPU path; moe_permute's sort and binary search give argsort's order and
    bincount's offsets): bitwise the same outputs. Outputs poisoned as the harness does (NaN, or the integer
    sentinel)."""
    for name, (_, old) in audit().CHANGED.items():
        problem = get_problem(name)
        module = problem.reference_module()
        for shape in problem.select_shapes("all", "cpu"):
            for distribution in problem.distributions:
                inputs = module.generate_inputs(shape.axes, 1, "cpu", distribution)
                outputs = {}
                for label, run in (("old", old), ("new", module.baseline)):
                    result = list(audit()._poisoned_outputs(problem, shape, "cpu").values())
                    run(*inputs.values(), *result, **problem.call_kwargs(shape.axes))
                    outputs[label] = result
                for old_out, new_out in zip(outputs["old"], outputs["new"], strict=True):
                    assert torch.equal(old_out, new_out), (name, shape.shape_id, distribution)


def test_the_audit_script_runs_its_cpu_smoke_test(tmp_path: Path) -> None:
    out = tmp_path / "audit.json"
    assert (
        audit().main(["--device", "cpu", "--quick", "--problems", "softmax,attention_fwd", "--out", str(out)])
        == 0
    )
    result = json.loads(out.read_text())
    variants = {(row["problem"], row["variant"]) for row in result["rows"]}
    # CUDA-only candidates (SDPA's default dispatch) are left out on the CPU; both versions ran.
    assert variants == {
        ("softmax", "old"),
        ("softmax", "new"),
        ("attention_fwd", "old"),
        ("attention_fwd", "new"),
    }
    assert all("error" not in row and row["median_us"] > 0 for row in result["rows"])
    softmax = [row for row in result["rows"] if row["problem"] == "softmax"]
    assert all(o["margin"] < 0.5 for row in softmax for d in row["margins"].values() for o in d.values())
    assert result["changed"]["softmax"] == {"replaced_version": 1, "now": get_problem("softmax").version}


def test_the_later_candidates_that_run_on_the_cpu_pass_every_distribution_there(tmp_path: Path) -> None:
    """Integer outputs (moe_permute's offsets, sort_keys' keys) poisoned as the harness does, and each
    candidate's margins as good as the baseline's, before a GPU times them (moe_permute's candidate is
    its version 2 now, as are fp8_quant_per_token's and others: old against new)."""
    out = tmp_path / "audit.json"
    problems = "fp8_quant_per_token,sort_keys,moe_permute,w4a16_gemm,mla_decode"
    assert audit().main(["--device", "cpu", "--quick", "--problems", problems, "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    # moe_permute's, mla_decode's and w4a16_gemm's candidates became their new versions after the H200 audit,
    # fp8_quant_per_token's after it.
    assert {(row["problem"], row["variant"]) for row in rows} == {
        ("fp8_quant_per_token", "old"), ("fp8_quant_per_token", "new"),
        ("sort_keys", "current"), ("sort_keys", "candidate:sort_out"),
        ("moe_permute", "old"), ("moe_permute", "new"),
        ("w4a16_gemm", "old"), ("w4a16_gemm", "new"),
        ("mla_decode", "old"), ("mla_decode", "new"),
    }
    for row in rows:
        assert "error" not in row, row
        margins = [output for by_output in row["margins"].values() for output in by_output.values()]
        assert margins and all(
            output["margin"] < 1 and output["matched"] >= output["required"] for output in margins
        ), row


def test_w4a16_gemm_gives_tinygemm_the_problems_weights_on_cuda() -> None:
    """Version 3's baseline takes tinygemm at M <= 16 on CUDA only, so no CPU run checks what it
    hands the op. Checked here by decoding its uint8 weights as int4mm.cu does (column 2b in the high
    nibble of byte b, 2b + 1 in the low one; bf16 (q - 8) * scale + zero, one rounding, as its
    hfma2): the problem's weights rounded to bf16, bit for bit. The problem's own bytes do not."""
    problem = get_problem("w4a16_gemm")
    reference = module = problem.reference_module()

    def tinygemm_weight(nibbles: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        n = nibbles.shape[0]
        q = torch.stack((nibbles >> 4, nibbles & 0xF), dim=-1).view(n, -1).double()  # (N, K)
        scale, zero = (table[..., i].t().double().repeat_interleave(128, dim=1) for i in (0, 1))
        return ((q - 8) * scale + zero).to(torch.bfloat16)

    for shape in problem.select_shapes("all", "cpu"):
        for distribution in problem.distributions:
            inputs = reference.generate_inputs(shape.axes, 1, "cpu", distribution)
            qweight, scales = inputs["qweight"], inputs["scales"]
            expected = reference.dequantise_fp64(qweight, scales).to(torch.bfloat16)
            table = module.tinygemm_scales_and_zeros(scales)
            assert table.shape == (shape.axes["K"] // 128, shape.axes["N"], 2) and table.is_contiguous()
            assert torch.equal(tinygemm_weight(module.tinygemm_nibbles(qweight), table), expected)
            assert not torch.equal(tinygemm_weight(qweight.view(torch.uint8), table), expected)


def test_a_cudnn_refusal_moves_that_shape_alone_to_the_fallback() -> None:
    """attention_fwd's and attention_bwd's baselines take cuDNN where it accepts the inputs. A refusal
    is remembered for its (device, shape, causal): the shape is not tried again, and another shape of
    the same job (an unranked odd length refused first, the ranked shapes after it) still gets cuDNN."""
    from evaluator.problems import _attention

    tried: list[tuple[int, ...]] = []

    def refuse_odd_lengths(q: torch.Tensor) -> str:
        tried.append(tuple(q.shape))
        if q.shape[2] % 2:
            raise RuntimeError("cuDNN Frontend error: no valid execution plans built")
        return "cudnn"

    odd, even = torch.empty(1, 1, 77, 8), torch.empty(1, 1, 64, 8)
    try:
        assert _attention.cudnn_or_none(odd, True, lambda: refuse_odd_lengths(odd)) is None
        assert _attention.cudnn_or_none(odd, True, lambda: refuse_odd_lengths(odd)) is None
        assert _attention.cudnn_or_none(even, True, lambda: refuse_odd_lengths(even)) == "cudnn"
        assert _attention.cudnn_or_none(odd, False, lambda: refuse_odd_lengths(odd)) is None
        assert tried == [odd.shape, even.shape, odd.shape]  # the refused (shape, causal) was not tried again

        def out_of_memory() -> str:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

        with pytest.raises(torch.OutOfMemoryError):  # a shortage is no refusal: not remembered
            _attention.cudnn_or_none(even, False, out_of_memory)
        assert _attention.cudnn_or_none(even, False, lambda: refuse_odd_lengths(even)) == "cudnn"
    finally:
        _attention._CUDNN_REFUSED.clear()
