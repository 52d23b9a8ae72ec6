"""The multi-GPU half of the baseline audit (issue 16): each multi-GPU baseline against the formulations
worth timing that benchmarks/results/baseline_audit.md names ("Multi-GPU problems"), on W processes
that form one group: NCCL over W GPUs for figures, gloo on the CPU for correctness only (CPU timings
mean nothing).

    SOLBOARD_COMMIT=<sha> python3 benchmarks/multigpu_baseline_audit.py --device cuda --out audit.json
        [--problems vocab_parallel_logprob,ring_attention_fwd] [--world-size 2] [--quick]

For each (problem, shape, variant), every rank draws the global inputs of seed 1 (each distribution),
takes its share (the reference module's ``rank_inputs``), runs the variant into poisoned outputs and
checks them against its share of the fp64 reference under the problem's tolerance: the worst margin
(< 1: every element passes) and the matched fraction, the worst over the ranks. On a GPU, a call's
time is the slowest rank's (CUDA events on each rank, a barrier before every call), the median of
ITERATIONS calls after WARMUP, warm L2 (the inputs of every ranked shape are larger than L2: the
figures compare formulations, they are not the harness's cold measurement). A candidate that fails
to run (cuDNN refusing a shape, a collective this backend lacks) is recorded with its error on every
rank, never fatal. Needs torch; no Django, no network (the machine gets no .git: pass the commit in
SOLBOARD_COMMIT).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import torch.distributed as dist

from benchmarks.baseline_audit import Candidate, _margins, provenance, shapes_for
from evaluator.harness.correctness import allocate_outputs
from evaluator.harness.multi.rank_context import RankContext, join_group
from evaluator.harness.multi.rank_env import rank_environment
from evaluator.problems import Problem, Shape, get_problem
from evaluator.problems.attention_fwd.reference import cudnn_forward as attention_fwd_cudnn
from evaluator.problems.ring_attention_fwd.reference import flash_forward, ring

REPO = Path(__file__).resolve().parent.parent

RankBaseline = Callable[..., None]
WARMUP, ITERATIONS = 3, 15
DEFAULT_PROBLEMS = ("vocab_parallel_logprob", "ring_attention_fwd")


def all_gather_into(gathered: torch.Tensor, part: torch.Tensor, group: Any) -> None:
    """``gathered[r]`` = rank r's ``part``: one all-gather (NCCL's into one tensor; gloo's into views)."""
    if dist.get_backend(group) == "nccl":
        dist.all_gather_into_tensor(gathered, part, group=group)
    else:
        dist.all_gather(list(gathered.unbind(0)), part, group=group)


# --- vocab_parallel_logprob ---------------------------------------------------------------------


def logprob_local_logsumexp_one_all_gather(ctx: RankContext, logits: torch.Tensor, target: torch.Tensor,
                                           logprob: torch.Tensor) -> None:
    """Each shard's fp32 ``torch.logsumexp`` and its target logit (-inf where another rank owns the
    target), both in one all-gather of 2T floats; then the logsumexp of the W shard sums and the one
    finite target logit. One collective where the baseline makes three."""
    shard = logits.shape[1]
    first = ctx.rank * shard
    local = logits.float()
    mine = (target >= first) & (target < first + shard)
    picked = local.gather(1, (target - first).clamp(0, shard - 1).unsqueeze(1)).squeeze(1)
    part = torch.stack([torch.logsumexp(local, dim=1), picked.masked_fill(~mine, float("-inf"))])
    gathered = part.new_empty((ctx.world_size, *part.shape))
    all_gather_into(gathered, part, ctx.group)
    torch.sub(gathered[:, 1].amax(dim=0), torch.logsumexp(gathered[:, 0], dim=0), out=logprob)


# --- ring_attention_fwd -------------------------------------------------------------------------


