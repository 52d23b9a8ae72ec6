#!/bin/sh
# GPU checks of PTX/CUDA submissions through the whole evaluator (issue 4), one call:
#   1. tests/evaluator/test_ptx_gpu.py (examples correct; fault -> RUNTIME_ERROR; spin -> TIMEOUT; wgmma PASSED)
#   2. every example through `python -m evaluator run` in test mode (quick shapes)
#   3. the wgmma+TMA example in ranked mode (cold L2, SOL, score against cuBLAS)
#   4. ncu per-opcode executed counts of the wgmma example (the format feature_evidence.py parses)
# Usage (repository root, CUDA machine): OUT=folder sh benchmarks/ptx_gpu_checks.sh   (8 files)
OUT=${OUT:?set OUT to the folder that receives the results}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
timeout 200 python3 -m pytest -q -p no:cacheprovider -o addopts="" tests/evaluator/test_ptx_gpu.py > "$OUT/pytest_gpu.log" 2>&1
echo "pytest: $(tail -1 "$OUT/pytest_gpu.log")"
run() {  # problem file language name [extra args]
    p=$1; f=$2; l=$3; n=$4; shift 4
    timeout 120 python3 -m evaluator run "$p" "$f" --language "$l" --json "$@" > "$OUT/harness_$n.json" 2>> "$OUT/harness_stderr.log"
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], r['status'], r['message'][:100]); [print('  ', s['shape_id'], s['status'], (s.get('sol') or {}).get('tflops'), (s.get('sol') or {}).get('sol_fraction'), (s.get('sol') or {}).get('speedup'), (s.get('sol') or {}).get('score')) for s in r['shapes']]" "$OUT/harness_$n.json" "$n" || tail -5 "$OUT/harness_stderr.log"
}
run vector_add examples/ptx/vector_add.ptx ptx vadd_ptx --shapes quick
run vector_add examples/cuda/vector_add.cu cuda vadd_cu --shapes quick
run gemm_bf16 examples/ptx/gemm_bf16_mma.ptx ptx mma --shapes quick
echo 20261129 | run gemm_bf16 examples/ptx/gemm_bf16_wgmma_tma.ptx ptx wgmma_ranked --mode ranked --secret-seed-stdin --shapes quick --no-profile
timeout 90 ncu --clock-control none --metrics sass__inst_executed_per_opcode \
    -k regex:gemm_bf16_wgmma -c 1 --export /tmp/wgmma --force-overwrite \
    python3 benchmarks/ptx_smoke.py --one > "$OUT/ncu_export.log" 2>&1
ncu --import /tmp/wgmma.ncu-rep --csv --page raw --print-metric-instances details > "$OUT/ncu_opcodes_details.csv" 2>&1
python3 -c "import sys; from evaluator.ptx.feature_evidence import executed_opcodes_from_raw_csv as f, families_from_opcodes as g; print('ncu executed:', {k: g(v) for k, v in f(open(sys.argv[1]).read()).items()})" "$OUT/ncu_opcodes_details.csv"
