"""Every CPU-runnable cheating fixture (classes 2-10, 12, 13) through the real CLI in
ranked mode with a secret seed: never PASSED, and caught for the right reason."""

from __future__ import annotations

import pytest

from tests.harness_helpers import CHEATS, evaluate_file

RANKED = ("--device", "cpu", "--mode", "ranked", "--secret-seed-stdin")

#: fixture -> (expected statuses, words the message must contain)
CASES = {
    "c02_background_thread": ({"REJECTED"}, "class 2"),
    "c02_finish_after_reply": ({"REJECTED"}, "changed its outputs ['c'] after it had returned"),
    "c02_thread_named_tqdm": ({"REJECTED"}, "a background thread is running (class 2)"),
    "c03_lazy_output": ({"REJECTED"}, "class 3"),
    "c03_swapped_storage": ({"REJECTED"}, "class 3"),
    "c04_patch_timer": ({"REJECTED"}, "patched"),
    "c04_forge_report": ({"REJECTED"}, "forged report"),
    "c04_patch_manual_seed": ({"REJECTED"}, "patched torch.manual_seed during import (class 4)"),
    "c16_early_ready": ({"REJECTED"}, "forged report"),
    "c16_patch_json_encoder": ({"REJECTED"}, "timing not confirmed"),
    "c05_cache_by_pointer": ({"REJECTED", "INCORRECT_NUMERICAL"}, ""),
    "c06_read_reference": ({"INCORRECT_NUMERICAL"}, "outside tolerance"),
    "c07_zero_inputs": ({"REJECTED"}, "class 7"),
    "c08_low_precision": ({"INCORRECT_NUMERICAL"}, "outside tolerance"),
    "c09_less_work_when_timed": ({"REJECTED"}, "class"),
    "c10_public_seed_answers": ({"INCORRECT_NUMERICAL"}, "secret seed"),
    "c12_skip_one_shape": ({"INCORRECT_NUMERICAL"}, "nonfinite"),
    "c13_uninitialised": ({"INCORRECT_NUMERICAL"}, "outside tolerance"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_cheating_submission_is_never_passed(name: str) -> None:
    statuses, words = CASES[name]
    report = evaluate_file("vector_add", CHEATS / f"{name}.py", *RANKED, stdin="424242\n")
    assert report["status"] in statuses, report["message"]
    assert not report["rank_eligible"]
    assert report["problem_score"] is None
    assert words in report["message"]


def test_every_exploit_class_has_a_fixture() -> None:
    classes = {int(path.name[1:3]) for path in CHEATS.glob("c[0-9][0-9]_*.py")}
    # 15, 18 and 19 (sandbox, forged broker messages, leftovers) are the runner's and the site's:
    # tests/runners/test_sandbox.py and tests/leaderboard/test_dispatch_*.py; 17 (faster than light) is below.
    assert classes == set(range(1, 15)) | {16}


def test_the_public_seed_cheat_fools_the_public_trials_but_not_the_timed_calls_on_fresh_inputs() -> None:
    report = evaluate_file("vector_add", CHEATS / "c10_public_seed_answers.py", "--device", "cpu")
    shape = report["shapes"][0]
    assert all(check["passed"] for check in shape["checks"])
    assert report["status"] == "REJECTED"
    assert "timed call" in shape["message"]


def test_a_forged_claim_the_judges_clock_rejects_is_timed_again_and_rejected_again() -> None:
    # On the CPU an unconfirmed timing is re-timed once (a busy machine delays every wake-up of the
    # child); the forgery disagrees with the judge's clock the second time too.
    report = evaluate_file("vector_add", CHEATS / "c16_starve_judge_clock.py", *RANKED, stdin="424242\n")
    timed_again = any("timed again" in note for note in report["notes"])
    # Without a second timing, the first one cleared the floor on every shape (a machine loaded
    # enough stretches the judge's clock): then every shape is ranked on that clock, never the claim.
    assert timed_again or all(shape["status"] == "PASSED" for shape in report["shapes"]), report["notes"]
    for shape in report["shapes"]:
        if shape["status"] == "PASSED":
            # On a machine busy enough the second timing can clear the witness's floor (half the judge's
            # clock less 1 ms; on main as well): it is then ranked on the judge's clock, not its claim.
            times = shape["ranked_time"]
            assert times["raised"] and times["kernel_us"] > 1.2 * shape["timing"]["median_us"], times
        else:
            assert shape["status"] == "REJECTED" and "timing not confirmed" in shape["message"]
    for shape in report["shapes"]:  # the first timing's entry set aside: one per shape at most
        assert sum("checked by the judge" in check["trial"] for check in shape["checks"]) <= 1
    assert not report["rank_eligible"]  # the CPU device never is; its board ranks the judge's clock
