"""The runner's jail on a GPU machine, as root with a pool job user (the `jail` part of
benchmarks/device_call.sh).

1. A CUDA job through ``sandbox.run`` with every namespace, then with mount, pid and IPC switched
   off: does CUDA work with a read-only /dev, what does the job see, what does the report say.
2. The ranked vector_add example through ``execute.run`` (the runner's own path): status, the ncu
   profile per shape, the report's ``sandbox`` field.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

from runners import execute, identities, sandbox
from runners.slots import Slot, StateDir
from solboard_common.protocol import Job

CUDA_JOB = r'''
import os, torch
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
print("matmul", float((a @ a).float().abs().mean()))
print("device", torch.cuda.get_device_name(0))
print("processes", len([p for p in os.listdir("/proc") if p.isdigit()]))
print("tmp", {l.split()[4]: l.split(" - ")[1].split()[0] for l in open("/proc/self/mountinfo")}.get("/tmp"))
for path in ["/etc/x", "/usr/x", os.environ["HOME"] + "/ok", "/dev/shm/ok", "/tmp/ok"]:
    try:
        open(path, "w").write("x"); print("wrote", path)
    except OSError as e:
        print("refused", path, e.errno)
print("nvidia", sorted(p for p in os.listdir("/dev") if p.startswith("nvidia")))
'''


def cuda_job(root: Path, user: sandbox.JobUser | None, disabled: frozenset[str]) -> None:
    with sandbox.Scratch(root / "scratch", user) as scratch:
        env = {
            "PATH": execute.job_path(),
            "HOME": str(scratch.path),
            "LANG": "C.UTF-8",
            "CUDA_VISIBLE_DEVICES": "0",
        }
        started = time.monotonic()
        spec = sandbox.Spec(argv=[sys.executable, "-c", CUDA_JOB], env=env, user=user, disabled=disabled,
                            limits=sandbox.Limits(wall_seconds=120))
        result = sandbox.run(spec, scratch.path)
    print(
        "=== disabled",
        sorted(disabled),
        "rc",
        result.returncode,
        "wall",
        round(time.monotonic() - started, 2),
    )
    print(result.stdout.decode())
    print(result.stderr.decode()[-3000:])
    print(json.dumps(result.jail, indent=1))
    print(json.dumps(result.facts, indent=1))
    print(result.gaps)


def ranked_job(root: Path, users: identities.Rotation) -> None:
    source = Path("examples/python/vector_add.py").read_text()
    slot = Slot(key="gpu0", device="cuda", gpu_type="h200", gpu_indices=(0,), queue="gpu.h200.x1")
    ctx = execute.Context(node="jail-check", slot=slot, state=StateDir(root / "state"), users=users)
    job = Job(
        job_id="jail-gpu-1",
        evaluation_id=1,
        problem="vector_add",
        problem_version=1,
        language="python",
        source=source,
        source_sha256=hashlib.sha256(source.encode()).hexdigest(),
        mode="ranked",
        seed=987654321,
        shapes="quick",
        gpu_type="h200",
    )
    started = time.monotonic()
    outcome = execute.run(job, ctx, lambda: None)
    print("=== execute.run ranked vector_add:", outcome.outcome, outcome.message[:2000],
          "wall", round(time.monotonic() - started, 1))
    if outcome.report is None:
        print(outcome.log[-3000:])
        return
    print("status", outcome.report.status.value, outcome.report.message[:500])
    for shape in outcome.report.shapes:
        profile = shape.profile
        print(shape.shape_id, profile.available if profile else None, profile.reason if profile else None)
    print(json.dumps(outcome.report.sandbox, indent=1))


def main() -> None:
    sandbox.become_subreaper()
    print("capabilities", sandbox.capabilities())
    block, _lock = identities.claim_block()
    users = identities.Rotation(block)
    root = Path("/tmp/jail-gpu")
    root.mkdir(exist_ok=True)
    os.chmod(root, 0o755)
    for disabled in (frozenset(), frozenset({"mount", "pid", "ipc"})):
        cuda_job(root, users.take().untrusted(), disabled)
    ranked_job(root, users)


if __name__ == "__main__":
    main()
