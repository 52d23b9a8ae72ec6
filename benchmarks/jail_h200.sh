#!/usr/bin/env bash
# The runner's jail on the lent H200, as root: what the kernel allows (jail.py --probe), a CUDA job
# through the jail with every namespace and with mount/pid/IPC off, the ranked vector_add job
# through execute.run (ncu profile, report.sandbox), and the jail tests. Writes under $OUT.
# Carry .whl/ with the pydantic wheels (pydantic, pydantic_core, annotated_types,
# typing_inspection, typing_extensions for cp312): the jailed evaluator imports pydantic from the
# machine's own interpreter. Results of 2026-11-30: benchmarks/results/jail_h200/.
set -uo pipefail
OUT=${OUT:?set OUT}
export PYTHONUNBUFFERED=1
{ date -u; uname -a; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -V; id; } > "$OUT/env.txt" 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl >> "$OUT/env.txt" 2>&1
python3 -I -S runners/jail.py --probe > "$OUT/probe.json" 2>&1
PYTHONPATH=$PWD timeout 200 python3 benchmarks/jail_h200_job.py > "$OUT/cuda_job.txt" 2>&1
# The tests that import the Celery helpers need the site's wheels; the jail's own do not.
timeout 300 python3 -m pytest -q -p no:cacheprovider -o addopts=-ra tests/runners/test_jail.py \
    tests/runners/test_sandbox.py -k "not calibration and not ncu" > "$OUT/tests.txt" 2>&1
echo "tests rc=$?" >> "$OUT/tests.txt"
