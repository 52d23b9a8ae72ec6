#!/usr/bin/env bash
# One end-to-end GPU job on an H200 machine with no network (run from the repository root):
# a site worker and one runner node on the embedded broker, the example vector_add submission in
# ranked mode, its report and the logs written to $OUT.
#
# The machine has Python 3.12, torch, numpy, cuda-bindings and nvidia-ml-py; bring the other
# wheels in .whl/ (list and download command: benchmarks/gpu_e2e_wheels.txt).
set -euo pipefail
OUT=${OUT:?set OUT to the folder that receives the report}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"

# The carried wheels go straight into the machine's own interpreter (no index, no network): a venv
# made from it with --system-site-packages would not see its torch when that interpreter is itself
# a venv (/opt/torch/.venv on the lent H200s), and the sandboxed jobs run with a minimal
# environment (no PYTHONPATH beyond the project), so they must find pydantic there too.
"$PYTHON" -m pip install --quiet --no-index --no-deps --find-links .whl -r benchmarks/gpu_e2e_wheels.txt
VENV_PYTHON=$(command -v "$PYTHON")

# The runner drops to unprivileged job users when root; it opens the search bit on the folders
# above the interpreter and the project itself (runners/node.py) and logs what it changed.

nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv > "$OUT/nvidia-smi.csv" || true
git rev-parse HEAD > "$OUT/commit.txt" 2>/dev/null || true
{ date -u; uname -a; "$VENV_PYTHON" -c 'import torch, sys; print(sys.version); print("torch", torch.__version__, torch.version.cuda)'; } > "$OUT/machine.txt" 2>&1 || true

export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
status=0
timeout 1700 "$VENV_PYTHON" benchmarks/gpu_e2e.py --out "$OUT" || status=$?
# The cluster's own logs (site worker, runner node, its slots) tell why when it failed.
for log in /tmp/solboard-bench-*/*.log; do [ -f "$log" ] && tail -c 20000 "$log" > "$OUT/$(basename "$log")"; done
exit $status
