#!/usr/bin/env bash
# Multi-GPU problems on a machine with 2 H200s: the NCCL path of the multi-GPU harness (recorded
# figures: benchmarks/results/multigpu.md). Carry .whl/ (pydantic and
# its dependencies: the machine has torch, NCCL, ncu and nvidia-ml-py, no network, no Django). Run
# from the repository root:
#   SOLBOARD_COMMIT=$(git rev-parse HEAD) OUT=/some/dir bash benchmarks/multigpu_h200x2.sh [BUDGET_S] [SHAPES] [PROBLEMS]
# SHAPES: all (default), quick or ranked. PROBLEMS: comma-separated (default: every multi-GPU problem,
# alphabetically). Within 30 min of device time: first `570 quick` (every problem's quick shape, the
# failures, busbw), then, with its busbw.json copied to benchmarks/results/data/busbw_h200x2.json (read
# back from there), PARTS=jobs `570 all allreduce,allgather_gemm,gemm_reducescatter` and PARTS=jobs
# `570 all vocab_parallel_logprob,ring_attention_fwd`.
# Writes under $OUT (the figures go to benchmarks/results/multigpu.md, not the files):
#   env.txt         date, commit, GPUs, driver, NVLink topology and link state, torch and NCCL versions
#   busbw.json      NCCL all-reduce bus bandwidth 1 MiB-1 GiB (the calibrated link ceiling)
#   failures.json   deadlock / crash / multicast fixtures: statuses and whether both GPUs were freed
#   jobs.json       every multi problem's baseline and example at W = 2: per-shape timings, SOL
#                   fractions against the datasheet (450 GB/s) and the measured busbw, GPUs freed
#   pytest_multi.txt  the CPU harness tests, re-run here (gloo) as a sanity check of the checkout
#   multigpu_baseline_audit.json (PARTS with "audit", run first: e.g. PARTS=audit `570 ranked`)
#                   benchmarks/multigpu_baseline_audit.py: vocab_parallel_logprob's and ring_attention_fwd's
#                   baselines against their candidates on the ranked shapes (quick with SHAPES=quick)
set -u
OUT=${OUT:?set OUT}
BUDGET=${1:-1500}
SHAPES=${2:-all}
PROBLEMS=${3:-}
PARTS=${PARTS:-busbw,failures,jobs}  # e.g. PARTS=jobs for the later runs (busbw.json is read back if present)
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir $(ls .whl/*.whl | grep -v /redis_server-) > /dev/null 2>&1 \
    || python3 -m pip install -q --break-system-packages --no-index --no-deps --no-compile --no-cache-dir $(ls .whl/*.whl | grep -v /redis_server-) \
    || echo "warning: the carried wheels did not install (is pydantic already there?)"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
export SOLBOARD_COMMIT=${SOLBOARD_COMMIT:-unknown}
started=$(date +%s)
{ date -u; echo "commit $SOLBOARD_COMMIT"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  nvidia-smi topo -m; nvidia-smi nvlink -s 2>&1 | head -60
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
} > "$OUT/env.txt" 2>&1
[ "$(python3 -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ] || { echo "fewer than 2 GPUs: stop"; cat "$OUT/env.txt"; exit 1; }
case ",$PARTS," in *,audit,*)
    timeout $(( BUDGET - 90 )) python3 benchmarks/multigpu_baseline_audit.py --device cuda --world-size 2 \
        $([ "$SHAPES" = quick ] && echo --quick) --out "$OUT/multigpu_baseline_audit.json" \
        > "$OUT/multigpu_baseline_audit.log" 2>&1; echo "audit rc=$?"; cut -c1-300 "$OUT/multigpu_baseline_audit.log" | tail -30
    PARTS=$(echo ",$PARTS," | sed 's/,audit,/,/; s/^,*//; s/,*$//') ;;
esac
if [ -n "$PARTS" ]; then
    timeout $(( BUDGET - ($(date +%s) - started) - 60 )) python3 benchmarks/multigpu_h200x2.py --out "$OUT" \
        --budget-s $(( BUDGET - ($(date +%s) - started) - 120 )) \
        --shapes "$SHAPES" --problems "$PROBLEMS" --parts "$PARTS" > "$OUT/driver.log" 2>&1
    echo "driver rc=$?"; tail -20 "$OUT/driver.log"
fi
left=$(( BUDGET - ($(date +%s) - started) ))
if [ "$left" -gt 150 ] && [ "${MULTI_PYTEST:-1}" = 1 ]; then
    timeout $(( left - 30 )) python3 -m pytest -q -p no:cacheprovider tests/evaluator/test_multi_problems.py \
        tests/evaluator/test_multi_harness.py > "$OUT/pytest_multi.txt" 2>&1
    echo "pytest rc=$?" >> "$OUT/pytest_multi.txt"; tail -3 "$OUT/pytest_multi.txt"
fi
echo "done in $(( $(date +%s) - started )) s"
