"""The bar of issue 34: preprocessor bombs sent to ``validate`` and ``batch`` leave other users'
creates and the runner's heartbeats answering in their normal time, on the real local stack
(`solboard dev`: uvicorn, site worker, CPU runner), on SQLite and on PostgreSQL.

Before, the compile ran inside the create's transaction: on SQLite the whole database stayed
locked while nvcc worked (103 s for one bomb sent to validate), other users' creates got 503 after
30 s and heartbeats failed with "database is locked". Now the compile runs before any transaction,
a macro bomb is refused before nvcc runs, and what the estimate cannot see (a function-like macro
that doubles at each call) is stopped at SOLBOARD_COMPILE_SECONDS, a few at a time.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from evaluator.ptx.toolchain import find_tool
from tests.integration.dev_stack import DevStack, start_dev, stop, wait_until_healthy

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900),
              pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")]

REPO = Path(__file__).resolve().parents[2]
VECTOR_ADD = (REPO / "examples/python/vector_add.py").read_text()
SPEC = "".join(line + "\n" for line in (REPO / "examples/cuda/vector_add.cu").read_text().splitlines()
               if line.startswith("// ") and ("=" in line or "solboard-launch" in line))
KERNEL = (
    'extern "C" __global__ void vector_add(const float* a, const float* b, float* c, unsigned long long n) '
)
#: The six-line bomb of the issue: 10^8 tokens (refused before nvcc runs).
NESTED = SPEC + "".join(f"#define {name} {' '.join([inner] * 10)}\n" for name, inner in
                        zip("ABCDEFGH", "xABCDEFG", strict=True)) + KERNEL + "{ H; }\n"
#: One the estimate cannot see: 2^30 tokens through a function-like macro (stopped at the time limit).
DOUBLING = SPEC + "#define D(x) x x\n" + KERNEL + "{ " + "D(" * 30 + "1" + ")" * 30 + "; }\n"
COMPILE_SECONDS = 20
ATTACK_SECONDS = 30
HEARTBEAT_SECONDS = 2
#: A create answers in well under a second on an idle stack; the bar leaves room for a busy CPU.
CREATE_MAX_S = 5.0
#: Heartbeats every 2 s: one that stops for longer than this is being held up.
HEARTBEAT_GAP_MAX_S = 10.0
PG_ADMIN = "postgres://postgres@127.0.0.1:5432/postgres"


def body(language: str, source: str, gpu: str = "h100") -> dict[str, Any]:
    return {
        "problem": "vector_add",
        "language": language,
        "gpu_types": [gpu],
        "source": source,
        "mode": "test",
    }


def heartbeat_age(stack: DevStack, database_url: str | None) -> float | None:
    if database_url:
        import psycopg

        with psycopg.connect(database_url, connect_timeout=5) as db:
            row = db.execute("SELECT max(last_heartbeat) FROM leaderboard_runnernode").fetchone()
        newest = row[0] if row else None
    else:
        value = stack.query("SELECT max(last_heartbeat) FROM leaderboard_runnernode")[0][0]
        newest = datetime.fromisoformat(str(value)).replace(tzinfo=UTC) if value else None
    return None if newest is None else (datetime.now(UTC) - newest).total_seconds()


class Attack:
    """Bombs sent at once: two users' validates (both kinds) and a batch of 16 doubling bombs."""

    def __init__(self, stack: DevStack, tokens: dict[str, str]) -> None:
        self.stack, self.tokens = stack, tokens
        self.answers: list[tuple[str, int, float, Any]] = []
        self.threads = [threading.Thread(target=self._validate, args=("mallory", NESTED), daemon=True),
                        threading.Thread(target=self._validate, args=("mallory", DOUBLING), daemon=True),
                        threading.Thread(target=self._validate, args=("trudy", DOUBLING), daemon=True),
                        threading.Thread(target=self._batch, daemon=True)]

    def summary(self) -> str:
        """Per (request, user's source, status, code): how many, and the slowest answer."""
        rows: dict[str, list[float]] = {}
        for kind, status, seconds, code in self.answers:
            rows.setdefault(f"{kind} {status} {code}", []).append(seconds)
        return "; ".join(
            f"{key}: {len(times)}x, max {max(times):.1f}s" for key, times in sorted(rows.items())
        )

    def _validate(self, user: str, source: str) -> None:
        deadline = time.monotonic() + ATTACK_SECONDS
        while time.monotonic() < deadline and self.stack.alive():
            try:
                status, seconds, answer = self.stack.call(
                    "POST", "/api/submissions/validate", self.tokens[user], body("cuda", source)
                )
            except OSError as error:
                self.answers.append(("validate", 0, 0.0, str(error)))
                return
            self.answers.append(
                (
                    f"validate/{user}/{'nested' if source is NESTED else 'doubling'}",
                    status,
                    seconds,
                    answer.get("error", {}).get("code"),
                )
            )
            if status in (429, 503):
                time.sleep(1)

    def _batch(self) -> None:
        try:
            status, seconds, answer = self.stack.call("POST", "/api/submissions/batch", self.tokens["trudy"],
                                                      {"submissions": [body("cuda", DOUBLING)] * 16})
        except OSError as error:
            self.answers.append(("batch", 0, 0.0, str(error)))
            return
        codes = sorted({str(item.get("error", {}).get("code")) for item in answer.get("results", [])})
        self.answers.append(("batch", status, seconds, ",".join(codes)))

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=ATTACK_SECONDS + COMPILE_SECONDS * 3)


