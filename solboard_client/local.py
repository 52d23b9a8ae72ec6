"""``solboard run``: the same evaluator the runners use, on this machine, to reproduce a result.

It runs ``python -m evaluator run`` in a child process (the evaluator needs torch; the client
does not), with the language taken from the file's extension unless given.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from evaluator.vocabulary import CPU, CUDA, Status
from solboard_client import render
from solboard_client.commands import EXIT_KERNEL, EXIT_OK, EXIT_SERVICE, language_of
from solboard_client.output import Output


def default_device() -> str:
    return CUDA if shutil.which("nvidia-smi") else CPU


def evaluator_argv(args: argparse.Namespace) -> list[str]:
    path = Path(args.file)
    argv = [sys.executable, "-m", "evaluator", "run", args.problem, str(path),
            "--language", language_of(path, args.language), "--device", args.device or default_device(),
            "--mode", args.mode or "test", "--json"]
    if args.spec:
        argv += ["--spec", str(args.spec)]
    return argv


def run(args: argparse.Namespace, out: Output) -> int:
    completed = subprocess.run(evaluator_argv(args), capture_output=True, text=True, check=False)
    try:
        report = json.loads(completed.stdout)
    except ValueError:
        sys.stderr.write(completed.stderr[-4000:])
        print(f"solboard run: the evaluator exited {completed.returncode} without a report", file=sys.stderr)
        return EXIT_SERVICE
    if not out.text:
        out.result("run", report, lambda: None)
    else:
        print(f"{report['problem']} on {report['device']['name']}: {report['status']}"
              + (f" - {report['message']}" if report.get("message") else ""))
        render.table(["shape", "status", "median_us", "baseline_us", "message"],
                     [(s["shape_id"], s["status"], (s.get("timing") or {}).get("median_us"),
                       (s.get("baseline_timing") or {}).get("median_us"), s.get("message", "")[:80])
                      for s in report.get("shapes", [])])
    return EXIT_OK if report["status"] == Status.PASSED else EXIT_KERNEL
