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
VENV=${VENV:-/tmp/solboard-gpu-venv}
mkdir -p "$OUT"

# A venv that sees the system's torch/CUDA stack, plus the carried wheels (no index, no network).
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv --system-site-packages "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --no-index --no-deps --find-links .whl -r benchmarks/gpu_e2e_wheels.txt

# The runner drops to unprivileged job users when root: they must reach the interpreter.
if [ "$(id -u)" = 0 ] && [[ "$(readlink -f "$VENV/bin/python")" == /root/* ]]; then
  echo "gpu_e2e: the interpreter lives under /root; letting job users traverse it (chmod o+x /root)"
  chmod o+x /root
fi

nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv > "$OUT/nvidia-smi.csv" || true
git rev-parse HEAD > "$OUT/commit.txt" 2>/dev/null || true
{ date -u; uname -a; "$VENV/bin/python" -c 'import torch, sys; print(sys.version); print("torch", torch.__version__, torch.version.cuda)'; } > "$OUT/machine.txt" 2>&1 || true

export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec timeout 1700 "$VENV/bin/python" benchmarks/gpu_e2e.py --out "$OUT"
