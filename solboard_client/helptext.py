"""What ``solboard COMMAND --help`` says: a description and examples per subcommand, the exit
statuses and where the login comes from (every subcommand's help ends with them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Help:
    summary: str  # one line, in `solboard --help`
    description: str
    examples: tuple[str, ...] = ()


EXIT_STATUSES = """exit statuses:
  0  success: every evaluation passed, or the command did what it says
  1  your kernel failed: refused at upload (syntax, no kernel, compile, launch spec, size, not
     UTF-8 text) or an evaluation failed, timed out or was rejected
  2  the request was refused: usage, login, authentication, not found, conflict
  3  the service failed: unreachable, 5xx, or an evaluation ended without a verdict
  4  a quota is spent: retry after the time printed
  5  stopped waiting, the submission still queued on the server: no runner served its GPU
     type for --no-runner-timeout seconds, or --timeout passed (solboard status ID --wait resumes)"""

LOGIN_SOURCES = """server and token: --server, else SOLBOARD_SERVER, else the stored login (solboard login),
else http://127.0.0.1:8000; the token: SOLBOARD_TOKEN, else the stored login.
output: text for people (default); --json: one JSON document at the end; --jsonl: one JSON
object per line as things happen (events: submitted, status, warning, finished, stopped, error)."""

MODES_TEXT = """modes (default test, as the website and the API): test = correctness and timing, never ranked;
ranked = secret seed, witnessed timing, enters the rankings. popcorn-cli's names are accepted:
benchmark = test (timing without ranking); leaderboard = ranked; profile = ranked, waits, then
prints each shape's Nsight Compute profile (GPU runners with ncu; the CPU device has none)."""

COMMAND_HELP: dict[str, Help] = {
    "login": Help(
        "store a token for a server (file mode 0600)",
        "Create an API token with your username and password (asked on a terminal; without one: "
        "--username and the password on stdin with --password-stdin, or in SOLBOARD_PASSWORD), or "
        "store an existing --token. Written to ~/.config/solboard/credentials.json "
        "(SOLBOARD_CREDENTIALS moves it).",
        (
            "solboard login --server https://solboard.example.org",
            'echo "$PASSWORD" | solboard login --username alice --password-stdin',
            "solboard login --token sol_...",
        ),
    ),
    "whoami": Help(
        "who the server says you are",
        "The user the server knows your token as, the server, and where the token came from.",
        ("solboard whoami", "SOLBOARD_TOKEN=sol_... solboard whoami --json"),
    ),
    "problems": Help(
        "list the problems",
        "Every active problem: name, title, languages, shapes, version.",
        ("solboard problems", "solboard problems --json"),
    ),
    "problem": Help(
        "one problem: shapes, t_SOL",
        "A problem's shapes and its speed of light per GPU type.",
        ("solboard problem gemm_bf16",),
    ),
    "submit": Help(
        "submit a kernel [--wait]",
        "Upload a kernel (.py, .ptx, .cu) for one or more GPU types. Without --wait it prints the "
        "submission id and returns; with --wait it follows the evaluations to the end (long-poll) "
        "and prints the per-shape table. A GPU type no runner serves is said at once; --wait then "
        "stops after --no-runner-timeout seconds (exit 5).",
        (
            "solboard submit kernel.py --problem vector_add --gpu cpu --wait",
            "solboard submit kernel.ptx --problem gemm_bf16 --gpu h100 --spec launch.toml --mode ranked",
            "solboard submit kernel.py --problem vector_add --gpu h200 --mode profile",
            "solboard submit kernel.py --problem vector_add --gpu cpu --wait --jsonl   # for agents",
        ),
    ),
    "status": Help(
        "a submission's status [--wait]",
        "Each evaluation of a submission: status, queue position (1 = next), score. --wait follows "
        "it to the end like submit --wait.",
        ("solboard status 42", "solboard status 42 --wait --jsonl"),
    ),
    "report": Help(
        "a submission's full report",
        "Per evaluation: the message, the per-shape table, why it is not ranked.",
        ("solboard report 42", "solboard report 42 --json"),
    ),
    "cancel": Help(
        "cancel what is still queued or running",
        "Cancel every queued or running evaluation of your submission (a queued one gives its quota back).",
        ("solboard cancel 42",),
    ),
    "rerun": Help(
        "re-run your submission",
        "New evaluations (the next run number) of your submission once every evaluation ended; on "
        "GPU types it ran on before.",
        ("solboard rerun 42 --wait", "solboard rerun 42 --gpu cpu --mode ranked"),
    ),
    "submissions": Help(
        "your submissions, newest first",
        "Your submissions with each evaluation's status and score.",
        ("solboard submissions", "solboard submissions --problem vector_add --limit 5 --json"),
    ),
    "quota": Help(
        "your quotas: used, left, when they reset",
        "Evaluations queued at once, and per problem and GPU type per UTC day.",
        ("solboard quota",),
    ),
    "leaderboard": Help(
        "rankings of a problem",
        "The ranking of a problem per GPU type: overall by score, or one shape's by time; "
        "--references adds the reference lines (eager baseline, torch.compile, library kernels) "
        "with their scores, never ranked.",
        (
            "solboard leaderboard vector_add --gpu cpu",
            "solboard leaderboard gemm_bf16 --gpu h100 --shape m4096_n4096_k4096",
            "solboard leaderboard cross_entropy --gpu h200 --references",
        ),
    ),
    "check": Help(
        "dry run: every upload check, nothing saved",
        "Every check of a submit (size, syntax, a kernel function, ptxas/nvcc per target, launch "
        "spec, quota) without saving or queueing anything; warns about GPU types no runner serves.",
        ("solboard check kernel.py --problem vector_add --gpu cpu",),
    ),
    "run": Help(
        "evaluate locally with the same evaluator",
        "Run the evaluator on this machine (needs torch; CUDA for GPU shapes), as a runner would.",
        ("solboard run kernel.py --problem vector_add --device cpu",),
    ),
}


def epilog(command: str) -> str:
    found = COMMAND_HELP[command]
    examples = "examples:\n" + "\n".join(f"  {line}" for line in found.examples) if found.examples else ""
    extra = MODES_TEXT if command in ("submit", "rerun", "run") else ""
    return "\n\n".join(part for part in (examples, extra, LOGIN_SOURCES, EXIT_STATUSES) if part)
