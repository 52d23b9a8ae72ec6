"""API load on this machine: submission creation throughput, leaderboard GET p95 under concurrent
clients, and the same GET p95 while 200 clients long-poll (they must not each hold a worker).

Serves the ASGI app with uvicorn (``--workers``) on PostgreSQL and Redis, both on 127.0.0.1, in a
database and a Redis index of its own that it creates and empties. No runner: submissions stay
queued, which is what the long-polls wait on. Every loop is bounded in count and time; all
traffic goes to the loopback.

    .venv/bin/python benchmarks/api_load.py --out api_load.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: _bench beside it

from _bench import percentile, provenance

REPO = Path(__file__).resolve().parent.parent
SOURCE = (REPO / "examples/python/vector_add.py").read_text()
PG_ADMIN = "postgres://postgres@127.0.0.1:5432/postgres"


def summary_ms(latencies: list[float]) -> dict[str, float]:
    return {"p50_ms": round(1000 * statistics.median(latencies), 1),
            "p95_ms": round(1000 * percentile(latencies, 0.95), 1),
            "max_ms": round(1000 * max(latencies), 1), "n": len(latencies)}


def call(base: str, path: str, token: str, body: Any = None, timeout: float = 90) -> tuple[int, float, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method="POST" if data else "GET", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            payload = json.loads(answer.read())
            return answer.status, time.perf_counter() - started, payload
    except urllib.error.HTTPError as error:
        return error.code, time.perf_counter() - started, json.loads(error.read() or b"null")


def environment(database: str, redis_url: str) -> dict[str, str]:
    env = dict(os.environ, DATABASE_URL=database, CELERY_BROKER_URL=redis_url, CELERY_RESULT_BACKEND="",
               DEBUG="false", SECRET_KEY="bench-only-" + "x" * 40, ALLOWED_HOSTS="127.0.0.1",
               SECURE_SSL_REDIRECT="false", SOLBOARD_QUOTA_MAX_QUEUED="100000",
               SOLBOARD_QUOTA_DAILY_PER_PROBLEM="100000", LOG_LEVEL="WARNING", PYTHONPATH=str(REPO))
    env.pop("CELERY_RESULT_BACKEND")
    return env


def manage(env: dict[str, str], *args: str) -> str:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=env, check=True,
                          capture_output=True, text=True).stdout


def fresh_database(name: str) -> str:
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    return f"postgres://postgres@127.0.0.1:5432/{name}"


SEED = """
import sys
from django.contrib.auth import get_user_model
from django.utils import timezone
from leaderboard.models import ApiToken, Evaluation, GpuType, Problem, RankingEntry, Submission
users, rows = int(sys.argv[1]), int(sys.argv[2])
problem, gpu = Problem.objects.get(name="vector_add"), GpuType.objects.get(key="cpu")
tokens = []
for i in range(users):
    user = get_user_model().objects.create_user(f"bench{i}")
    tokens.append(ApiToken.issue(user, agent=None)[1])
for i in range(rows):
    user = get_user_model().objects.create_user(f"ranked{i}")
    sub = Submission.objects.create(user=user, problem=problem, problem_version=problem.version,
                                    language="python", source="# seeded row\\n")
    ev = Evaluation.objects.create(submission=sub, gpu_type=gpu, mode="ranked", status="passed",
                                   score=0.3 + i / (rows * 10), rank_eligible=True)
    RankingEntry.objects.create(problem=problem, problem_version=sub.problem_version, gpu_type=gpu, user=user,
                                submission=sub, evaluation=ev, score=ev.score, submitted_at=sub.created_at,
                                track="all")
