#!/usr/bin/env bash
# H200 round 5 (integrity): the one-pass ncu witness, the witness's own defences, and the
# false-positive rate through the runner's path (runners.execute in the jail, as root with a pool
# job user). Carry .whl/ (pydantic and its dependencies for cp312). Writes under $OUT:
#   env.txt          date, GPU, driver, ncu version and the ncu options the witness relies on
#   smoke/           vector_add's example through the evaluator, ncu's raw output kept
#   runner_*.json    benchmarks/false_positives.py results, rewritten after every job
#   SOLBOARD_COMMIT=$(git rev-parse HEAD) bash benchmarks/h200_round5.sh PART BUDGET_S
# PART a: smoke, the cheats and the Python examples; b: the baselines and the PTX/CUDA examples;
# c: examples and baselines once more (a second run of each), then pytest -m gpu with what is left.
set -u
OUT=${OUT:?set OUT}
PART=${1:-a}
BUDGET=${2:-420}
# Into the machine's own interpreter: the jailed evaluator runs it with only the project on PYTHONPATH.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir $(ls .whl/*.whl | grep -v /redis_server-) > /dev/null 2>&1 \
    || python3 -m pip install -q --break-system-packages --no-index --no-deps --no-compile --no-cache-dir $(ls .whl/*.whl | grep -v /redis_server-) \
    || exit 1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
export SOLBOARD_COMMIT=${SOLBOARD_COMMIT:-unknown}
started=$(date +%s)
{ date -u; echo "commit $SOLBOARD_COMMIT"; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -V; ncu --version | tail -1; ncu --help | grep -E -A1 "disable-profiler-start-stop|profile-from-start"; } > "$OUT/env.txt" 2>&1
left() { echo $(( BUDGET - ($(date +%s) - started) )); }
fp() {  # fp NAME SETS RUNS [more false_positives.py options]
    name=$1 sets=$2 runs=$3; shift 3
    python3 benchmarks/false_positives.py --device cuda --gpu-type h200 --sets "$sets" --runs "$runs" \
        --budget-s "$(left)" --out "$OUT/runner_$name.json" "$@" > "$OUT/runner_$name.log" 2>&1
    tail -1 "$OUT/runner_$name.log"
}
case "$PART" in
a)
    python3 benchmarks/witness_round.py --out "$OUT/smoke" --sections smoke --budget-s 200 > "$OUT/smoke.log" 2>&1
    grep -q '"witnessed": true' "$OUT/smoke/summary.json" || { echo "smoke not witnessed: stop"; tail -40 "$OUT/smoke.log"; exit 1; }
    fp cheats cheats 1
    fp examples examples 1
    ;;
b)
    fp baselines baselines 1
    fp natives natives 1
    ;;
c)
    fp examples_2 examples,baselines 1
    if [ "$(left)" -gt 90 ]; then
        timeout "$(left)" python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts=-ra tests > "$OUT/pytest_gpu.txt" 2>&1
        echo "pytest rc=$?" >> "$OUT/pytest_gpu.txt"; tail -3 "$OUT/pytest_gpu.txt"
    fi
    ;;
d)  # after round a: the two witness-process fixtures again, then examples and baselines, fastest first
    fp cheats_2 cheats 1 --cheats c16_witness_off_gpu,c16_witness_pipe_inject
    fp honest examples,baselines 1 \
        --only vector_add,gemm_bf16,gemm_fp8,softmax,rmsnorm,swiglu,grouped_gemm_bf16,attention_fwd,attention_bwd
    ;;
e)  # what d did not reach, and the PTX/CUDA examples
    [ -n "${4:-}" ] || fp natives natives 1
    fp rest examples,baselines 1 --only "${3:-attention_fwd,attention_bwd}"
    ;;
esac
echo "part $PART done in $(( $(date +%s) - started )) s"
