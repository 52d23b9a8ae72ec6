"""Issue 33's sandbox on a GPU: ranked jobs through the runner's own path under the split uids, the
seccomp filter and the job's cgroup, ncu witnessing. Run as root from the checkout:

    PYTHONPATH=$PWD python benchmarks/jail_gpu_proof.py --out FOLDER   (or: device_call.sh jailproof)

Jobs (``execute.run``, ranked, vector_add's quick shapes on GPU 0):

1. ``example``: the shipped example (torch.add).
2. ``triton``: tests/fixtures/good/triton_add.py (Triton's JIT, gcc for its launcher).
3. ``compile``: a torch.compile vector add (Inductor -> Triton, compiled in the child).
4. ``kill_judge`` / ``stop_judge``: tests/fixtures/jail/signal_judge.py, SIGKILL / SIGSTOP of its
   judge at import.
5. ``gpu_memory``: allocates 16 GiB at import under an 8 GiB budget.

Expected: 1-4 PASSED, witnessed (every ranked shape's ``witness`` confirmed, ncu's profile
available), their logs without "Operation not permitted"; 4's log says ``solboard-attack:
refused``; 5 ends ``job_failed`` with "GPU memory" in its message within a few seconds; every
report's ``sandbox`` has ``identities`` "... cannot signal, trace or read the judge", ``seccomp``
"libseccomp filter ...", ``memory_cgroup`` "cgroup v..." and ``gaps`` without "seccomp" or
"cgroup". A job that fails on a refused call names it in its log: compare ``--no-seccomp``.
(Job 3 is the harness's to make pass, issue 33 item 7: if it is REJECTED for the harness's reason,
only its sandbox facts and log matter here.)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from pathlib import Path

from runners import execute, identities, sandbox
from runners.slots import Slot, StateDir
from solboard_common.protocol import Job, JobLimits

REPO = Path(__file__).resolve().parents[1]
COMPILED = '''
import torch

def _add(a, b):
    return a + b

_compiled = torch.compile(_add)

def kernel(a, b, c):
    c.copy_(_compiled(a, b))
'''
GPU_HOG = '''
import torch
_hog = torch.empty(16 << 30, dtype=torch.uint8, device="cuda")
_hog.fill_(1)
import time
time.sleep(30)

def kernel(a, b, c):
    torch.add(a, b, out=c)
'''


def sources() -> dict[str, tuple[str, JobLimits]]:
    attack = (REPO / "tests" / "fixtures" / "jail" / "signal_judge.py").read_text()
    default = JobLimits()
    return {
        "example": ((REPO / "examples" / "python" / "vector_add.py").read_text(), default),
        "triton": ((REPO / "tests" / "fixtures" / "good" / "triton_add.py").read_text(), default),
        "compile": (COMPILED, default),
        "kill_judge": (attack, default),
        "stop_judge": (attack.replace("SIGNAL = signal.SIGKILL", "SIGNAL = signal.SIGSTOP"), default),
        "gpu_memory": (GPU_HOG, JobLimits(gpu_memory_bytes=8 << 30)),
    }


def run_one(name: str, source: str, limits: JobLimits, ctx: execute.Context) -> dict[str, object]:
    job = Job(job_id=f"proof-{name}-{os.urandom(3).hex()}", evaluation_id=1, problem="vector_add",
              problem_version=1, language="python", source=source,
              source_sha256=hashlib.sha256(source.encode()).hexdigest(), mode="ranked", seed=987654321,
              shapes="quick", gpu_type="h200", limits=limits)
    began = time.monotonic()
    result = execute.run(job, ctx, lambda: None)
    row: dict[str, object] = {"job": name, "outcome": result.outcome, "message": result.message[:1500],
                              "seconds": round(time.monotonic() - began, 1)}
    report = result.report
    if report is not None:
        row.update(
            status=report.status.value,
            report_message=report.message[:800],
            log_tail=report.log[-1500:],
            sandbox=report.sandbox,
            refused_calls="Operation not permitted" in report.log,
            shapes=[
                {
                    "shape": shape.shape_id,
                    "status": shape.status.value,
                    "witness": shape.witness.model_dump(mode="json") if shape.witness else None,
                    "profile": bool(shape.profile and shape.profile.available),
                }
                for shape in report.shapes
            ],
        )
    else:
        row["log_tail"] = result.log[-3000:]
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True, help="the folder for jobs.json (outside the tree)")
    parser.add_argument("--no-seccomp", action="store_true", help="the same jobs without the filter")
    parser.add_argument("--only", nargs="*", help="job names to run")
    args = parser.parse_args()
    sandbox.become_subreaper()
    caps = sandbox.capabilities()
    print("capabilities", caps, flush=True)
    if args.no_seccomp:
        os.environ["SOLBOARD_SECCOMP"] = "0"
    block, _lock = identities.claim_block()
    root = Path("/tmp/jail-gpu-proof")
    root.mkdir(exist_ok=True)
    os.chmod(root, 0o755)
    slot = Slot(key="gpu0", device="cuda", gpu_type="h200", gpu_indices=(0,), queue="gpu.h200.x1")
    ctx = execute.Context(
        node="proof", slot=slot, state=StateDir(root / "state"), users=identities.Rotation(block)
    )
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, (source, limits) in sources().items():
        if args.only and name not in args.only:
            continue
        row = run_one(name, source, limits, ctx)
        rows.append(row)
        print(json.dumps({key: row.get(key) for key in ("job", "outcome", "status", "seconds", "message")}),
              flush=True)
    (args.out / "jobs.json").write_text(json.dumps(rows, indent=1, default=str))
    print("sandbox facts of the first job:", json.dumps(rows[0].get("sandbox"), indent=1) if rows else None)


if __name__ == "__main__":
    main()