def cudnn_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(O bf16, LSE fp32 (B, H, S)) of q against k, v through attention_fwd version 2's baseline call
    (SDPA's cuDNN backend), non-causal; raises where cuDNN refuses, so the candidate records it."""
    result = attention_fwd_cudnn(q, k, v, False)
    if result is None:
        raise RuntimeError(f"cuDNN refused attention on q {tuple(q.shape)}, k {tuple(k.shape)}")
    return result[0], result[1].reshape(q.shape[:-1])


def ring_with_cudnn(ctx: RankContext, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                    LSE: torch.Tensor) -> None:
    """The baseline's ring with cuDNN's forward per chunk (1.62-1.76x FlashAttention-2's for
    attention_fwd on one H200: benchmarks/results/baseline_audit.md)."""
    ring(ctx, q, k, v, o, LSE, cudnn_forward)


def gathered_keys_and_values(attend: Callable[..., tuple[torch.Tensor, torch.Tensor]]) -> RankBaseline:
    def run(ctx: RankContext, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
            LSE: torch.Tensor) -> None:
        """Every chunk's keys and values all-gathered (one collective of 4BHSD/W bytes a rank), laid
        out as the whole sequence, then one attention call over all S keys: no merge, no overlap."""
        kv = torch.stack([k, v])  # (2, B, H, S/W, D)
        everyone = kv.new_empty((ctx.world_size, *kv.shape))
        all_gather_into(everyone, kv, ctx.group)
        whole = everyone.permute(1, 2, 3, 0, 4, 5).reshape(2, k.shape[0], k.shape[1], -1, k.shape[3])
        out, lse = attend(q, whole[0], whole[1])
        o.copy_(out)
        LSE.copy_(lse)
    return run


CANDIDATES: dict[str, list[Candidate]] = {
    "vocab_parallel_logprob": [
        Candidate(
            "local_logsumexp_one_all_gather",
            logprob_local_logsumexp_one_all_gather,
            "not measured yet: fewer collectives (1 against 3) should matter at T = 1k, where each "
            "all-reduce's latency is a large part of the call",
            cuda_only=False,
        ),
    ],
    "ring_attention_fwd": [
        Candidate("ring_cudnn", ring_with_cudnn, "not measured yet: cuDNN's forward won on one GPU"),
        Candidate(
            "all_gathered_kv_flash",
            gathered_keys_and_values(flash_forward),
            "not measured yet: no overlap of the transfer with the attention, but one call and no merge",
            cuda_only=False,
        ),
        Candidate(
            "all_gathered_kv_cudnn",
            gathered_keys_and_values(cudnn_forward),
            "not measured yet: as all_gathered_kv_flash, through cuDNN",
        ),
    ],
}


def variants_for(name: str, device: str) -> dict[str, RankBaseline]:
    """The baseline (one rank's, ``baseline(ctx, ...)``) and the candidates this device can run."""
    runnable = [c for c in CANDIDATES.get(name, []) if device == "cuda" or not c.cuda_only]
    return {"current": get_problem(name).reference_module().baseline,
            **{f"candidate:{c.name}": c.run for c in runnable}}


# --- one rank -----------------------------------------------------------------------------------


def time_call_us(ctx: RankContext, call: Callable[[], None]) -> float:
    """Median over ITERATIONS of the slowest rank's time for one call (CUDA events, barrier first)."""
    for _ in range(WARMUP):
        call()
    times = []
    for _ in range(ITERATIONS):
        dist.barrier(group=ctx.group)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        torch.cuda.synchronize()
        slowest = torch.tensor([start.elapsed_time(end) * 1e3], device=ctx.device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=ctx.group)
        times.append(float(slowest))
    return statistics.median(times)


def worst_over_ranks(ctx: RankContext, margins: dict[str, Any]) -> dict[str, Any]:
    """Per output: the largest margin and the smallest matched fraction any rank saw."""
    result = {}
    for name in sorted(margins):
        values = torch.tensor([margins[name]["margin"], -margins[name]["matched"]], dtype=torch.float64,
                              device=ctx.device)
        dist.all_reduce(values, op=dist.ReduceOp.MAX, group=ctx.group)
        result[name] = {"margin": round(float(values[0]), 4), "matched": -float(values[1]),
                        "required": margins[name]["required"]}
    return result


def any_rank_failed(ctx: RankContext, failed: bool) -> bool:
    flag = torch.tensor([1.0 if failed else 0.0], device=ctx.device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=ctx.group)
    return bool(flag.item())


def run_variant(ctx: RankContext, run: RankBaseline, args: tuple[torch.Tensor, ...]) -> str | None:
    """The variant's error on this rank, or that of another rank (every rank learns of any)."""
    error = None
    try:
        run(ctx, *args)
    except Exception as raised:  # a candidate this torch, GPU or backend cannot run
        error = f"{type(raised).__name__}: {raised}"[:500]
    if any_rank_failed(ctx, error is not None):
        return error or "failed on another rank"
    return None


def measure_shape(ctx: RankContext, problem: Problem, shape: Shape, variants: dict[str, RankBaseline],
                  device: str) -> list[dict[str, Any]]:
    """One row per variant. The inputs and the fp64 reference of each distribution are made once
    and shared by the variants (the reference at 64k tokens takes seconds)."""
    module = problem.reference_module()
    axes = problem.axes_at(shape.axes, ctx.world_size)
    rows: dict[str, dict[str, Any]] = {
        variant: {
            "problem": problem.name,
            "version": problem.version,
            "shape": shape.shape_id,
            "world_size": ctx.world_size,
            "variant": variant,
            "margins": {},
        }
        for variant in variants
    }
    for distribution in problem.distributions:
        global_inputs = module.generate_inputs(axes, 1, ctx.device, distribution)
        expected = module.rank_outputs(module.reference(global_inputs, axes), axes, ctx.rank)
        mine = module.rank_inputs(global_inputs, axes, ctx.rank)
        del global_inputs
        for variant, run in variants.items():
            row = rows[variant]
            if "error" in row:
                continue
            outputs = allocate_outputs(problem.outputs, axes, str(ctx.device))
            args = (*mine.values(), *outputs.values())
            if (error := run_variant(ctx, run, args)) is not None:
                row["error"] = error
                continue
            row["margins"][distribution] = worst_over_ranks(ctx, _margins(problem, outputs, expected, {}))
            if device == "cuda" and distribution == problem.distributions[0]:
                row["median_us"] = round(time_call_us(ctx, functools.partial(run, ctx, *args)), 3)
            del outputs, args
            if device == "cuda":
                torch.cuda.empty_cache()
        del mine, expected
    return list(rows.values())


def rank_main(rank: int, world_size: int, device: str, store_path: str, names: list[str], quick: bool,
              out: str | None) -> None:
    ctx = join_group(device, store_path, rank, world_size)
    rows: list[dict[str, Any]] = []
    for name in names:
        problem = get_problem(name)
        for shape in shapes_for(problem, device, quick):
            for row in measure_shape(ctx, problem, shape, variants_for(name, device), device):
                if rank == 0:
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    if rank == 0:
        write_result(rows, device, out)
    dist.destroy_process_group()


def write_result(rows: list[dict[str, Any]], device: str, out: str | None) -> None:
    result = {
        "provenance": provenance(device),
        "timer": "CUDA events, the slowest rank, median"
        if device == "cuda"
        else "none (CPU: correctness only)",
        "candidates": {
            name: [{"name": c.name, "why_not": c.why_not} for c in items]
            for name, items in CANDIDATES.items()
        },
        "rows": rows,
    }
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(result, indent=1) + "\n")


