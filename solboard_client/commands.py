"""One function per client subcommand about problems and submissions. Each takes the parsed
arguments and an ``Output`` and returns an exit status (``EXIT_*``; ``helptext.EXIT_STATUSES``)."""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from evaluator.ptx.sourcetext import decode_source
from evaluator.vocabulary import RANKED, TEST, Mode, language_of_file
from solboard_client import config, render
from solboard_client.follow import Limits, follow, stopped_message
from solboard_client.output import Output
from solboard_client.transport import ApiFailure, Client, ServiceFailure
from solboard_common.limits import source_too_large

EXIT_OK, EXIT_KERNEL, EXIT_REFUSED, EXIT_SERVICE, EXIT_RETRY_LATER, EXIT_NOT_FINISHED = 0, 1, 2, 3, 4, 5
#: Refusals at submit/check time that are about the kernel itself, not the request.
KERNEL_CODES = {"syntax_error", "compile_error", "invalid_source", "invalid_launch_spec", "source_too_large"}
KERNEL_STATUSES = {"failed", "timeout", "rejected"}
SUBMIT_RETRIES = 3
#: submit/status/rerun --wait stop after this long when no runner serves what is left to run.
NO_RUNNER_TIMEOUT_S = 120.0
#: popcorn-cli's modes as the site runs them: benchmark times without ranking; profile is a ranked
#: run (its witness runs Nsight Compute) whose profile is printed at the end.
MODE_OF: dict[str, Mode] = {
    TEST: TEST,
    RANKED: RANKED,
    "benchmark": TEST,
    "leaderboard": RANKED,
    "profile": RANKED,
}


def client(args: argparse.Namespace) -> Client:
    login = config.current(getattr(args, "server", None))
    return Client(login.server, login.token)


def language_of(path: Path, given: str | None) -> str:
    if given:
        return given
    return language_of_file(path.name)


def verdict_exit(body: dict[str, Any]) -> int:
    """0 when every evaluation passed; 1 when a kernel failed; 3 when the service gave no verdict."""
    statuses = [(e["status"], e.get("evaluator_status")) for e in body["evaluations"]]
    if any(status in KERNEL_STATUSES or (status == "error" and verdict) for status, verdict in statuses):
        return EXIT_KERNEL
    if any(status in ("error", "cancelled") for status, _ in statuses):
        return EXIT_SERVICE
    return EXIT_OK


def problems(args: argparse.Namespace, out: Output) -> int:
    rows = client(args).get("/api/problems")
    out.result("problems", rows, lambda: render.table(
        ["name", "title", "languages", "shapes", "version"],
        [(p["name"], p["title"], ",".join(p["languages"]), p["shape_count"], p["version"]) for p in rows]))
    return EXIT_OK


def problem(args: argparse.Namespace, out: Output) -> int:
    body = client(args).get(f"/api/problems/{args.name}")
    out.result("problem", body, lambda: render.problem(body))
    return EXIT_OK


def read_source(path: Path) -> str:
    """The file as text; a binary or non-UTF-8 file is refused in the site's words (exit 1)."""
    try:
        return decode_source(path.read_bytes())
    except ValueError as error:
        raise ApiFailure(
            0, "invalid_source", f"{path}: {error}; upload the kernel's source text", "source"
        ) from None


def _submission_body(args: argparse.Namespace, path: Path, api: Client) -> dict[str, Any]:
    source = read_source(path)
    limit = api.get("/api/").get("max_source_bytes")
    size = len(source.encode("utf-8"))
    if isinstance(limit, int) and size > limit:  # the server's own limit and words, without sending it
        raise ApiFailure(413, "source_too_large", source_too_large(size, limit), "source")
    body: dict[str, Any] = {"problem": args.problem, "language": language_of(path, args.language),
                            "gpu_types": args.gpu, "source": source, "filename": path.name}
    if getattr(args, "spec", None):
        body["launch_spec"] = Path(args.spec).read_text()
    if getattr(args, "mode", None):
        body["mode"] = MODE_OF[args.mode]
    return body


def _post_with_retries(api: Client, path: str, body: Any, headers: dict[str, str]) -> Any:
    for attempt in range(1, SUBMIT_RETRIES + 1):
        try:
            return api.post(path, body, headers=headers)
        except ServiceFailure:
            if attempt == SUBMIT_RETRIES:
                raise
            time.sleep(2 ** attempt)
    raise AssertionError("unreachable")


