"""One whole verification round on a GPU host, in one command: everything issues 3-5 ask to see
verified on hardware, with its provenance, written as a few JSON files under ``--out``.

    SOLBOARD_COMMIT=$(git rev-parse HEAD) python3 benchmarks/gpu_round.py --out /tmp/round

Sections (each bounded in time; a failing section is recorded and the round goes on):
  calibrate    attainable ceilings (bf16 GEMM, device copy)
  baselines    every problem's baseline submitted as a submission, ranked -> score ~0.5
  catalogue    every problem's example (the vendor baseline submitted as a submission) ranked on
               every shape -> score ~0.5; a slower variant (same kernel called twice) on the quick
               shapes -> lower score; a wrong variant -> INCORRECT_NUMERICAL
  native       the PTX / CUDA examples end to end (ranked, with the ncu profile where available)
  cheats       the GPU-only cheating fixtures and GPU tests (pytest -m gpu)
  quality      benchmarks/measurement_quality.py (spread, vs ncu, vs triton do_bench, wall/shape)
  e2e          benchmarks/gpu_e2e.sh: a site worker + a runner on the embedded broker, one GPU job
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: _bench beside it

from _bench import provenance as bench_provenance

REPO = Path(__file__).resolve().parent.parent
PROBLEMS = [
    "vector_add", "gemm_bf16", "gemm_fp8", "grouped_gemm_bf16", "rmsnorm",
    "softmax", "swiglu", "attention_fwd", "attention_bwd",
]
NATIVE = [
    ("vector_add", "examples/ptx/vector_add.ptx", "ptx"),
    ("gemm_bf16", "examples/ptx/gemm_bf16_mma.ptx", "ptx"),
    ("gemm_bf16", "examples/ptx/gemm_bf16_wgmma_tma.ptx", "ptx"),
    ("vector_add", "examples/cuda/vector_add.cu", "cuda"),
]

SLOW_SUFFIX = '''

_honest_kernel = kernel


def kernel(*tensors, **kwargs):  # noqa: F811 - the slower variant: the same work done twice
    _honest_kernel(*tensors, **kwargs)
    _honest_kernel(*tensors, **kwargs)
'''

WRONG_SUFFIX = '''

_honest_kernel = kernel


def kernel(*tensors, **kwargs):  # noqa: F811 - the wrong variant: last output scaled by 1.05
    _honest_kernel(*tensors, **kwargs)
    tensors[-1].mul_(1.05)
'''


def run(cmd: list[str], timeout: float, stdin: str | None = None) -> dict:
    started = time.monotonic()
    try:
        done = subprocess.run(
            cmd, check=False, cwd=REPO, input=stdin, capture_output=True, text=True, timeout=timeout
        )
        return {
            "cmd": " ".join(cmd), "rc": done.returncode, "seconds": round(time.monotonic() - started, 2),
            "stdout": done.stdout, "stderr": done.stderr[-4000:],
        }
    except FileNotFoundError as missing:
        return {"cmd": " ".join(cmd), "rc": None, "seconds": 0.0, "stdout": "", "stderr": str(missing)}
    except subprocess.TimeoutExpired as expired:
        return {"cmd": " ".join(cmd), "rc": None, "seconds": timeout, "stdout": "",
                "stderr": f"timed out after {timeout}s: {str(expired.stderr)[-2000:]}"}


def report_of(result: dict) -> dict | None:
    try:
        return json.loads(result["stdout"])
    except (json.JSONDecodeError, TypeError):
        return None


DEVICE = "cuda"


def evaluate(problem: str, path: str, args: list[str], timeout: float) -> dict:
    """Ranked runs get a fresh secret seed on stdin, as a runner sends it (rank eligibility needs it)."""
    cmd = [sys.executable, "-m", "evaluator", "run", problem, path, "--device", DEVICE, "--json", *args]
    secret = None
    if "ranked" in args:
        cmd.append("--secret-seed-stdin")
        secret = str(int.from_bytes(os.urandom(6), "little"))
    result = run(cmd, timeout, stdin=secret)
    report = report_of(result)
    summary = {"problem": problem, "file": path, "args": args, "rc": result["rc"],
               "seconds": result["seconds"]}
    if report is None:
        summary["error"] = result["stderr"][-3000:] or result["stdout"][-3000:]
        return summary
    summary["status"] = report["status"]
    summary["message"] = report.get("message", "")[:500]
    summary["problem_score"] = report.get("problem_score")
    summary["rank_eligible"] = report.get("rank_eligible")
    summary["flags"] = report.get("flags")
    summary["shapes"] = [_shape_line(shape) for shape in report["shapes"]]
    summary["report"] = report
    return summary


def _shape_line(shape: dict) -> dict:
    timing, base, sol = shape.get("timing") or {}, shape.get("baseline_timing") or {}, shape.get("sol") or {}
    return {
        "shape": shape["shape_id"], "ranked": shape["ranked"], "status": shape["status"],
        "message": shape.get("message", "")[:300],
        "median_us": timing.get("median_us"), "ci_rel": timing.get("ci95_half_width_rel"),
        "n": timing.get("n"), "source": timing.get("ranked_source"),
        "event_median_us": timing.get("event_median_us"),
        "baseline_us": base.get("median_us"), "t_sol_us": sol.get("t_sol_us"),
        "sol_fraction": sol.get("sol_fraction"), "score": sol.get("score"),
        "tflops": sol.get("tflops"), "gbps": sol.get("gbps"), "wall_s": shape.get("wall_seconds"),
    }


def variant_file(problem: str, suffix: str, tag: str) -> str:
    source = (REPO / "examples" / "python" / f"{problem}.py").read_text() + suffix
    folder = Path(tempfile.mkdtemp(prefix=f"solboard-{tag}-"))
    path = folder / f"{problem}_{tag}.py"
    path.write_text(source)
    return str(path)


def section_catalogue(calibration: list[str], deadline: float, variants: list[str]) -> list[dict]:
    """Every example on every shape; the slower and wrong variants on the quick shapes of
    ``variants`` (each evaluation costs a fresh child process: the device budget decides)."""
    results = []
    for problem in PROBLEMS:
        if time.monotonic() > deadline:
            results.append({"problem": problem, "error": "round time budget spent"})
            continue
        example = f"examples/python/{problem}.py"
        results.append(evaluate(problem, example, ["--mode", "ranked", "--no-profile", *calibration], 300))
    quick = ["--mode", "ranked", "--shapes", "quick", "--no-profile", *calibration]
    for problem in variants:
        for suffix, tag in ((SLOW_SUFFIX, "slow"), (WRONG_SUFFIX, "wrong")):
            if time.monotonic() > deadline:
                results.append({"problem": problem, "file": tag, "error": "round time budget spent"})
                continue
            results.append(evaluate(problem, variant_file(problem, suffix, tag), quick, 200))
    return results


def baseline_file(problem: str) -> str:
    """The vendor-library baseline itself, submitted as a submission (its score must be ~0.5)."""
    folder = Path(tempfile.mkdtemp(prefix="solboard-baseline-"))
    path = folder / f"{problem}_baseline.py"
    path.write_text(f"from evaluator.problems.{problem}.reference import baseline as kernel\n")
    return str(path)


def section_baselines(
    calibration: list[str], deadline: float, shapes: str, problems: list[str]
) -> list[dict]:
    results = []
    for problem in problems:
        if time.monotonic() > deadline:
            results.append({"problem": problem, "file": "baseline", "error": "round time budget spent"})
            continue
        args = ["--mode", "ranked", "--shapes", shapes, "--no-profile", *calibration]
        results.append(evaluate(problem, baseline_file(problem), args, 300))
    return results


def section_native(calibration: list[str], artifacts: Path, shapes: str) -> list[dict]:
    results = []
    for problem, path, language in NATIVE:
        if not (REPO / path).exists():
            results.append({"problem": problem, "file": path, "error": "missing"})
            continue
        args = ["--language", language, "--mode", "ranked", "--shapes", shapes,
                "--artifacts", str(artifacts), *calibration]
        results.append(evaluate(problem, path, args, 400))
    return results


def provenance() -> dict:
    """_bench's header and the torch build the evaluations ran with (a subprocess: this driver never
    imports torch itself)."""
    probe = run([sys.executable, "-c", "import torch;print(torch.__version__, torch.version.cuda)"], 60)
    return bench_provenance() | {"torch_cuda": probe["stdout"].strip()}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--sections", default="calibrate,baselines,catalogue,native,cheats,quality,e2e")
    parser.add_argument("--budget", type=float, default=540.0, help="seconds for the whole round")
    parser.add_argument("--device", default="cuda", help="cpu: a dry run of the script itself")
    parser.add_argument("--variants", default="vector_add,gemm_bf16,rmsnorm,attention_fwd",
                        help="problems whose slower and wrong variants are evaluated")
    parser.add_argument("--native-shapes", default="quick", choices=["quick", "all", "ranked"])
    parser.add_argument("--baseline-shapes", default="ranked", choices=["quick", "all", "ranked"])
    parser.add_argument("--problems", default=",".join(PROBLEMS), help="problems of the baselines section")
    parser.add_argument("--calibration", type=Path, default=None,
                        help="reuse a calibration file instead of running the calibrate section")
    args = parser.parse_args()
    global DEVICE
    DEVICE = args.device
    args.out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.budget
    sections = args.sections.split(",")
    summary: dict = {"provenance": provenance(), "sections": {}}
    calibration: list[str] = ["--calibration", str(args.calibration)] if args.calibration else []
    if "calibrate" in sections:
        result = run([sys.executable, "-m", "evaluator", "calibrate", "--json"], 120)
        (args.out / "calibration.json").write_text(result["stdout"] or "{}")
        summary["sections"]["calibrate"] = report_of(result) or result
        if report_of(result):
            calibration = ["--calibration", str(args.out / "calibration.json")]
    if "native" in sections:
        artifacts = Path(tempfile.mkdtemp(prefix="solboard-artifacts-"))  # .ncu-rep files stay there
        native = section_native(calibration, artifacts, args.native_shapes)
        (args.out / "native.json").write_text(json.dumps(native, indent=1))
        summary["sections"]["native"] = [_brief(item) for item in native]
    if "baselines" in sections:
        baselines = section_baselines(
            calibration, deadline - 30, args.baseline_shapes, args.problems.split(",")
        )
        (args.out / "baselines.json").write_text(json.dumps(baselines, indent=1))
        summary["sections"]["baselines"] = [_brief(item) for item in baselines]
    if "catalogue" in sections:
        catalogue = section_catalogue(calibration, deadline - 30, [v for v in args.variants.split(",") if v])
        (args.out / "catalogue.json").write_text(json.dumps(catalogue, indent=1))
        summary["sections"]["catalogue"] = [_brief(item) for item in catalogue]
    if "cheats" in sections:
        result = run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider",
                      "-o", "addopts=", "tests/"], 240)
        summary["sections"]["cheats"] = {"rc": result["rc"], "tail": result["stdout"][-6000:],
                                         "stderr": result["stderr"][-2000:]}
    if "quality" in sections:
        result = run([sys.executable, "benchmarks/measurement_quality.py", "--out",
                      str(args.out / "measurement_quality.json")], 300)
        summary["sections"]["quality"] = {"rc": result["rc"], "tail": result["stdout"][-4000:],
                                          "stderr": result["stderr"][-2000:]}
    if "e2e" in sections:
        result = run(["bash", "benchmarks/gpu_e2e.sh"], 240)
        summary["sections"]["e2e"] = {"rc": result["rc"], "tail": result["stdout"][-4000:],
                                      "stderr": result["stderr"][-3000:]}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1)[-9000:])
    return 0


def _brief(item: dict) -> dict:
    return {key: value for key, value in item.items() if key != "report"}


if __name__ == "__main__":
    sys.exit(main())
