"""The baseline audit (issue 16): each changed baseline timed against the one it replaced, and the
alternatives that were considered but not adopted, on every ranked shape. GPU for figures; the CPU
runs a smoke test.

    SOLBOARD_COMMIT=<sha> python3 benchmarks/baseline_audit.py --out audit.json
        [--problems softmax,...] [--no-candidates] [--quick] [--device cuda|cpu]

For each (problem, shape, variant): the median time of one call (``triton.testing.do_bench`` with
``return_mode="median"`` where Triton is installed, else CUDA events around single calls after a
warm-up; on the CPU, wall-clock), warm L2 (do_bench's own cache clearing aside: the figures compare
formulations, they are not the harness's cold-L2 measurement), and the worst margin per output of
the variant's result against the fp64 reference under the problem's tolerance (< 1: every element
passes) for every distribution at seed 1, with the fraction of matching elements.

Variants:

- ``old``: the baseline of the previous version, as it was (kept here, not in the catalogue: the
  catalogue holds the current version only).
- ``new``: the catalogue's ``baseline`` (the current version).
- ``candidate:<name>`` (unless ``--no-candidates``): a formulation considered for a baseline and not
  adopted, with the reason in ``CANDIDATES``. A candidate that fails to run (an op missing from this
  torch, a backend refused for these inputs) is recorded with its error, never fatal.

``--quick``: the CPU shapes on the CPU, the quick shapes on a GPU, and few repetitions. Needs torch
(Triton optional); no Django, no network. The machine gets no .git: pass the commit in
SOLBOARD_COMMIT.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # _bench beside it

import torch
from _bench import provenance as bench_provenance

from evaluator.harness.correctness import poison_
from evaluator.harness.work import error_scales
from evaluator.problems import Problem, Shape, get_problem
from evaluator.problems.attention_bwd.reference import flash_baseline as attention_bwd_v1
from evaluator.problems.attention_fwd.reference import flash_baseline as attention_fwd_v1
from evaluator.problems.fp8_quant_per_block.reference import copy_baseline as fp8_quant_per_block_v1
from evaluator.problems.fp8_quant_per_token.reference import copy_baseline as fp8_quant_per_token_v1
from evaluator.problems.histogram.reference import bincount_baseline as histogram_v1
from evaluator.problems.mla_decode.reference import fp32_copies_baseline as mla_decode_v1
from evaluator.problems.w4a16_gemm.reference import dequantise_and_matmul as w4a16_gemm_v2

REPO = Path(__file__).resolve().parent.parent

Baseline = Callable[..., None]


# --- The baselines that were replaced, as their version had them ------------------------------------


def softmax_v1(x: torch.Tensor, y: torch.Tensor) -> None:
    """softmax version 1: an fp32 result, then a second kernel rounds it into y."""
    y.copy_(torch.softmax(x, dim=-1, dtype=torch.float32))


def moe_permute_v1(
    hidden: torch.Tensor, topk_ids: torch.Tensor, permuted: torch.Tensor, expert_offsets: torch.Tensor,
    dest_rows: torch.Tensor,
) -> None:
    """moe_permute version 1: stable argsort, then bincount + cumsum for the offsets."""
    flat = topk_ids.view(-1)
    order = torch.argsort(flat, stable=True)
    torch.index_select(hidden, 0, order // topk_ids.shape[1], out=permuted)
    rows = torch.arange(flat.numel(), dtype=torch.int32, device=flat.device)
    dest_rows.view(-1).index_copy_(0, order, rows)
    expert_offsets[0] = 0
    expert_offsets[1:].copy_(torch.bincount(flat, minlength=expert_offsets.numel() - 1).cumsum(0))


#: problem -> (the version whose baseline was replaced, that baseline). Where the new baseline still
#: takes the old path somewhere (the CPU, a refusing GPU, larger M), the catalogue keeps it.
CHANGED: dict[str, tuple[int, Baseline]] = {
    "softmax": (1, softmax_v1),
    "attention_fwd": (1, attention_fwd_v1),
    "attention_bwd": (1, attention_bwd_v1),
    "histogram": (1, histogram_v1),
    "moe_permute": (1, moe_permute_v1),
    "mla_decode": (1, mla_decode_v1),
    "w4a16_gemm": (2, w4a16_gemm_v2),  # version 3 takes tinygemm at M <= 16, this path elsewhere
    "fp8_quant_per_token": (1, fp8_quant_per_token_v1),
    "fp8_quant_per_block": (1, fp8_quant_per_block_v1),
}


# --- Candidates considered and not adopted --------------------------------------------------------


def attention_fwd_sdpa_default(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, LSE: torch.Tensor, *, causal: int
) -> None:
    """F.scaled_dot_product_attention as dispatched by default: O only (the public op returns no
    LSE, so LSE is left as the harness poisoned it and its margin is meaningless). Timed to see
    which backend a plain call gets and how fast it is."""
    o.copy_(torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=bool(causal)))


# --- The later problems' candidates (results/baseline_audit.md, "The later problems") -------------

def sort_keys_out(x: torch.Tensor, y: torch.Tensor) -> None:
    """torch.sort writing the keys into y (the int64 indices still come: torch has no keys-only sort)."""
    torch.sort(x, dim=-1, out=(y, torch.empty(x.shape, dtype=torch.int64, device=x.device)))



@dataclass(frozen=True)
class Candidate:
    name: str
    run: Baseline
    why_not: str
    cuda_only: bool = True


#: The later problems' candidates are not rejected yet: none has been timed on a GPU.
UNTIMED = ("not decided: read as faster on 2026-12-03 (results/baseline_audit.md), adopted as a new "
           "version only if faster on the ranked shapes with margins as good")

CANDIDATES: dict[str, list[Candidate]] = {
    "attention_fwd": [
        Candidate(
            "sdpa_default",
            attention_fwd_sdpa_default,
            "no LSE: not a baseline, timed to see what a plain F.scaled_dot_product_attention call gets",
        ),
    ],
    "sort_keys": [Candidate("sort_out", sort_keys_out, UNTIMED, cuda_only=False)],
}


# --- Measuring ------------------------------------------------------------------------------------


def _timer(device: str, quick: bool) -> Callable[[Callable[[], None]], float]:
    """Median microseconds of one call of ``fn``."""
    if device == "cuda":
        try:
            from triton.testing import do_bench
        except ImportError:
            do_bench = None
        if do_bench is not None:
            def triton_us(fn: Callable[[], None]) -> float:
                return float(do_bench(fn, warmup=5 if quick else 25, rep=20 if quick else 100,
                                      return_mode="median")) * 1e3
            return triton_us

        def events_us(fn: Callable[[], None]) -> float:
            for _ in range(3):
                fn()
            times = []
            for _ in range(5 if quick else 30):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end) * 1e3)
            return statistics.median(times)
        return events_us

    def wall_us(fn: Callable[[], None]) -> float:
        fn()
        times = []
        for _ in range(3 if quick else 10):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1e6)
        return statistics.median(times)
    return wall_us


def _poisoned_outputs(problem: Problem, shape: Shape, device: str) -> dict[str, torch.Tensor]:
    """The outputs as the harness hands them over: NaN, or its integer sentinel (`correctness.poison_`)."""
    outputs = {
        spec.name: torch.empty(
            spec.concrete_shape(shape.axes), dtype=getattr(torch, spec.dtype), device=device
        )
        for spec in problem.outputs
    }
    for tensor in outputs.values():
        poison_(tensor)
    return outputs


def _margins(problem: Problem, outputs: dict[str, torch.Tensor], reference: dict[str, torch.Tensor],
             scales: dict[str, torch.Tensor]) -> dict[str, Any]:
    """``scales``: the reference module's error scales (`work.error_scales`), for atol_scale "inputs"."""
    result = {}
    for name, ref in reference.items():
        ref = ref.double()
        out = outputs[name].double()
        allowed = problem.tolerance_for(name).allowed_error(ref, scales.get(name))
        error = (out - ref).abs()
        ok = torch.isfinite(out) & (error <= allowed)
        # matched as a count over the total: a mean in doubles reads 1 - 1e-16 on an all-exact row of
        # 128256 elements, which "fails" a matched_ratio of 1.0 (results/baselines.md#audit-h200).
        result[name] = {
            "margin": round(float((error / allowed).max()), 4),
            "matched": int(ok.sum()) / ok.numel(),
            "required": problem.tolerance_for(name).matched_ratio,
        }
    return result


