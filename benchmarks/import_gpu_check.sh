#!/usr/bin/env bash
# Imported problems on a GPU (unattended; python -m evaluator needs no Django there).
#
#   benchmarks/import_gpu_check.sh RK_TREE SXB_TREE [SXB_TREE ...]   (or: device_call.sh imports IMPORT_TREES=RK,SXB,...)
#
# RK_TREE: a checkout of github.com/gpu-mode/reference-kernels; SXB_TREE: SOL-ExecBench's
# examples/tests and a mirror of its dataset problems (folders with definition.json). Imports both
# into $OUT/imported (the CPU validation, --jobs 8), then on CUDA:
#   1. the catalogue's self-check of every imported problem at its quick shape, with --gpu h200:
#      the baseline meets its tolerance against the reference and the reference's float64
#      formulation ("independent"), and sol_fraction = t_SOL / baseline time stays below 1 (a
#      derived t_SOL is a lower bound);
#   2. every imported problem's upstream solution (a task's submission.py, a definition's Python
#      solution.json or its own reference as one) through the harness: PASSED.
# Results: $OUT/import_*.json|log, $OUT/selfcheck.jsonl, $OUT/solutions.json.
set -uo pipefail
RK=$1; shift
OUT=${OUT:-/tmp/import_gpu}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
export SOLBOARD_IMPORTED_PROBLEMS="$OUT/imported"
$PYTHON -m evaluator import-problems --format reference-kernels "$RK" --jobs 8 --json \
  > "$OUT/import_rk.json" 2> "$OUT/import_rk.log"
for tree in "$@"; do
  tag=$(basename "$tree")
  $PYTHON -m evaluator import-problems --format sol-execbench "$tree" --jobs 8 --json \
    > "$OUT/import_sxb_$tag.json" 2> "$OUT/import_sxb_$tag.log"
done
: > "$OUT/selfcheck.jsonl"
for folder in "$SOLBOARD_IMPORTED_PROBLEMS"/*/; do
  name=$(basename "$folder")
  timeout 600 $PYTHON -m evaluator.problems.selfcheck "$name" --device cuda --gpu h200 --shapes quick \
    >> "$OUT/selfcheck.jsonl" 2>> "$OUT/selfcheck.log" || echo "{\"problem\": \"$name\", \"failed\": true}" >> "$OUT/selfcheck.jsonl"
done
$PYTHON benchmarks/import_solutions.py "$SOLBOARD_IMPORTED_PROBLEMS" "$RK" "$@" --device cuda --out "$OUT/solutions.json"
$PYTHON - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
rows = [json.loads(line) for line in open(f"{out}/selfcheck.jsonl") if line.startswith("{")]
failed = sorted({row["problem"] for row in rows if row.get("failed") or any(
    not o["passed"] for o in [*row.get("outputs", {}).values(), *row.get("independent", {}).values()])})
over = sorted({row["problem"] for row in rows if row.get("sol_fraction", 0) >= 1})
solutions = json.load(open(f"{out}/solutions.json"))
print(f"self-check: {len({r['problem'] for r in rows})} problems, failed: {failed or 'none'}; sol_fraction >= 1: {over or 'none'}")
print(f"solutions: {sum(r['status'] == 'PASSED' for r in solutions)} of {len(solutions)} PASSED")
PY
