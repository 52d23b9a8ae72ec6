"""The `solboard` command and the `make run` supervisor, with real child processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from leaderboard.devserver import Child, stop_all, supervise


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_cli_imports_without_django_or_torch() -> None:
    code = (
        "import sys, leaderboard.cli; "
        "assert not {'django', 'torch', 'celery'} & set(sys.modules), sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_an_unknown_subcommand_is_an_error() -> None:
    result = subprocess.run([sys.executable, "-m", "leaderboard", "bogus"], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 2 and "unknown command 'bogus'" in result.stderr


def test_solboard_runner_says_clearly_when_the_runner_is_missing() -> None:
    # A None entry in sys.modules makes `import runners.cli` fail as if the file were absent.
    code = (
        "import sys; sys.modules['runners.cli'] = None; "
        "from leaderboard.cli import main; sys.exit(main(['runner']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2 and "runners/cli.py is missing" in result.stderr


def test_solboard_runner_hands_its_arguments_to_the_runner_cli() -> None:
    result = subprocess.run([sys.executable, "-m", "leaderboard", "runner", "--help"], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0 and "--broker" in result.stdout


def test_when_one_child_dies_the_supervisor_stops_the_rest_and_fails() -> None:
    sleeper = Child("sleeper", ["sleep", "60"])
    crasher = Child("crasher", [sys.executable, "-c", "import time, sys; time.sleep(0.5); sys.exit(3)"])
    started = time.monotonic()
    code = supervise([sleeper, crasher], dict(os.environ))
    assert code == 3
    assert sleeper.process is not None and not alive(sleeper.process.pid)
    assert time.monotonic() - started < 15


def test_stopping_kills_a_child_that_ignores_sigterm_after_the_grace_period() -> None:
    ignore_sigterm = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                      "print('ready', flush=True); time.sleep(60)")
    stubborn = Child("stubborn", [sys.executable, "-c", ignore_sigterm])
    from leaderboard.devserver import start

    start(stubborn, dict(os.environ))
    time.sleep(0.5)
    stop_all([stubborn], grace=1.0)
    assert stubborn.process is not None and stubborn.process.returncode == -9


def test_the_dispatcher_knows_every_client_subcommand() -> None:
    from leaderboard.cli import CLIENT_COMMANDS
    from solboard_client.main import COMMANDS

    assert set(COMMANDS) == CLIENT_COMMANDS