def _call(run: Baseline, args: tuple[torch.Tensor, ...], kwargs: dict[str, int]) -> Callable[[], None]:
    return lambda: run(*args, **kwargs)


def measure_shape(problem: Problem, shape: Shape, variants: dict[str, Baseline], device: str,
                  timer: Callable[[Callable[[], None]], float]) -> list[dict[str, Any]]:
    module = problem.reference_module()
    kwargs = problem.call_kwargs(shape.axes)
    rows: list[dict[str, Any]] = []
    for variant, run in variants.items():
        row: dict[str, Any] = {"problem": problem.name, "version": problem.version, "shape": shape.shape_id,
                               "variant": variant, "margins": {}}
        try:
            for distribution in problem.distributions:
                inputs = module.generate_inputs(shape.axes, 1, device, distribution)
                outputs = _poisoned_outputs(problem, shape, device)
                args = (*inputs.values(), *outputs.values())
                run(*args, **kwargs)
                row["margins"][distribution] = _margins(
                    problem,
                    outputs,
                    module.reference(inputs, shape.axes),
                    error_scales(problem, module, inputs, shape.axes),
                )
                if distribution == problem.distributions[0]:
                    row["median_us"] = round(timer(_call(run, args, kwargs)), 3)
                del inputs, outputs, args
        except Exception as error:  # a variant this torch or GPU cannot run: recorded
            row["error"] = f"{type(error).__name__}: {error}"[:500]
        finally:
            if device == "cuda":
                torch.cuda.empty_cache()
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def variants_for(name: str, device: str, candidates: bool) -> dict[str, Baseline]:
    problem = get_problem(name)
    variants: dict[str, Baseline] = {}
    if name in CHANGED:
        variants["old"] = CHANGED[name][1]
    variants["new" if name in CHANGED else "current"] = problem.reference_module().baseline
    if candidates:
        for candidate in CANDIDATES.get(name, []):
            if device == "cuda" or not candidate.cuda_only:
                variants[f"candidate:{candidate.name}"] = candidate.run
    return variants


