"""One function per client subcommand. Each returns an exit status (``main.EXIT_*``)."""

from __future__ import annotations

import argparse
import getpass
import os
import socket
import time
import uuid
from pathlib import Path
from typing import Any

from solboard_client import config, render
from solboard_client.transport import ApiFailure, Client, ServiceFailure

EXIT_OK, EXIT_KERNEL, EXIT_REFUSED, EXIT_SERVICE, EXIT_RETRY_LATER = 0, 1, 2, 3, 4
#: Refusals at submit/check time that are about the kernel itself, not the request.
KERNEL_CODES = {"syntax_error", "compile_error", "invalid_source", "invalid_launch_spec", "source_too_large"}
KERNEL_STATUSES = {"failed", "timeout", "rejected"}
EXTENSIONS = {".py": "python", ".ptx": "ptx", ".cu": "cuda", ".cuh": "cuda"}
SUBMIT_RETRIES = 3


def client(args: argparse.Namespace) -> Client:
    login = config.current(getattr(args, "server", None))
    return Client(login.server, login.token)


def language_of(path: Path, given: str | None) -> str:
    if given:
        return given
    return EXTENSIONS.get(path.suffix.lower(), "python")


def verdict_exit(body: dict[str, Any]) -> int:
    """0 when every evaluation passed; 1 when a kernel failed; 3 when the service gave no verdict."""
    statuses = [(e["status"], e.get("evaluator_status")) for e in body["evaluations"]]
    if any(status in KERNEL_STATUSES or (status == "error" and verdict) for status, verdict in statuses):
        return EXIT_KERNEL
    if any(status in ("error", "cancelled") for status, _ in statuses):
        return EXIT_SERVICE
    return EXIT_OK


def login(args: argparse.Namespace) -> int:
    server = (args.server or config.current().server).rstrip("/")
    api = Client(server, args.token)
    if args.token:
        me = api.get("/api/")
        if not me.get("user"):
            raise ApiFailure(401, "invalid_token", "the server does not accept this token")
        token = args.token
    else:
        username = args.username or input("username: ")
        password = os.environ.get("SOLBOARD_PASSWORD") or getpass.getpass("password: ")
        name = f"solboard-cli@{socket.gethostname()}"[:100]
        created = api.post("/api/tokens", {"name": name}, basic=(username, password))
        token = created["token"]
    path = config.save(server, token)
    print(f"logged in to {server}; token stored in {path} (mode 0600)")
    return EXIT_OK


def problems(args: argparse.Namespace) -> int:
    rows = client(args).get("/api/problems")
    if args.json:
        render.as_json(rows)
        return EXIT_OK
    render.table(["name", "title", "languages", "shapes", "version"],
                 [(p["name"], p["title"], ",".join(p["languages"]), p["shape_count"], p["version"]) for p in rows])
    return EXIT_OK


def problem(args: argparse.Namespace) -> int:
    body = client(args).get(f"/api/problems/{args.name}")
    if args.json:
        render.as_json(body)
        return EXIT_OK
    print(f"{body['name']}: {body['title']} (version {body['version']}, languages {', '.join(body['languages'])})")
    print(f"baseline: {body['baseline']}\n")
    gpus = sorted({key for shape in body["shapes"] for key, sol in shape["t_sol"].items() if sol})
    rows = [(s["shape_id"], "yes" if s["ranked"] else "no",
             *(f"{s['t_sol'][g]['t_sol_us']:.4g} ({s['t_sol'][g]['bound']})" if s["t_sol"].get(g) else None
               for g in gpus)) for s in body["shapes"]]
    render.table(["shape", "ranked", *(f"t_sol_us {g}" for g in gpus)], rows)
    return EXIT_OK


def _submission_body(args: argparse.Namespace, path: Path) -> dict[str, Any]:
    body: dict[str, Any] = {"problem": args.problem, "language": language_of(path, args.language),
                            "gpu_types": args.gpu, "source": path.read_text(), "filename": path.name}
    if getattr(args, "spec", None):
        body["launch_spec"] = Path(args.spec).read_text()
    if getattr(args, "mode", None):
        body["mode"] = args.mode
    return body


def submit(args: argparse.Namespace) -> int:
    api, path = client(args), Path(args.file)
    body = _submission_body(args, path)
    key = args.idempotency_key or str(uuid.uuid4())  # our own retries never submit twice
    created = _post_with_retries(api, "/api/submissions", body, {"Idempotency-Key": key})
    if not args.wait:
        render.as_json(created) if args.json else print(f"submitted {created['id']}: "
                                                         f"{render.evaluation_line(created['evaluations'][0])}")
        return EXIT_OK
    final = wait_for(api, created, quiet=args.json)
    render.as_json(final) if args.json else render.submission_report(final)
    return verdict_exit(final)


