#!/usr/bin/env bash
# Round 3 on the lent H200 (the device tool: a copy of the tree without .git, no network), one or
# more parts per call so that each call stays under its 10-minute limit:
#
#   SOLBOARD_COMMIT=<sha> OUT=<folder> bash benchmarks/h200_round3.sh baselines
#   ... e2e,gap      ... gputests
#
# baselines  every problem's vendor baseline submitted as a submission, ranked shapes (S ~ 0.5)
# e2e        benchmarks/gpu_e2e.sh: site worker + runner node on the embedded broker, three GPU jobs
# gap        benchmarks/timing_gap.py: our device span against ncu (cache and clock effects)
# quality    benchmarks/measurement_quality.py: spread, ours vs ncu and do_bench, wall per shape
# gputests   pytest -m gpu: the GPU-only cheating fixtures, the PTX/CUDA launcher tests
#
# Carry .whl/ (benchmarks/gpu_e2e_wheels.txt lists it; .whl/test/ holds pytest and its plugins).
set -uo pipefail
OUT=${OUT:?set OUT}
PARTS=${1:?name the parts: baselines,e2e,gap,gputests}
export SOLBOARD_COMMIT=${SOLBOARD_COMMIT:-unknown} PYTHONUNBUFFERED=1
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader;
  python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)';
  echo "commit $SOLBOARD_COMMIT"; } > "$OUT/provenance_$PARTS.txt" 2>&1

# The evaluator needs pydantic beside the machine's torch; the e2e part installs the site's wheels itself.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/pydantic*.whl .whl/annotated_types*.whl .whl/typing_inspection*.whl .whl/typing_extensions*.whl
export PYTHONPATH=/tmp/site:$PWD

status=0
for part in ${PARTS//,/ }; do
    started=$(date +%s)
    case $part in
        baselines)
            python3 benchmarks/gpu_round.py --out "$OUT" --sections baselines --budget 520 \
                --problems "${PROBLEMS:-vector_add,gemm_bf16,gemm_fp8,grouped_gemm_bf16,rmsnorm,softmax,swiglu,attention_fwd,attention_bwd}" \
                --calibration benchmarks/results/h200_round1/calibration.json > "$OUT/baselines.log" 2>&1 || status=1
            ;;
        quality)
            timeout 360 python3 benchmarks/measurement_quality.py --out "$OUT/measurement_quality.json" \
                > "$OUT/quality.log" 2>&1 || status=1
            ;;
        e2e)
            # gpu_e2e.sh installs the site's wheels into python3 itself: the sandboxed jobs run
            # with a minimal environment and must find pydantic without /tmp/site.
            PYTHONPATH=$PWD OUT="$OUT" timeout 420 bash benchmarks/gpu_e2e.sh > "$OUT/e2e.log" 2>&1 || status=1
            ;;
        gap)
            timeout 300 python3 benchmarks/timing_gap.py --out "$OUT/timing_gap.json" > "$OUT/gap.log" 2>&1 || status=1
            ;;
        gputests)
            python3 -m pip install -q --no-index --no-deps --find-links .whl -r benchmarks/gpu_e2e_wheels.txt
            python3 -m pip install -q --no-index --no-deps .whl/test/*.whl
            timeout 540 python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts=-ra \
                tests/evaluator/test_harness_gpu.py tests/evaluator/test_ptx_gpu.py > "$OUT/gputests.log" 2>&1 || status=1
            ;;
        *) echo "unknown part $part" >&2; status=2 ;;
    esac
    echo "$part: $(( $(date +%s) - started )) s" >> "$OUT/parts.txt"
done
# The device tool brings back at most 8 files: one archive of everything.
archive=/tmp/round3_${PARTS//,/_}.tar.gz
tar -czf "$archive" -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv "$archive" "$OUT/"
exit $status
