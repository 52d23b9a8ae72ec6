"""Seed a live site's database with what its pages show (run inside it: ``solboard manage shell -c
"from tests.integration.seed_pages import seed; seed()"``): ranked H200 results of vector_add over
three days from three users, stored through the site's own path (tests/leaderboard/web_helpers.py),
so the rankings, the record chart with each leader's dashed line and a full report page exist."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.utils import timezone

from leaderboard.models import Submission
from tests.leaderboard.web_helpers import ranked

PASSWORD = "a-long-pass-phrase-9"
#: (user, speed over the baseline, days ago): alice sets the record last, so her own dashed line
#: runs along the record line at the chart's right edge.
RESULTS = (("bob", 1.05, 3.0), ("carol", 1.2, 2.0), ("alice", 1.1, 1.5), ("alice", 1.45, 0.5))


def seed() -> None:
    users = get_user_model()
    for name in {name for name, _, _ in RESULTS}:
        users.objects.create_user(username=name, password=PASSWORD)
    now = timezone.now()
    for name, speed, days in RESULTS:
        evaluation = ranked(users.objects.get(username=name), "vector_add", "h200", speed)
        Submission.objects.filter(pk=evaluation.submission_id).update(created_at=now - timedelta(days=days))
    print(Submission.objects.order_by("-pk").values_list("pk", flat=True).first())