def _post_with_retries(api: Client, path: str, body: Any, headers: dict[str, str]) -> Any:
    for attempt in range(1, SUBMIT_RETRIES + 1):
        try:
            return api.post(path, body, headers=headers)
        except ServiceFailure:
            if attempt == SUBMIT_RETRIES:
                raise
            time.sleep(2 ** attempt)
    raise AssertionError("unreachable")


def wait_for(api: Client, body: dict[str, Any], quiet: bool = False) -> dict[str, Any]:
    """Long-poll until every evaluation ended, each request as long as the server allows."""
    limit = int(api.get("/api/").get("max_wait_seconds", 60))
    progress, started = render.Progress(), time.monotonic()
    while body["status"] != "finished":
        if not quiet:
            lines = "; ".join(render.evaluation_line(e) for e in body["evaluations"])
            progress.show(f"[{time.monotonic() - started:5.0f}s] {lines}")
        path = f"/api/submissions/{body['id']}?wait={limit}&since={body['state']}"
        body = api.get(path, timeout=limit + 30)
    progress.done()
    return body


def status(args: argparse.Namespace) -> int:
    body = client(args).get(f"/api/submissions/{args.id}")
    if args.json:
        render.as_json({key: value for key, value in body.items() if key != "source"})
    else:
        print(f"submission {body['id']}: {body['status']}")
        for evaluation in body["evaluations"]:
            print("  " + render.evaluation_line(evaluation))
    return verdict_exit(body) if body["status"] == "finished" else EXIT_OK


def report(args: argparse.Namespace) -> int:
    body = client(args).get(f"/api/submissions/{args.id}")
    render.as_json(body) if args.json else render.submission_report(body)
    return verdict_exit(body) if body["status"] == "finished" else EXIT_OK


def cancel(args: argparse.Namespace) -> int:
    body = client(args).post(f"/api/submissions/{args.id}/cancel", {})
    render.as_json(body) if args.json else print(f"cancelled what was left of submission {body['id']}")
    return EXIT_OK


def rerun(args: argparse.Namespace) -> int:
    request: dict[str, Any] = {}
    if args.gpu:
        request["gpu_types"] = args.gpu
    if args.mode:
        request["mode"] = args.mode
    api = client(args)
    body = api.post(f"/api/submissions/{args.id}/rerun", request)
    if args.wait:
        body = wait_for(api, body, quiet=args.json)
        render.as_json(body) if args.json else render.submission_report(body)
        return verdict_exit(body)
    render.as_json(body) if args.json else print(f"re-run queued for submission {body['id']}")
    return EXIT_OK


def leaderboard(args: argparse.Namespace) -> int:
    api = client(args)
    gpus = args.gpu or [g["key"] for g in api.get("/api/gpu-types")]
    query = f"?page={args.page}&page_size={args.limit}" + (f"&shape={args.shape}" if args.shape else "")
    query += "&track=features" if args.features else ""
    query += f"&version={args.problem_version}" if getattr(args, "problem_version", None) else ""
    boards = [api.get(f"/api/leaderboards/{args.problem}/{gpu}{query}") for gpu in gpus]
    if args.json:
        render.as_json(boards)
        return EXIT_OK
    for board in boards:
        title = f"{board['problem']} v{board['version']} on {board['gpu_type']}" + (
            f", shape {board['shape']}" if board["shape"] else "")
        print(f"{title} ({board['count']} ranked, track {board['track']})")
        render.table(["rank", "user", "agent", "submission", "score", "median_us", "language"],
                     [(r["rank"], r["user"], (r["agent"] or {}).get("name"), r["submission_id"], r["score"],
                       r["median_us"], r["language"]) for r in board["results"]])
        print()
    return EXIT_OK


def check(args: argparse.Namespace) -> int:
    path = Path(args.file)
    body = _submission_body(args, path)
    answer = client(args).post("/api/submissions/validate", body)
    if args.json:
        render.as_json(answer)
    else:
        print(f"{path.name}: accepted for {args.problem} on {', '.join(args.gpu)} ({answer['language']})")
        if answer.get("quota"):
            print(f"note: a submission now would be refused: {answer['quota']}")
    return EXIT_OK