def shapes_for(problem: Problem, device: str, quick: bool) -> tuple[Shape, ...]:
    if device == "cpu":
        return problem.select_shapes("all", "cpu")
    return problem.select_shapes("quick" if quick else "ranked", device)


def speedups(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (problem, shape): old / new and current / candidate time ratios (> 1: the second is faster)."""
    by_shape: dict[tuple[str, str], dict[str, float]] = {}
    for row in rows:
        if "median_us" in row:
            by_shape.setdefault((row["problem"], row["shape"]), {})[row["variant"]] = row["median_us"]
    summary = []
    for (problem, shape), times in by_shape.items():
        base = times.get("old", times.get("current"))
        for variant, us in times.items():
            if variant not in ("old", "current") and base:
                summary.append(
                    {
                        "problem": problem,
                        "shape": shape,
                        "versus": "old" if "old" in times else "current",
                        "variant": variant,
                        "ratio": round(base / us, 3),
                    }
                )
    return summary


def provenance(device: str) -> dict[str, Any]:
    """_bench's header, with the device and, on a GPU, the CUDA and cuDNN builds the candidates ran on."""
    facts = bench_provenance(device) | {"torch": torch.__version__, "device": device}
    if device == "cuda":
        facts.update(gpu=torch.cuda.get_device_name(), cuda=torch.version.cuda,
                     cudnn=torch.backends.cudnn.version())
    return facts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cuda", "cpu"]
    )
    parser.add_argument(
        "--problems", default="", help="comma-separated; default: the changed ones and those with candidates"
    )
    parser.add_argument("--no-candidates", action="store_true", help="only old against new")
    parser.add_argument("--quick", action="store_true", help="CPU shapes on the CPU, quick shapes on a GPU")
    parser.add_argument("--out", type=Path, help="JSON file (default: print only)")
    args = parser.parse_args(argv)
    names = [n for n in args.problems.split(",") if n] or sorted(
        set(CHANGED) | (set() if args.no_candidates else set(CANDIDATES)))
    timer = _timer(args.device, args.quick)
    rows: list[dict[str, Any]] = []
    for name in names:
        problem = get_problem(name)
        variants = variants_for(name, args.device, not args.no_candidates)
        for shape in shapes_for(problem, args.device, args.quick):
            rows.extend(measure_shape(problem, shape, variants, args.device, timer))
    result = {
        "provenance": provenance(args.device),
        "timer": "triton do_bench median"
        if args.device == "cuda" and "triton" in timer.__name__
        else timer.__name__,
        "changed": {
            name: {"replaced_version": version, "now": get_problem(name).version}
            for name, (version, _) in CHANGED.items()
        },
        "candidates": {
            name: [{"name": c.name, "why_not": c.why_not} for c in items]
            for name, items in CANDIDATES.items()
        },
        "rows": rows,
        "speedups": speedups(rows),
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    failed = [
        row
        for row in rows
        if not row["variant"].startswith("candidate:")
        and (
            "error" in row
            or any(o["matched"] < o["required"] for d in row["margins"].values() for o in d.values())
        )
    ]
    for row in failed:
        print(f"FAILED: {row['problem']} {row['shape']} {row['variant']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
