"""The features track on a problem that newly takes native kernels (attention_fwd): a CUDA kernel
without wgmma/TMA is ranked on the main track but not on the features track, and its report page
says which features it misses and what it uses instead; the wgmma + TMA example is on both.

The uploads go through the site's own validation (the real nvcc and ptxas, jailed); the reports are
built from the evidence found there, as a runner without ncu reports it (helpers of
test_ptx_uploads.py), and stored by the site worker's function.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evaluator.ptx.toolchain import find_tool
from leaderboard.ranking_maintenance import ranking_rows
from tests.leaderboard.test_ptx_uploads import evaluate, ranked_report, site, submit, upload_evidence

pytestmark = pytest.mark.skipif(find_tool("nvcc") is None or find_tool("ptxas") is None,
                                reason="nvcc and ptxas are not installed")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "cuda"
PLAIN = (EXAMPLES / "attention_fwd.cu").read_text()
HOPPER = (EXAMPLES / "attention_fwd_wgmma_tma.cu").read_text()
__all__ = ["site"]  # the fixture, used by name


def test_a_kernel_without_the_required_family_ranks_on_the_main_track_only_with_the_reason(
    alice: Any, bob: Any, site: Any, problems: Any, gpu_types: Any, client: Any
) -> None:
    with site():
        plain = submit(alice, PLAIN, ["h200"], problem="attention_fwd", language="cuda", mode="ranked")
        hopper = submit(bob, HOPPER, ["h200"], problem="attention_fwd", language="cuda", mode="ranked")
    fast = evaluate(site, plain, ranked_report(plain, "h200", upload_evidence(plain, "sm_90a"), 0.6))
    slow = evaluate(site, hopper, ranked_report(hopper, "h200", upload_evidence(hopper, "sm_90a"), 0.5))
    assert (fast.features_met, slow.features_met) == (False, True)
    problem, h200 = problems["attention_fwd"], gpu_types["h200"]
    assert [row.user.username for row in ranking_rows(problem, h200)] == ["alice", "bob"]
    assert [row.user.username for row in ranking_rows(problem, h200, require_features=True)] == ["bob"]

    page = client.get(f"/submissions/{plain.pk}/").content.decode()
    assert "not on the required-features ranking" in page
    assert (
        "missing wgmma (no HGMMA/QGMMA/IGMMA in the SASS) and tma (no UTMALDG/UTMASTG/UTMAREDG in the SASS)"
        in page
    )
    assert "found HMMA" in page
    page = client.get(f"/submissions/{hopper.pk}/").content.decode()
    assert "uses the required features (wgmma, tma): on the required-features ranking" in page
