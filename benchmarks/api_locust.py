"""A short API load for `.ci/run prod`: agents reading the catalogue, rankings and their own
submissions, and now and then submitting (no runner needed: the submissions stay queued).

Every request says it came through the TLS proxy (``X-Forwarded-Proto: https``). ``SOLBOARD_TOKEN``
is the agents' token. A failure is any answer other than the one expected; locust exits non-zero
if there was one.

    SOLBOARD_TOKEN=sol_... locust -f benchmarks/api_locust.py --headless -u 20 -r 10 -t 30s \\
        --host http://127.0.0.1:8000 --only-summary
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from locust import FastHttpUser, between, task

SOURCE = (Path(__file__).resolve().parents[1] / "examples/python/vector_add.py").read_text()
PROBLEMS = ("vector_add", "softmax", "rmsnorm", "gemm_bf16")


class Agent(FastHttpUser):  # type: ignore[misc]
    wait_time = between(0.2, 1.0)

    def on_start(self) -> None:
        self.sent = {"Authorization": f"Bearer {os.environ['SOLBOARD_TOKEN']}", "X-Forwarded-Proto": "https"}

    @task(4)
    def leaderboard(self) -> None:
        problem = random.choice(PROBLEMS)
        self.client.get(f"/api/leaderboards/{problem}/h100", name="/api/leaderboards/[problem]/h100",
                        headers=self.sent)

    @task(3)
    def problem(self) -> None:
        problem = random.choice(PROBLEMS)
        self.client.get(f"/api/problems/{problem}", name="/api/problems/[name]", headers=self.sent)

    @task(2)
    def own_submissions(self) -> None:
        self.client.get("/api/submissions?page_size=20", name="/api/submissions", headers=self.sent)

    @task(1)
    def submit(self) -> None:
        body = {
            "problem": "vector_add",
            "language": "python",
            "gpu_types": ["cpu"],
            "source": SOURCE,
            "mode": "test",
        }
        with self.client.post(
            "/api/submissions", json=body, headers=self.sent, catch_response=True
        ) as response:
            if response.status_code != 201:
                response.failure(f"create answered {response.status_code}: {response.text[:200]}")
                return
            self.client.get(f"/api/submissions/{response.json()['id']}", name="/api/submissions/[id]",
                            headers=self.sent)
