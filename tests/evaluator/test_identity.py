"""The judge's identity: without the runner's word nothing changes (one uid, and the report says
so); with it, the judge becomes (J, C, J) with no capability left, every process that runs submitted
code gets C alone, and a judge that cannot take its identity refuses to run. Each case in a fresh
interpreter: a process cannot take its uids back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from evaluator.harness.identity import CHILD_UID_VARIABLE
from tests.harness_helpers import REPO

NOBODY = 65534
#: Takes the identity, then reports what a judge would see and hand to its children.
PROBE = """
import json, os, subprocess, sys
from evaluator.harness import identity
try:
    child = identity.take_judge_identity()
except identity.IdentityError as error:
    print(json.dumps({"refused": str(error), "variable": os.environ.get(identity.CHILD_UID_VARIABLE)}))
    sys.exit(0)
spawned = subprocess.run([sys.executable, "-c", "import os; print(*os.getresuid())"], capture_output=True,
                         text=True, check=True, **identity.untrusted_process())
print(json.dumps({"child": child, "resuid": os.getresuid(), "popen": identity.untrusted_process(),
                  "describe": identity.describe(), "spawned": spawned.stdout.split(),
                  "variable": os.environ.get(identity.CHILD_UID_VARIABLE)}))
"""


def probe(**env: str) -> dict[str, object]:
    environment = {key: value for key, value in os.environ.items() if key != CHILD_UID_VARIABLE}
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO,
        env={**environment, **env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return dict(json.loads(result.stdout))


def test_without_the_runners_word_the_judge_keeps_one_uid_and_says_so() -> None:
    seen = probe()
    uid = os.getuid()
    assert seen["child"] is None and seen["resuid"] == [uid, uid, uid] and seen["popen"] == {}
    assert "one uid" in str(seen["describe"]) and "could signal its judge" in str(seen["describe"])


@pytest.mark.skipif(os.getuid() != 0, reason="switching uids needs root (a root runner starts the judge so)")
def test_the_judge_becomes_j_c_j_and_its_children_run_as_c_alone() -> None:
    seen = probe(**{CHILD_UID_VARIABLE: str(NOBODY)})
    assert seen["child"] == NOBODY and seen["resuid"] == [0, NOBODY, 0]
    assert seen["popen"] == {"user": NOBODY} and seen["spawned"] == [str(NOBODY)] * 3
    assert "can neither signal, trace nor read the judge" in str(seen["describe"])
    assert seen["variable"] is None  # taken out of the environment: no child inherits it


@pytest.mark.skipif(os.getuid() == 0, reason="root may take any uid")
def test_a_judge_that_cannot_take_its_uids_refuses_to_run() -> None:
    seen = probe(**{CHILD_UID_VARIABLE: str(NOBODY)})
    assert "could not take its uids" in str(seen["refused"]) and seen["variable"] is None