def failed_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The current baselines that erred or missed their tolerance (candidates may: they are recorded)."""
    return [
        row
        for row in rows
        if row["variant"] == "current"
        and (
            "error" in row
            or any(o["matched"] < o["required"] for d in row["margins"].values() for o in d.values())
        )
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cuda", "cpu"]
    )
    parser.add_argument("--problems", default=",".join(DEFAULT_PROBLEMS))
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument(
        "--quick", action="store_true", help="quick shapes on GPUs (the CPU always takes its own)"
    )
    parser.add_argument("--out", type=Path, required=True, help="JSON file")
    args = parser.parse_args(argv)
    if args.device == "cuda" and torch.cuda.device_count() < args.world_size:
        print(f"needs {args.world_size} GPUs, sees {torch.cuda.device_count()}", file=sys.stderr)
        return 2
    names = [n for n in args.problems.split(",") if n]
    os.environ.update(rank_environment())  # NVLink multicast off, loopback: as the harness runs every rank
    with tempfile.TemporaryDirectory() as scratch:
        torch.multiprocessing.spawn(rank_main, nprocs=args.world_size, args=(
            args.world_size, args.device, str(Path(scratch) / "store"), names, args.quick, str(args.out)))
    failed = failed_rows(json.loads(args.out.read_text())["rows"])
    for row in failed:
        print(f"FAILED: {row['problem']} {row['shape']} {row['variant']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
