"""The single-GPU catalogue cut into groups of about equal GPU time, one device call each.

    python3 benchmarks/catalogue_groups.py 3/6      # the third of six groups, comma-separated

Each problem weighs what its latest baseline and example jobs took through a runner on the H200
(``results/data/runner_jobs_h200.json``; a problem not yet run there counts as ``UNSEEN_S``). The
heaviest go first, each into the lightest group so far (longest processing time first), so six
groups of the 33 problems come to about 400 s each: one call of ``device_call.sh jobs`` apiece.
``device_call.sh`` expands ``PROBLEMS=@N/M`` (and ``BASELINES``, ``EXAMPLES``) with it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from evaluator.problems import load_catalogue

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: runner_record beside it

from runner_record import sources_of

RECORD = Path(__file__).resolve().parent / "results" / "data" / "runner_jobs_h200.json"
#: Seconds a problem with no recorded job is taken to need for its baseline and example together.
UNSEEN_S = 60.0


def recorded_seconds(record: Path = RECORD) -> dict[str, float]:
    """Per problem, the seconds of its latest baseline job plus its latest example job."""
    latest: dict[tuple[str, str], float] = {}
    for _, jobs in sources_of(json.loads(record.read_text())):
        for job in jobs:
            if job.get("submission") in ("baseline", "example") and job.get("seconds"):
                latest[(job["problem"], job["submission"])] = float(job["seconds"])
    totals: dict[str, float] = {}
    for (problem, _), seconds in latest.items():
        totals[problem] = totals.get(problem, 0.0) + seconds
    return totals


def groups(names: list[str], seconds: dict[str, float], count: int) -> list[list[str]]:
    """``count`` groups of ``names``, each sorted, balanced by ``seconds`` (the heaviest placed first)."""
    placed: list[list[str]] = [[] for _ in range(count)]
    loads = [0.0] * count
    for name in sorted(names, key=lambda name: (-seconds.get(name, UNSEEN_S), name)):
        lightest = loads.index(min(loads))
        placed[lightest].append(name)
        loads[lightest] += seconds.get(name, UNSEEN_S)
    return [sorted(group) for group in placed]


def main(argv: list[str]) -> int:
    which, _, count = argv[0].partition("/")
    if not (which.isdigit() and count.isdigit() and 1 <= int(which) <= int(count)):
        print(f"usage: catalogue_groups.py N/M with 1 <= N <= M, not {argv[0]!r}", file=sys.stderr)
        return 2
    single = sorted(name for name, problem in load_catalogue().items() if problem.kind == "single")
    print(",".join(groups(single, recorded_seconds(), int(count))[int(which) - 1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:] or ["1/1"]))
