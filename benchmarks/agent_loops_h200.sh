#!/usr/bin/env bash
# Issue 36 on the lent H200, unattended, in two parts that each fit one 10-minute device call; the
# figures and a compact summary (summary_PART.md, and the JSON files it is made from) under $OUT.
#
# Carry .whl/ as for device_call.sh's `ff` part (the wheels of benchmarks/gpu_e2e_wheels.txt, the redis
# client and a Redis >= 6.2 binary in .whl/redis7), then, from the repository root:
#
#   SOLBOARD_COMMIT=$(git rev-parse HEAD) bash benchmarks/agent_loops_h200.sh 1
#   SOLBOARD_COMMIT=$(git rev-parse HEAD) bash benchmarks/agent_loops_h200.sh 2
#
# Part 1: 10 one-shape vector_add submissions back to back (each one's receipt -> provisional and
#         -> witnessed; target: the 10th provisional within 3 s of its receipt, witnessed within 2x),
#         two tokens' loops at once (8 vector_add each: the order their jobs ran, one spare per job),
#         through Redis, a site worker and a runner node (warm spares, depth 2); then, with the
#         cluster stopped, the timing of a running job with and without spares staging beside it
#         (vector_add, all shapes, 3 jobs each way: spread, ncu agreement, NVML's process count).
# Part 2: 50 submissions from one token (vector_add on one shape x 30, softmax and gemm_bf16 on their
#         ranked shapes x 10 each): wall time, latency percentiles, GPU busy fraction, where the
#         time goes; then, if time is left, the disturbance check on gemm_bf16's ranked shapes.
#
# A dry run on a machine without a GPU: FF_DEVICE=cpu B2B=3 FAIR=2 RUNS=1 bash benchmarks/agent_loops_h200.sh 1
set -u
OUT=${OUT:?set OUT}
PART=${1:-1}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
export SOLBOARD_COMMIT=${SOLBOARD_COMMIT:-unknown}
mkdir -p "$OUT"
DEVICE=${FF_DEVICE:-0}
GPU_TYPE=h200; SPARE_DEVICE=cuda
if [ "$DEVICE" = cpu ]; then GPU_TYPE=cpu; SPARE_DEVICE=cpu; fi
PYTHON=${PYTHON:-python3}
BEGAN=$(date +%s)
{ date -u; echo "commit $SOLBOARD_COMMIT"; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  $PYTHON -V; $PYTHON -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'; ncu --version | tail -1
  nproc; } > "$OUT/env_loops$PART.txt" 2>&1
LOG_TAG=loops$PART
. benchmarks/cluster_env.sh || exit 1
echo "broker: ${BROKER:-embedded}" >> "$OUT/env_loops$PART.txt"

left() { echo $(( ${BUDGET_S:-570} - ($(date +%s) - BEGAN) )); }

loops() {  # loops TAG CASES [agent_loops.py options]: the cluster cases within the time left
    tag=$1; cases=$2; shift 2
    timeout "$(( $(left) - ${RESERVE_S:-0} ))" $PYTHON benchmarks/agent_loops.py --device "$DEVICE" --gpu-type "$GPU_TYPE" \
        --out "$OUT" --tag "$tag" --cases "$cases" ${BROKER:+--broker "$BROKER"} "$@" > "$OUT/agent_loops_$tag.log" 2>&1
    echo "$tag rc=$?"
}

disturbance() {  # disturbance PROBLEM SHAPES RUNS: only with the cluster stopped (the GPU is the job's)
    [ "$(left)" -gt 60 ] || { echo "disturbance $1: no time left"; return; }
    timeout "$(( $(left) - 10 ))" $PYTHON benchmarks/spare_disturbance.py --device "$SPARE_DEVICE" --gpu-type "$GPU_TYPE" \
        --out "$OUT" --problem "$1" --shapes "$2" --runs "$3" > "$OUT/spare_disturbance_$1.log" 2>&1
    echo "disturbance $1 rc=$?"
}

# Sizes (smaller for a dry run): B2B, FAIR (per token), LOOP, RUNS (disturbance jobs per condition).
case "$PART" in
1) RESERVE_S=170 loops part1 b2b,fair --b2b "${B2B:-10}" --fair "${FAIR:-8}"
   disturbance vector_add all "${RUNS:-3}" ;;
2) RESERVE_S=130 loops part2 loop --loop "${LOOP:-50}"
   disturbance gemm_bf16 ranked "${RUNS:-2}" ;;
*) echo "unknown part $PART"; exit 2 ;;
esac
[ -n "${REDIS_PID:-}" ] && kill "$REDIS_PID"
$PYTHON benchmarks/loops_summary.py "$OUT" > "$OUT/summary_$PART.md" 2>&1
cat "$OUT/summary_$PART.md"
exit 0
