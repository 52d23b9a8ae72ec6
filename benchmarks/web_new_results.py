"""New results arriving during the website benchmark (benchmarks/web_bench.sh): every N seconds
one problem's pages go out of date, as when the site stores a result for it, so the benchmark
pays the background rebuilds a live site pays (the rebuild reads the same rows either way).

    DATABASE_URL=... SOLBOARD_CACHE_URL=... python benchmarks/web_new_results.py --every 2
"""

from __future__ import annotations

import argparse
import os
import random
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard.settings")

import django

django.setup()

from leaderboard.models import Problem
from leaderboard.web.cache import pages_changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=2.0, help="seconds between two results")
    args = parser.parse_args()
    names = list(Problem.objects.filter(active=True).values_list("name", flat=True))
    while True:
        time.sleep(args.every)
        pages_changed(random.choice(names))


if __name__ == "__main__":
    main()
