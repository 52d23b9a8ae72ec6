"""API smoke test of a running production profile (`.ci/run prod`): standard library only.

    python .ci/prod_smoke.py --base http://127.0.0.1:8000 --token sol_... --metrics-token M --log server.log

Every request says it came through the TLS proxy (``X-Forwarded-Proto: https``), as the site's
HTTPS redirect expects. Checks, in order: health on PostgreSQL and Redis; Swagger UI and its assets
from the site; /metrics closed without the token and complete with it; a submission created, run
by the CPU runner to ``passed`` (long-poll), its event stream; a private submission's details
hidden from a visitor; ten wrong passwords locking HTTP Basic out with a 429 and Retry-After; the
site's log lines are JSON. Exits non-zero with the first failure.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROXY = {"X-Forwarded-Proto": "https"}


class Failed(AssertionError):
    pass


def check(condition: bool, what: str) -> None:
    if not condition:
        raise Failed(what)
    print(f"[prod-smoke] ok: {what}", flush=True)


def call(base: str, path: str, *, token: str | None = None, body: Any = None,
         headers: dict[str, str] | None = None, timeout: float = 90) -> tuple[int, dict[str, str], bytes]:
    data = json.dumps(body).encode() if body is not None else None
    merged = {**PROXY, **({"Authorization": f"Bearer {token}"} if token else {}), **(headers or {})}
    if data is not None:
        merged["Content-Type"] = "application/json"
    request = urllib.request.Request(base + path, data=data, headers=merged, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def health_and_docs(base: str) -> None:
    status, _, raw = call(base, "/healthz")
    body = json.loads(raw)
    check(status == 200 and body["database"].get("vendor") == "postgresql", f"healthz on PostgreSQL: {body}")
    check("redis" in body["broker"].get("transport", "").lower(), f"broker is Redis: {body['broker']}")
    status, _, page = call(base, "/api/docs/")
    assets = re.findall(r'(?:src|href)="(/static/[^"]+)"', page.decode())
    bundle = re.compile(r"swagger-ui-bundle(\.[0-9a-f]+)?\.js$")  # hashed by the manifest storage
    check(status == 200 and any(bundle.search(asset) for asset in assets), f"Swagger UI page: {assets}")
    check(
        all(call(base, asset)[0] == 200 for asset in assets),
        f"{len(assets)} Swagger UI assets served by the site",
    )


def metrics(base: str, metrics_token: str) -> None:
    check(call(base, "/metrics")[0] == 404, "/metrics hidden without its token")
    status, _, raw = call(base, "/metrics", headers={"Authorization": f"Bearer {metrics_token}"})
    text = raw.decode()
    names = ("solboard_queue_depth", "solboard_evaluations", "solboard_witness_rejections",
             "solboard_runner_heartbeat_age_seconds", "solboard_http_request_duration_seconds_bucket")
    check(status == 200 and all(name in text for name in names), "/metrics with the token: every family")


def submission_runs(base: str, token: str) -> int:
    source = (REPO / "examples/python/vector_add.py").read_text()
    body = {
        "problem": "vector_add",
        "language": "python",
        "gpu_types": ["cpu"],
        "source": source,
        "mode": "test",
    }
    status, _, raw = call(base, "/api/submissions", token=token, body=body)
    check(status == 201, f"create: {status} {raw[:300]!r}")
    submission = json.loads(raw)
    deadline = time.monotonic() + 240
    while submission["status"] != "finished" and time.monotonic() < deadline:
        _, _, raw = call(base, f"/api/submissions/{submission['id']}?wait=30&since={submission['state']}",
                         token=token)
        submission = json.loads(raw)
    statuses = [evaluation["status"] for evaluation in submission["evaluations"]]
    check(statuses == ["passed"], f"the CPU runner ran it through Redis: {statuses}")
    _, headers, raw = call(base, f"/api/submissions/{submission['id']}/events", token=token)
    check(
        headers.get("Content-Type", "").startswith("text/event-stream") and b"event: end" in raw,
        "event stream",
    )
    return int(submission["id"])


def private_details_hidden(base: str, token: str) -> None:
    body = {"problem": "vector_add", "language": "python", "gpu_types": ["cpu"], "mode": "test",
            "source": 'raise RuntimeError("PROD_SMOKE_SECRET")\n\n\ndef kernel(a, b, out):\n    pass\n'}
    status, _, raw = call(base, "/api/submissions", token=token, body=body)
    check(status == 201, f"a failing test run is accepted: {status} {raw[:300]!r}")
    submission_id = json.loads(raw)["id"]
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        _, _, raw = call(base, f"/api/submissions/{submission_id}?wait=30", token=token)
        if json.loads(raw)["status"] == "finished":
            break
    check(b"PROD_SMOKE_SECRET" in raw, "the owner reads the traceback")
    _, _, public = call(base, f"/api/submissions/{submission_id}")
    check(
        b"PROD_SMOKE_SECRET" not in public and b"import_error" in public,
        "a visitor reads the error kind only",
    )


def login_throttled(base: str) -> None:
    answers = []
    for attempt in range(11):
        pair = base64.b64encode(f"ci-nobody:wrong-{attempt}".encode()).decode()
        status, headers, _ = call(
            base, "/api/tokens", body={"name": "x"}, headers={"Authorization": f"Basic {pair}"}
        )
        answers.append((status, headers.get("Retry-After")))
    check(answers[0][0] == 401 and answers[-1][0] == 429 and bool(answers[-1][1]),
          f"password guessing locked: {answers}")


def json_logs(log: Path) -> None:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.startswith("{")]
    parsed = [json.loads(line) for line in lines]
    check(any(record.get("name", "").startswith(("django", "leaderboard", "axes")) for record in parsed),
          f"the site logs JSON ({len(parsed)} lines)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--metrics-token", required=True)
    parser.add_argument("--log", type=Path, required=True, help="the web server's log file")
    args = parser.parse_args()
    try:
        health_and_docs(args.base)
        submission_runs(args.base, args.token)
        private_details_hidden(args.base, args.token)
        metrics(args.base, args.metrics_token)
        login_throttled(args.base)
        json_logs(args.log)
    except Failed as failure:
        print(f"[prod-smoke] FAILED: {failure}", file=sys.stderr)
        return 1
    print("[prod-smoke] all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
