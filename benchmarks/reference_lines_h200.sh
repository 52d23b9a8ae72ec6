#!/usr/bin/env bash
# Reference lines and the importers' native tables on an H200 (unattended; from the repository root,
# no network). Two parts, results under $OUT:
#
# 1. measure_references through a site worker and one runner node on the embedded broker
#    (benchmarks/reference_lines.py): the eager, torch.compile and library lines of the problems
#    that have a library line (or PROBLEMS="all"). Liger-Kernel and FlashAttention come as wheels in
#    .whl/ (the runner's `references` extra; fetch on a machine with network:
#      pip download --python-version 3.12 --platform manylinux2014_x86_64 --only-binary=:all: \
#          --no-deps -d .whl 'liger-kernel>=0.6' 'flash-attn>=2.7'
#    flash-attn publishes no manylinux wheel on PyPI: without one its line shows `unavailable`).
#    Proves: every eager line PASSED at S = 0.5 +- 0.02, every torch_compile line PASSED, the Liger
#    lines PASSED with their scores (issue 37: cross_entropy ~0.95, silu_and_mul ~0.94-0.99,
#    rmsnorm ~0.85-0.92), and no reference line in any ranking: reference_lines.json|md.
# 2. the importers' native tables: the in-repo SOL-ExecBench fixtures imported, then the CUDA kernel
#    tests/fixtures/import/solutions/rmsnorm_h256.cu run on rmsnorm_h256 by the harness (expect
#    PASSED: the imported [ptx] table's pointers, axis and fp32 eps reach a real kernel), and the
#    generated PTX skeleton of every imported problem launched (expect INCORRECT_NUMERICAL: it
#    writes nothing, so its outputs stay poisoned; never a launch or ABI error): native_*.json.
#
# The site and runner need the wheels of benchmarks/gpu_e2e_wheels.txt in .whl/ too.
set -uo pipefail
OUT=${OUT:?set OUT to the folder that receives the results}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
"$PYTHON" -m pip install --quiet --no-index --no-deps --find-links .whl -r benchmarks/gpu_e2e_wheels.txt
for wheel in .whl/liger_kernel-*.whl .whl/flash_attn-*.whl; do
  [ -f "$wheel" ] && "$PYTHON" -m pip install --quiet --no-index --no-deps "$wheel"
done
"$PYTHON" -m pip list 2>/dev/null | grep -i -E "liger|flash|triton|torch" > "$OUT/packages.txt"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
status=0

# 1. reference lines
args=()
for problem in ${PROBLEMS:-}; do args+=(--problem "$problem"); done
timeout 560 "$PYTHON" benchmarks/reference_lines.py --out "$OUT" "${args[@]}" --timeout "${WAIT_S:-480}" \
  > "$OUT/reference_lines.log" 2>&1 || status=$?
for log in /tmp/solboard-bench-*/*.log; do [ -f "$log" ] && tail -c 20000 "$log" > "$OUT/cluster-$(basename "$log")"; done

# 2. the importers' native tables
export SOLBOARD_IMPORTED_PROBLEMS="$OUT/imported"
"$PYTHON" -m evaluator import-problems --format sol-execbench tests/fixtures/import/sol-execbench --json \
  > "$OUT/native_import.json" 2> "$OUT/native_import.log"
"$PYTHON" -m evaluator run rmsnorm_h256 tests/fixtures/import/solutions/rmsnorm_h256.cu --device cuda \
  --mode ranked --json > "$OUT/native_rmsnorm_h256.json" 2> "$OUT/native_rmsnorm_h256.log" || status=$?
for folder in "$SOLBOARD_IMPORTED_PROBLEMS"/*/; do
  name=$(basename "$folder")
  "$PYTHON" -c "import sys; from evaluator.problems import get_problem; from evaluator.ptx.native_abi import describe, from_problem; sys.stdout.write(describe(from_problem(get_problem('$name'))).ptx_skeleton)" \
    > "$OUT/skeleton_$name.ptx"
  "$PYTHON" -m evaluator run "$name" "$OUT/skeleton_$name.ptx" --device cuda --mode test --json \
    > "$OUT/native_skeleton_$name.json" 2>> "$OUT/native_skeletons.log"
done
"$PYTHON" - "$OUT" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
kernel = json.loads((out / "native_rmsnorm_h256.json").read_text() or "{}")
print("rmsnorm_h256.cu:", kernel.get("status"), kernel.get("message", "")[:200])
for path in sorted(out.glob("native_skeleton_*.json")):
    report = json.loads(path.read_text() or "{}")
    print(path.stem, report.get("status"), report.get("message", "")[:160])
PY
exit $status
