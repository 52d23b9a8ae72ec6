"""``python -m evaluator run PROBLEM FILE ...``: evaluate one submission and print the report.

Exit 0 whenever the evaluation completed, whatever the verdict; non-zero only when the evaluator
itself could not run (bad arguments, unknown problem, internal error).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from evaluator import jobstream
from evaluator.vocabulary import (
    COMPILE_LIMIT_S,
    CUDA,
    DEVICES,
    LANGUAGES,
    MODES,
    RANKED_LIMIT_S,
    TEST_LIMIT_S,
    TEST_MODE_RANKED_LIMIT_S,
    TEST_MODE_TEST_LIMIT_S,
    Language,
    language_of_file,
    stage_limits,
)

if TYPE_CHECKING:
    from evaluator.harness.request import Limits
    from evaluator.harness.single.warm import WarmStart
    from evaluator.report import EvaluationReport

HELP = "evaluate a submission: correctness, cold-L2 timing, SOL and score"

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("problem", help="problem name (python -m evaluator problems)")
    parser.add_argument("file", type=Path, help="submission source file")
    parser.add_argument("--language", choices=LANGUAGES, default=None,
                        help="default: from the file's extension (.ptx, .cu/.cuh, else python)")
    parser.add_argument("--spec", type=Path, default=None, help="launch spec for PTX/CUDA")
    parser.add_argument("--device", choices=DEVICES, default=CUDA)
    parser.add_argument("--mode", choices=MODES, default="test")
    parser.add_argument(
        "--seed", type=int, default=None, help="public seed (default: the problem's test seeds)"
    )
    parser.add_argument("--secret-seed-stdin", action="store_true", help="read the secret seed from stdin")
    parser.add_argument("--shapes", choices=["all", "quick", "ranked"], default="all")
    parser.add_argument("--world-size", type=int, default=None, metavar="N",
                        help="ranks of a multi-GPU problem, one process and one GPU each (default: the "
                        "problem's own; the CPU device runs N gloo processes)")
    parser.add_argument("--json", action="store_true", help="print the JSON report")
    parser.add_argument("--artifacts", type=Path, default=None, help="folder for artifacts")
    parser.add_argument("--time-limit-compile", type=float, default=None, metavar="S",
                        help=f"default {COMPILE_LIMIT_S:g}")
    parser.add_argument(
        "--time-limit-test",
        type=float,
        default=None,
        metavar="S",
        help=f"default {TEST_MODE_TEST_LIMIT_S:g} in test mode, {TEST_LIMIT_S:g} in ranked mode",
    )
    parser.add_argument(
        "--time-limit-ranked",
        type=float,
        default=None,
        metavar="S",
        help=f"default {TEST_MODE_RANKED_LIMIT_S:g} in test mode, {RANKED_LIMIT_S:g} in ranked mode",
    )
    parser.add_argument("--time-limit-first-call", type=float, default=None, metavar="S",
                        help="the first call of each shape (compilation, autotuning); default 15 on a GPU, "
                        "90 on the CPU device")
    parser.add_argument("--log-bytes", type=int, default=64 * 1024, metavar="N")
    parser.add_argument("--calibration", type=Path, default=None, help="JSON of attainable ceilings")
    parser.add_argument("--no-profile", action="store_true",
                        help="the witness collects kernel durations only (no launch facts)")
    parser.add_argument("--profile-sections", action="store_true",
                        help="the witness also collects ncu's SpeedOfLight/LaunchStats/Occupancy (slower)")
    parser.add_argument("--stream", action="store_true",
                        help="print JSON lines (evaluator/jobstream.py): in ranked mode a provisional "
                        "report when the ranked stage ends, then the final report (what runners read)")


def language_of(path: Path) -> Language:
    return language_of_file(path.name)


def _secret_from_stdin() -> int:
    text = sys.stdin.readline().strip()
    try:
        return int(text, 0)
    except ValueError:
        raise ValueError("--secret-seed-stdin: stdin must hold an integer") from None


def _calibration(path: Path | None) -> dict[str, float] | None:
    if path is None:
        return None
    data = json.loads(path.read_text())
    ceilings = data.get("ceilings", data)  # `calibrate --json` output, or a flat dict of ceilings
    return {
        key: float(value)
        for key, value in ceilings.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool) and _is_ceiling(key)
    }


def _is_ceiling(key: str) -> bool:
    """Keys that evaluator.gpu_specs.with_ceilings understands (others, like "runs", are ignored)."""
    return key.endswith("_tflops") or key in ("hbm_tbps", "nvlink_gbps_per_direction")


def build_request(args: argparse.Namespace, secret_seed: int | None = None):  # type: ignore[no-untyped-def]
    """The request ``args`` describe; the secret seed comes from stdin (``--secret-seed-stdin``)
    or, for a warm spare, with its job (``secret_seed``)."""
    from evaluator.api import EvaluationRequest, Limits

    if args.secret_seed_stdin:
        secret_seed = _secret_from_stdin()
    return EvaluationRequest(
        problem=args.problem,
        file=args.file,
        language=args.language or language_of(args.file),
        spec=args.spec,
        device=args.device,
        mode=args.mode,
        seed=args.seed,
        secret_seed=secret_seed,
        shapes=args.shapes,
        world_size=args.world_size,
        limits=_limits(args, Limits),
        artifacts=args.artifacts,
        calibration=_calibration(args.calibration),
        profile=not args.no_profile,
        profile_sections=args.profile_sections,
    )


def _limits(args: argparse.Namespace, limits: type[Limits]) -> Limits:
    """The stage limits asked for, the mode's defaults for the rest (``vocabulary.stage_limits``)."""
    compile_s, test_s, ranked_s = stage_limits(args.mode)
    return limits(compile_s if args.time_limit_compile is None else args.time_limit_compile,
                  test_s if args.time_limit_test is None else args.time_limit_test,
                  ranked_s if args.time_limit_ranked is None else args.time_limit_ranked, args.log_bytes,
                  args.time_limit_first_call)


def main(args: argparse.Namespace) -> int:
    from evaluator.harness import process_tree

    process_tree.own_process_tree()  # this process exists for this one job
    return run_job(args)


def run_job(args: argparse.Namespace, secret_seed: int | None = None, warm: WarmStart | None = None) -> int:
    """Evaluate what ``args`` ask (in ``warm``, a warm spare's prepared processes, when given) and
    print the report; the exit status of ``run``."""
    from evaluator.api import HarnessError, evaluate
    from evaluator.harness.summary import human_summary
    from evaluator.problems import CatalogueError

    on_provisional = _stream_provisional if args.stream else None
    try:
        report = evaluate(build_request(args, secret_seed), warm=warm, on_provisional=on_provisional)
    except (CatalogueError, ValueError, FileNotFoundError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except HarnessError as error:
        print(f"internal error: {error}", file=sys.stderr)
        return EXIT_INTERNAL
    try:
        if args.stream:
            jobstream.emit_report("report", report.model_dump_json())
            jobstream.leave(0)
        else:
            print(report.model_dump_json(indent=2) if args.json else human_summary(report))
    except BrokenPipeError:  # a reader that stopped early (| head) is not the evaluator's failure
        pass
    return 0


def _stream_provisional(report: EvaluationReport) -> None:
    # The reader may have gone away: the final report will say the same (or nothing will).
    with contextlib.suppress(OSError):
        jobstream.emit_report("provisional", report.model_dump_json())
