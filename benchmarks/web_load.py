"""Locust users of the website benchmark (benchmarks/web_bench.sh): each loads a problem's ranking
page (a random problem and GPU type; the ranked tabs) or the home page, then thinks for a while.

``FastHttpUser`` (locust's geventhttpclient user) rather than ``HttpUser`` (python-requests): the client
shares the machine with the server, and FastHttpUser spends several times less CPU per request, which would
otherwise be taken from the server and show as its latency. ``WEB_BENCH_CLIENT=requests`` uses ``HttpUser``,
as the first recorded runs did (benchmarks/results/site.md#web).

    locust -f benchmarks/web_load.py --headless -u 50 -r 10 -t 60s --host http://127.0.0.1:8010
"""

from __future__ import annotations

import os
import random

from locust import FastHttpUser, HttpUser, between, task

PROBLEMS = os.environ.get("WEB_BENCH_PROBLEMS", "vector_add,gemm_bf16,softmax,rmsnorm,swiglu").split(",")
GPUS = ("h100", "h200", "b200")
#: A person reads a page before opening the next: 0.5-1.5 s between two requests of one user.
THINK_SECONDS = (0.5, 1.5)


CLIENT = HttpUser if os.environ.get("WEB_BENCH_CLIENT") == "requests" else FastHttpUser


class Visitor(CLIENT):  # type: ignore[valid-type,misc]
    wait_time = between(*THINK_SECONDS)

    @task(3)
    def ranking(self) -> None:
        problem, gpu = random.choice(PROBLEMS), random.choice(GPUS)
        self.client.get(f"/problems/{problem}/?gpu={gpu}", name="/problems/[name]/?gpu=[key]")

    @task(1)
    def home(self) -> None:
        self.client.get("/", name="/")
