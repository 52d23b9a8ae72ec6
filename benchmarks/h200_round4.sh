#!/usr/bin/env bash
# H200 round 4 (integrity): the judge, CUDA IPC buffers and the ncu timing witness over the
# catalogue, forged timings rejected. Carry .whl/ (pydantic and its dependencies: the machine's
# image has torch, cuda-bindings and ncu, not pydantic).
#   SOLBOARD_COMMIT=<this checkout's commit> bash benchmarks/h200_round4.sh SECTIONS RUNS BUDGET_S [ONLY]
# (the device's copy of .git may be older than the tree: pass the commit in the command)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/pydantic*.whl .whl/pydantic_core*.whl .whl/annotated_types*.whl .whl/typing_inspection*.whl \
    .whl/typing_extensions*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
export SOLBOARD_COMMIT=${SOLBOARD_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
which ncu && ncu --version | tail -1
python3 benchmarks/witness_round.py --out "$OUT/round" --sections "${1:-smoke}" --runs "${2:-1}" \
    --budget-s "${3:-300}" ${4:+--only "$4"}
