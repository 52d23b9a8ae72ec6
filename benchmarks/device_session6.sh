#!/usr/bin/env bash
# One device call of the H200 round 6 (run on nvidia-h200-x2: the single-GPU parts use GPU 0).
# Carry .whl/ (benchmarks/gpu_e2e_wheels.txt, plus redis and redis-server for a real broker; see
# benchmarks/fast_feedback_h200.sh). Every part writes under /tmp/r6/<part>; the whole folder is
# packed into $OUT/r6_CALL.tgz at the end (the device tool returns at most 8 files).
#   SOLBOARD_COMMIT=$(git rev-parse HEAD) bash benchmarks/device_session6.sh CALL [PROBLEMS of call 2]
# CALL 1: the multi-GPU harness on NCCL (bus bandwidth, failure fixtures, every problem's quick
#         shape: baseline, example, overlapped example), then attention_fwd/bwd example and baseline
#         through the runner's path (jail, pool job user, ranked shapes, ncu witness).
# CALL 2: fast feedback part a (warm spares, through a broker, a site worker and a runner node),
#         then a second runner run of every problem's example and baseline (false positives).
# CALL 3: the multi-GPU problems on their ranked shapes (the timing diagnostics of each rank), then
#         fast feedback part a (call 2's failed: the site's wheels lacked django-htmx and pygments).
# CALL 4: pytest -m gpu with what is left (BUDGET seconds).
set -u
OUT=${OUT:?set OUT}
CALL=${1:?CALL}
R=/tmp/r6
mkdir -p "$R"
export SOLBOARD_COMMIT=${SOLBOARD_COMMIT:-unknown} PYTHONPATH=$PWD PYTHONUNBUFFERED=1
started=$(date +%s)
left() { echo $(( ${BUDGET:-540} - ($(date +%s) - started) )); }
pack() { tar -C "$R" -czf "$OUT/r6_$CALL.tgz" . ; ls -la "$OUT"; }
trap pack EXIT
fp() {  # fp NAME SETS BUDGET [false_positives.py options]
    name=$1 sets=$2 budget=$3; shift 3
    mkdir -p "$R/runner"
    timeout $(( $(left) - 15 )) python3 benchmarks/false_positives.py --device cuda --gpu-type h200 --sets "$sets" \
        --runs 1 --budget-s "$budget" --out "$R/runner/$name.json" "$@" > "$R/runner/$name.log" 2>&1
    echo "fp $name rc=$?"; tail -2 "$R/runner/$name.log"
}
case "$CALL" in
1)
    MULTI_PYTEST=0 OUT=$R/multi bash benchmarks/multigpu_h200x2.sh 330 quick
    fp attention examples,baselines $(( $(left) - 150 )) --only attention_fwd,attention_bwd
    ;;
2)
    OUT=$R/ff FF_TIMEOUT=280 bash benchmarks/fast_feedback_h200.sh a 2
    fp second examples,baselines $(( $(left) - 120 )) --only "${2:-vector_add,softmax,rmsnorm,swiglu,gemm_bf16,gemm_fp8,grouped_gemm_bf16}"
    ;;
3)
    MULTI_PYTEST=0 PARTS=jobs OUT=$R/multi bash benchmarks/multigpu_h200x2.sh 330 ranked \
        allreduce,ring_attention_fwd,vocab_parallel_logprob,allgather_gemm,gemm_reducescatter
    OUT=$R/ff FF_TIMEOUT=$(( $(left) - 15 )) bash benchmarks/fast_feedback_h200.sh a 2
    ;;
4)
    if [ "$(left)" -gt 60 ]; then
        timeout $(( $(left) - 20 )) python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts=-ra tests > "$R/pytest_gpu.txt" 2>&1
        echo "pytest rc=$?" >> "$R/pytest_gpu.txt"; tail -3 "$R/pytest_gpu.txt"
    fi
    ;;
esac
echo "call $CALL done in $(( $(date +%s) - started )) s"