def _summaries(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [render.evaluation_summary(e) for e in body["evaluations"]]


def _announce(body: dict[str, Any], out: Output, waiting: bool) -> None:
    """The submitted event; its warnings too unless waiting, whose reporter says each once."""
    out.event("submitted", submission_id=body["id"], evaluations=_summaries(body))
    for warning in [] if waiting else body.get("warnings", []):
        out.warning(
            warning["code"], warning["message"], gpu_type=warning["gpu_type"], submission_id=body["id"]
        )


def submit(args: argparse.Namespace, out: Output) -> int:
    api, path = client(args), Path(args.file)
    body = _submission_body(args, path, api)
    key = args.idempotency_key or str(uuid.uuid4())  # our own retries never submit twice
    created = _post_with_retries(api, "/api/submissions", body, {"Idempotency-Key": key})
    _announce(created, out, waiting=args.wait or args.mode == "profile")
    if args.wait or args.mode == "profile":
        return _wait_and_report(api, created, args, out, "submit")
    out.result("submit", created, lambda: print(f"submitted submission {created['id']}: " + "; ".join(
        render.evaluation_line(e) for e in created["evaluations"])))
    return EXIT_OK


def _wait_and_report(
    api: Client, body: dict[str, Any], args: argparse.Namespace, out: Output, command: str
) -> int:
    limits = Limits(args.no_runner_timeout, args.timeout)
    outcome = follow(api, body, out, limits)
    if outcome.stopped is not None:
        message = stopped_message(outcome, limits)
        out.event(
            "stopped",
            reason=outcome.stopped,
            submission_id=outcome.body["id"],
            exit_status=EXIT_NOT_FINISHED,
            message=message,
            evaluations=_summaries(outcome.body),
        )
        if out.mode == "json":
            render.as_json(outcome.body)
        print(f"solboard {command}: {message}", file=sys.stderr)
        return EXIT_NOT_FINISHED
    final, code = outcome.body, verdict_exit(outcome.body)
    if out.streaming:
        out.event("finished", submission_id=final["id"], exit_status=code, submission=final)
    elif out.mode == "json":
        render.as_json(final)
    else:
        render.submission_report(final)
        if getattr(args, "mode", None) == "profile":
            render.profiles(final)
    return code


def status(args: argparse.Namespace, out: Output) -> int:
    api = client(args)
    body = api.get(f"/api/submissions/{args.id}")
    if args.wait and body["status"] != "finished":
        return _wait_and_report(api, body, args, out, "status")
    shown = {key: value for key, value in body.items() if key != "source"}
    out.result("status", shown, lambda: render.status(body))
    return verdict_exit(body) if body["status"] == "finished" else EXIT_OK


def report(args: argparse.Namespace, out: Output) -> int:
    body = client(args).get(f"/api/submissions/{args.id}")
    out.result("report", body, lambda: render.submission_report(body))
    return verdict_exit(body) if body["status"] == "finished" else EXIT_OK


def cancel(args: argparse.Namespace, out: Output) -> int:
    body = client(args).post(f"/api/submissions/{args.id}/cancel", {})
    out.result("cancel", body, lambda: print(f"cancelled what was left of submission {body['id']}"))
    return EXIT_OK


def rerun(args: argparse.Namespace, out: Output) -> int:
    request: dict[str, Any] = {}
    if args.gpu:
        request["gpu_types"] = args.gpu
    if args.mode:
        request["mode"] = MODE_OF[args.mode]
    api = client(args)
    body = api.post(f"/api/submissions/{args.id}/rerun", request)
    _announce(body, out, waiting=args.wait or args.mode == "profile")
    if args.wait or args.mode == "profile":
        return _wait_and_report(api, body, args, out, "rerun")
    out.result("rerun", body, lambda: print(f"re-run queued for submission {body['id']}"))
    return EXIT_OK


def leaderboard(args: argparse.Namespace, out: Output) -> int:
    api = client(args)
    gpus = args.gpu or [g["key"] for g in api.get("/api/gpu-types")]
    query = f"?page={args.page}&page_size={args.limit}" + (f"&shape={args.shape}" if args.shape else "")
    query += "&track=features" if args.features else ""
    query += f"&version={args.problem_version}" if getattr(args, "problem_version", None) else ""
    boards = [api.get(f"/api/leaderboards/{args.problem}/{gpu}{query}") for gpu in gpus]
    out.result(
        "leaderboard",
        boards,
        lambda: render.boards(boards, references=bool(getattr(args, "references", False))),
    )
    return EXIT_OK


def check(args: argparse.Namespace, out: Output) -> int:
    path, api = Path(args.file), client(args)
    answer = api.post("/api/submissions/validate", _submission_body(args, path, api))
    for warning in answer.get("warnings", []):
        out.warning(warning["code"], warning["message"], gpu_type=warning["gpu_type"])
    out.result("check", answer, lambda: render.checked(path.name, args.problem, args.gpu, answer))
    return EXIT_OK