print("\\n".join(tokens))
"""


def seed(env: dict[str, str], users: int, rows: int) -> list[str]:
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", SEED.replace("sys.argv[1]", str(users))
                          .replace("sys.argv[2]", str(rows))], cwd=REPO, env=env, check=True,
                         capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line.startswith("sol_")]


def start_server(env: dict[str, str], workers: int) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "uvicorn", "leaderboard.asgi:application", "--host",
                               "127.0.0.1", "--port", str(port), "--workers", str(workers), "--no-access-log",
                               "--log-level", "warning"], cwd=REPO, env=env)
    base = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            urllib.request.urlopen(base + "/api/", timeout=2).read()
            return server, base
        except OSError:
            time.sleep(0.5)
    server.terminate()
    raise SystemExit("uvicorn did not start")


def creation(base: str, tokens: list[str], per_client: int) -> dict[str, Any]:
    body = {
        "problem": "vector_add",
        "language": "python",
        "gpu_types": ["cpu"],
        "source": SOURCE,
        "mode": "test",
    }

    def client(token: str) -> list[tuple[int, float]]:
        return [call(base, "/api/submissions", token, body)[:2] for _ in range(per_client)]

    started = time.perf_counter()
    with ThreadPoolExecutor(len(tokens)) as pool:
        results = [item for batch in pool.map(client, tokens) for item in batch]
    elapsed = time.perf_counter() - started
    created = sum(1 for status, _ in results if status == 201)
    return {"clients": len(tokens), "requests": len(results), "created": created,
            "errors": len(results) - created, "seconds": round(elapsed, 2),
            "per_second": round(created / elapsed, 1), **summary_ms([latency for _, latency in results])}


def leaderboard_reads(base: str, token: str, clients: int, per_client: int) -> dict[str, Any]:
    def client(_: int) -> list[tuple[int, float]]:
        return [
            call(base, "/api/leaderboards/vector_add/cpu?page_size=50", token)[:2] for _ in range(per_client)
        ]

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        results = [item for batch in pool.map(client, range(clients)) for item in batch]
    elapsed = time.perf_counter() - started
    ok = sum(1 for status, _ in results if status == 200)
    return {"clients": clients, "requests": len(results), "ok": ok, "per_second": round(ok / elapsed, 1),
            **summary_ms([latency for _, latency in results])}


def with_waiters(base: str, tokens: list[str], submission_ids: list[int], waiters: int,
                 wait_s: int, reads: dict[str, int]) -> dict[str, Any]:
    """Open ``waiters`` long-polls, then measure leaderboard reads while they all wait."""
    def wait(index: int) -> tuple[int, float, Any]:
        token = tokens[index % len(tokens)]
        return call(
            base,
            f"/api/submissions/{submission_ids[index % len(submission_ids)]}?wait={wait_s}",
            token,
            timeout=wait_s + 30,
        )

    with ThreadPoolExecutor(waiters) as pool:
        futures = [pool.submit(wait, index) for index in range(waiters)]
        time.sleep(3)  # every long-poll is in
        pending_before = sum(1 for future in futures if not future.done())
        measured = leaderboard_reads(base, tokens[0], reads["clients"], reads["per_client"])
        pending_after = sum(1 for future in futures if not future.done())
        outcomes = [future.result() for future in futures]
    seconds = sorted(round(elapsed, 1) for _, elapsed, _ in outcomes)
    return {"waiters": waiters, "wait_seconds": wait_s, "still_waiting_when_reads_began": pending_before,
            "still_waiting_when_reads_ended": pending_after,
            "waiters_answered_200": sum(1 for status, _, _ in outcomes if status == 200),
            "waiter_seconds_min_median_max": [seconds[0], seconds[len(seconds) // 2], seconds[-1]],
            "waiter_statuses": sorted({str(body.get("status")) if isinstance(body, dict) else "?"
                                       for _, _, body in outcomes}),
            "leaderboard_during_wait": measured}


def owned_submissions(base: str, tokens: list[str]) -> list[int]:
    ids: list[int] = []
    for token in tokens:
        page = call(base, "/api/submissions?page_size=1", token)[2]
        ids.extend(row["id"] for row in page["results"])
    return ids


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--per-client", type=int, default=25)
    parser.add_argument("--ranked-rows", type=int, default=1000)
    parser.add_argument("--waiters", type=int, default=200)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/14")
    args = parser.parse_args()
    database = fresh_database("solboard_api_bench")
    env = environment(database, args.redis)
    import redis

    redis.Redis.from_url(args.redis).flushdb()  # this benchmark's own index
    manage(env, "migrate", "--noinput")
    manage(env, "sync_gpu_types")
    manage(env, "sync_problems")
    tokens = seed(env, args.clients, args.ranked_rows)
    server, base = start_server(env, args.workers)
    try:
        reads = {"clients": args.clients, "per_client": 25}
        result = {
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "uvicorn_workers": args.workers,
                "database": "PostgreSQL 127.0.0.1",
                "broker": "Redis 127.0.0.1",
            },
            "commit": provenance("cpu")["commit"],
            "ranked_rows": args.ranked_rows,
            "create_submissions": creation(base, tokens, args.per_client),
            "leaderboard_get": leaderboard_reads(base, tokens[0], **reads),
        }
        ids = owned_submissions(base, tokens)
        result["leaderboard_get_with_waiters"] = with_waiters(base, tokens, ids, args.waiters, 30, reads)
    finally:
        server.terminate()
        server.wait(timeout=30)
        redis.Redis.from_url(args.redis).flushdb()
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
