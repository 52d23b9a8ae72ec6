"""Issue 33, item 3: the runner's state is hidden from a job in every layout of the runner's files.

The reported hole: with the checkout under /tmp (a clean clone, as CI has it), the jail bound the
checkout back, whole, from under the job's private /tmp after it had masked ``var/``: from a job
``os.listdir(<checkout>/var/runner)`` listed the runner's state and ``os.stat(<checkout>/var/
db.sqlite3)`` gave the database's size. Each layout here is a real jailed run (root, namespaces)
that looks for a runner's state folder and development database and must find nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from runners import sandbox

REPO = Path(__file__).resolve().parents[2]
NEEDS_MOUNT_NAMESPACE = pytest.mark.skipif(
    os.geteuid() != 0 or "mount" not in sandbox.capabilities().namespaces,
    reason="needs root and mount namespaces",
)

LOOK = """
import json, os, sys
found = {}
for path in sys.argv[1:]:
    try:
        found[path] = sorted(os.listdir(path)) if os.path.isdir(path) else os.stat(path).st_size
    except OSError as error:
        found[path] = type(error).__name__
import checkout_marker  # what the job must run stays visible
print(json.dumps(found))
"""


def make_checkout(base: Path) -> Path:
    """A checkout with a runner state folder and a development database in ``var/``."""
    checkout = base / "checkout"
    (checkout / "var" / "runner" / "node" / "slots").mkdir(parents=True)
    (checkout / "var" / "runner" / "node" / "slots" / "gpu0.json").write_text('{"job_id": "someone-else"}')
    (checkout / "var" / "db.sqlite3").write_bytes(b"SQLite format 3\0" + b"x" * 4096)
    (checkout / "checkout_marker.py").write_text("")
    for folder in [base, *checkout.rglob("*")]:
        os.chmod(folder, 0o755 if folder.is_dir() else 0o644)
    return checkout


def look(checkout: Path, scratch_root: Path, hide: list[Path], paths: list[str]) -> dict[str, object]:
    """Run the look-around job jailed, as the runner runs a job; returns what it found."""
    with sandbox.Scratch(scratch_root, sandbox.JobUser("nobody", 65534, 65534)) as scratch:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch.path), "PYTHONPATH": str(checkout)}
        spec = sandbox.Spec(
            argv=[sys.executable, "-c", textwrap.dedent(LOOK), *paths],
            env=env,
            user=sandbox.JobUser("nobody", 65534, 65534),
            limits=sandbox.Limits(wall_seconds=60),
            hide=tuple(hide),
        )
        result = sandbox.run(spec, scratch.path)
    assert result.returncode == 0, result.stderr
    assert not result.jail.get("hidden_unmasked"), result.jail
    return json.loads(result.stdout)


def assert_nothing_of_the_runner(found: dict[str, object]) -> None:
    for path, seen in found.items():
        assert seen in ("FileNotFoundError", "PermissionError", []), (path, seen)


@pytest.fixture
def under_tmp() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="solboard-layout-", dir="/tmp"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def elsewhere() -> Iterator[Path]:
    """A folder outside every folder the jail makes private (/tmp, /var/tmp, /run, /dev/shm)."""
    path = Path(tempfile.mkdtemp(prefix="solboard-layout-", dir=REPO.parent if os.access(REPO.parent, os.W_OK)
                                 else "/opt"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def state_paths(checkout: Path) -> list[str]:
    var = checkout / "var"
    return [
        str(var / "runner"),
        str(var / "runner" / "node" / "slots" / "gpu0.json"),
        str(var / "db.sqlite3"),
    ]


@NEEDS_MOUNT_NAMESPACE
def test_a_checkout_under_tmp_keeps_its_var_folder_hidden(under_tmp: Path) -> None:
    checkout = make_checkout(under_tmp)
    found = look(
        checkout, checkout / "var" / "runner" / "node" / "scratch", [checkout / "var"], state_paths(checkout)
    )
    assert_nothing_of_the_runner(found)


@NEEDS_MOUNT_NAMESPACE
def test_solboard_var_inside_a_checkout_elsewhere_is_hidden(elsewhere: Path) -> None:
    checkout = make_checkout(elsewhere)
    found = look(
        checkout, checkout / "var" / "runner" / "node" / "scratch", [checkout / "var"], state_paths(checkout)
    )
    assert_nothing_of_the_runner(found)


@NEEDS_MOUNT_NAMESPACE
def test_a_state_folder_outside_the_checkout_is_hidden(under_tmp: Path, elsewhere: Path) -> None:
    checkout = make_checkout(under_tmp)
    state = elsewhere / "state"
    (state / "outbox").mkdir(parents=True)
    (state / "outbox" / "result.json").write_text('{"secret": "x"}')
    (state / "scratch" / "job-other").mkdir(parents=True)
    for folder in (elsewhere, state, state / "scratch"):
        os.chmod(folder, 0o755)
    found = look(
        checkout,
        state / "scratch",
        [state, state / "scratch", checkout / "var"],
        [
            str(state / "outbox"),
            str(state / "outbox" / "result.json"),
            str(state / "scratch" / "job-other"),
            *state_paths(checkout),
        ],
    )
    assert_nothing_of_the_runner(found)


BIND_AND_LOOK = """
import ctypes, json, sys
sys.path.insert(0, sys.argv[1])
from tests.runners import test_state_mask as layout
from runners import sandbox
source, alias = sys.argv[2], sys.argv[3]
libc = ctypes.CDLL(None, use_errno=True)
assert libc.mount(source.encode(), alias.encode(), None, 4096, None) == 0  # MS_BIND
sandbox.become_subreaper()
checkout = layout.Path(alias) / "checkout"
found = layout.look(checkout, checkout / "var" / "runner" / "node" / "scratch", [checkout / "var"],
                    layout.state_paths(layout.Path(source) / "checkout"))
print(json.dumps(found))
"""


@NEEDS_MOUNT_NAMESPACE
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")
def test_a_checkout_reached_through_a_bind_mount_hides_its_var_folder_at_both_paths(elsewhere: Path) -> None:
    """The runner runs the checkout from a bind mount (``/srv/app`` -> the real folder): the job
    must not find the state under the real folder's path either (the same files, another mount)."""
    source, alias = elsewhere / "real", elsewhere / "alias"
    source.mkdir()
    alias.mkdir()
    make_checkout(source)
    os.chmod(alias, 0o755)
    out = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            sys.executable,
            "-c",
            BIND_AND_LOOK,
            str(REPO),
            str(source),
            str(alias),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert_nothing_of_the_runner(json.loads(out.stdout.splitlines()[-1]))