def run_the_bar(stack: DevStack, database_url: str | None) -> None:
    wait_until_healthy(stack)
    tokens = {user: stack.token_for(user) for user in ("mallory", "trudy", "alice")}
    _wait_for_heartbeats(stack, database_url)
    attack = Attack(stack, tokens)
    attack.start()
    time.sleep(2)  # the bombs are compiling
    creates, gaps = [], []
    deadline = time.monotonic() + ATTACK_SECONDS
    while time.monotonic() < deadline:
        status, seconds, answer = stack.call(
            "POST", "/api/submissions", tokens["alice"], body("python", VECTOR_ADD, "cpu")
        )
        assert status == 201, (status, answer)
        creates.append(seconds)
        gaps.append(heartbeat_age(stack, database_url) or 0.0)
        time.sleep(0.5)
    attack.join()
    summary = (f"creates: n={len(creates)} median={statistics.median(creates):.2f}s max={max(creates):.2f}s; "
               f"heartbeat age max={max(gaps):.1f}s; attack: {attack.summary()}")
    print(summary)
    assert max(creates) < CREATE_MAX_S, summary
    assert max(gaps) < HEARTBEAT_GAP_MAX_S, summary
    refused = [(status in (400, 429, 503)) or (kind == "batch" and status == 200 and "None" not in str(codes))
               for kind, status, _, codes in attack.answers]  # a batch answers 200 with each item refused
    assert refused and all(refused), summary
    assert any(answer[3] == "compile_error" for answer in attack.answers), summary  # refused, never accepted


def _wait_for_heartbeats(stack: DevStack, database_url: str | None, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        age = heartbeat_age(stack, database_url)
        if age is not None and age < HEARTBEAT_SECONDS * 2:
            return
        time.sleep(1)
    raise AssertionError(f"no runner heartbeat within {timeout:.0f}s:\n{stack.log_tail()}")


STACK_ENV = {
    "SOLBOARD_COMPILE_SECONDS": str(COMPILE_SECONDS),
    "SOLBOARD_HEARTBEAT_SECONDS": str(HEARTBEAT_SECONDS),
    "SOLBOARD_SWEEP_SECONDS": "60",
    "SOLBOARD_QUOTA_MAX_QUEUED": "1000",
}


def test_bombs_leave_creates_and_heartbeats_answering_on_sqlite(tmp_path: Path) -> None:
    stack = start_dev(tmp_path / "var", env=STACK_ENV)
    try:
        run_the_bar(stack, None)
    finally:
        stop(stack)


@pytest.fixture
def postgres_database() -> Iterator[str]:
    psycopg = pytest.importorskip("psycopg")
    name = "solboard_site_compile_load"
    try:
        admin = psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as error:
        pytest.skip(f"PostgreSQL does not answer at {PG_ADMIN}: {error}")
    with admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {name}")
    yield f"postgres://postgres@127.0.0.1:5432/{name}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_bombs_leave_creates_and_heartbeats_answering_on_postgresql(
    tmp_path: Path, postgres_database: str
) -> None:
    stack = start_dev(tmp_path / "var", env={**STACK_ENV, "DATABASE_URL": postgres_database})
    try:
        run_the_bar(stack, postgres_database)
    finally:
        stop(stack)
