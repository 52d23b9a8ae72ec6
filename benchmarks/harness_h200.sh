#!/usr/bin/env bash
# Issue 33 items 4, 5, 7 and 8 on the H200, one 10-minute device call per PART, with no runner and no
# site: `python -m evaluator run` (ranked mode with a secret seed unless said), each report summarised
# by benchmarks/harness_h200.py (per shape: claim, witness, ranked time, status) into $OUT/$PART.txt,
# the reports kept in $OUT/$PART/.
#   SOLBOARD_COMMIT=$(git rev-parse HEAD) OUT=$OUT bash benchmarks/harness_h200.sh PART   (or: device_call.sh harness HARNESS=PART)
# PART limits   a kernel that never returns (tests/fixtures/good/hangs.py) and a GPU kernel that spins for
#               years (gpu_spins.py), test mode, default limits: each must end TIMEOUT in under 30 s,
#               the message naming the call and its limit (the first call's, 15 s).
# PART ranked   the cuBLAS GEMM example honest, then with every timing it sends rewritten to 0.91 x and
#               0.96 x (a patched JSON encoder): the forged ones must rank no more than 1% below the
#               honest one on every shape of 20 us or more (4096^3, whose honest median runs ~1% above
#               ncu's, may reach 1.25%); then the torch.compile vector add (must PASS, witnessed, no flag).
# PART autotune the Triton matmul with @triton.autotune on gemm_bf16's ranked shapes, then the Triton fused
#               attention with @triton.autotune on attention_fwd's: every shape PASSED and confirmed (before:
#               4-5 of 8 and 3 of 8 REJECTED "timing not confirmed"), the witness's calls within a few % of
#               the claim (the first, a warm-up, may be slower).
set -u
OUT=${OUT:?set OUT}
PYTHON=${PYTHON:-python3}
PART=${1:?PART}
R=$OUT/$PART
mkdir -p "$R"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
GOOD=tests/fixtures/good
run() {  # name problem file [extra args...]: one evaluation, its report in $R/name.json, wall time logged
  local name=$1 problem=$2 file=$3
  shift 3
  local began=$(date +%s.%N)
  echo 424242 | timeout 300 $PYTHON -m evaluator run "$problem" "$file" --device cuda --json "$@" \
    > "$R/$name.json" 2> "$R/$name.err"
  echo "$name: exit $?, $($PYTHON -c "print(round($(date +%s.%N) - $began, 1))") s of wall time" | tee -a "$OUT/$PART.txt"
}
forged() {  # factor: the GEMM example with every timing the child sends scaled by factor
  cat examples/python/gemm_bf16.py
  cat <<PY

import json.encoder as _encoder
import re as _re

_encode = _encoder.JSONEncoder.encode


def _scaled(self, obj):
    text = _encode(self, obj)
    return _re.sub(r'"(median_us|mean_us|min_us|max_us|ci95_low_us|ci95_high_us|event_median_us)":([0-9.e+-]+)',
                   lambda m: f'"{m.group(1)}":{float(m.group(2)) * $1!r}', text)


_encoder.JSONEncoder.encode = _scaled
PY
}
case $PART in
  limits)
    run hangs vector_add $GOOD/hangs.py --mode test
    run gpu_spins vector_add $GOOD/gpu_spins.py --mode test ;;
  ranked)
    run gemm_honest gemm_bf16 examples/python/gemm_bf16.py --mode ranked --shapes ranked --secret-seed-stdin
    for factor in 0.91 0.96; do
      forged $factor > "$R/gemm_forged_$factor.py"
      run gemm_forged_$factor gemm_bf16 "$R/gemm_forged_$factor.py" --mode ranked --shapes ranked --secret-seed-stdin
    done
    run torch_compile vector_add $GOOD/torch_compile_add.py --mode ranked --shapes ranked --secret-seed-stdin ;;
  autotune)
    run triton_matmul gemm_bf16 $GOOD/triton_autotuned_matmul.py --mode ranked --shapes ranked --secret-seed-stdin
    run triton_attention attention_fwd $GOOD/triton_fused_attention.py --mode ranked --shapes ranked --secret-seed-stdin ;;
  *) echo "unknown PART $PART" >&2; exit 2 ;;
esac
$PYTHON benchmarks/harness_h200.py "$R"/*.json | tee -a "$OUT/$PART.txt"
echo "commit ${SOLBOARD_COMMIT:-unknown}, $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)" >> "$OUT/$PART.txt"
