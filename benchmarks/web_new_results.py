"""New results arriving during the website benchmark (benchmarks/web_bench.sh): every N seconds
one problem's pages go out of date, as when the site stores a result for it, so the benchmark
pays the rebuilds a live site pays (the rebuild reads the same rows either way). The problem is
one of those the visitors load (``WEB_BENCH_PROBLEMS``, as in web_load.py): a result for a
problem nobody looks at would only cost the home page's rebuild.

It also measures how long the pages stay out of date: after each result, it watches the stored
copies of that problem's GPU tabs (the ones the benchmark loads) and of the home page, and notes
when each is stored again under the new data version, i.e. when visitors get the new result. At
the end (SIGTERM or SIGINT) it writes the figures to ``--staleness`` (default: stdout).

    DATABASE_URL=... SOLBOARD_CACHE_URL=... python benchmarks/web_new_results.py --every 2
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import sys
import time
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard.settings")

import django

django.setup()

# Django's cache and models need the apps loaded: these imports follow django.setup().
from django.core.cache import cache  # noqa: E402

from leaderboard.models import Problem  # noqa: E402
from leaderboard.web.cache import data_version, pages_changed, version_keys  # noqa: E402

GPUS = ("h100", "h200", "b200")
POLL_SECONDS = 0.02


def page_keys(name: str) -> dict[str, list[str]]:
    """The cache keys of the pages a result for ``name`` makes out of date (as pagecache.plan_for
    names them for a plain-HTTP anonymous visitor), each with its version keys."""
    pages = {f"web:page:http:problem:{name}?gpu={gpu}": version_keys(name) for gpu in GPUS}
    pages["web:page:http:home:?"] = version_keys(None)
    return pages


def watch(pages: dict[str, list[str]], since: float, until: float) -> dict[str, float | None]:
    """Seconds from ``since`` until each page is stored under its current data version (None: not
    by ``until``)."""
    waiting, found_after = dict(pages), {}
    while waiting and time.monotonic() < until:
        for key, versions in list(waiting.items()):
            found = cache.get_many([key, *versions])
            entry = found.get(key)
            if isinstance(entry, dict) and entry["version"] == data_version(found, versions):
                found_after[key] = time.monotonic() - since
                del waiting[key]
        time.sleep(POLL_SECONDS)
    return {key: found_after.get(key) for key in pages}


def summary(kind: str, delays: list[float | None], every: float) -> str:
    done = sorted(delay for delay in delays if delay is not None)
    if not done:
        return f"{kind}: {len(delays)} out of date, none stored again within {every} s\n"
    return (f"{kind}: {len(delays)} out of date, stored again after median {statistics.median(done):.2f} s, "
            f"p95 {done[int(0.95 * (len(done) - 1))]:.2f} s, max {done[-1]:.2f} s; "
            f"not within {every} s: {len(delays) - len(done)}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=2.0, help="seconds between two results")
    parser.add_argument("--staleness", help="file for the staleness figures (default: stdout)")
    args = parser.parse_args()
    loaded = os.environ.get("WEB_BENCH_PROBLEMS", "vector_add,gemm_bf16,softmax,rmsnorm,swiglu").split(",")
    names = list(Problem.objects.filter(active=True, name__in=loaded).values_list("name", flat=True))
    delays: dict[str, list[float | None]] = {"problem pages": [], "home page": []}

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    next_at = time.monotonic() + args.every
    try:
        while True:
            time.sleep(max(0.0, next_at - time.monotonic()))
            name = random.choice(names)
            pages_changed(name)
            started, next_at = time.monotonic(), next_at + args.every
            for key, delay in watch(page_keys(name), started, next_at - 0.05).items():
                delays["home page" if ":home:" in key else "problem pages"].append(delay)
    finally:
        text = "staleness (a result -> its pages stored again under the new data version):\n" + "".join(
            summary(kind, found, args.every) for kind, found in delays.items())
        if args.staleness:
            with open(args.staleness, "w") as out:
                out.write(text)
        else:
            sys.stdout.write(text)


if __name__ == "__main__":
    main()
