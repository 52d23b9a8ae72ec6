"""What an upload's compile may cost the site: macro bombs refused before nvcc runs, compile slots
per user and per host (429 / 503 with Retry-After), compile time charged per user, and a rate on
dry runs and batch items (`leaderboard/api/batch.py`: each item checked on its own, one compile budget for
the whole batch). On the real catalogue; nvcc and ptxas where installed.

The cast (tests/conftest.py): alice uploads; bob holds the site's only compile slot.
"""

from __future__ import annotations

import glob
import time
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from evaluator.ptx.toolchain import find_tool
from leaderboard.compile_limits import compile_slot, macro_expansion
from leaderboard.models import Submission
from tests.leaderboard.api_support import alice_api, catalogue, submit_body

pytestmark = pytest.mark.django_db
__all__ = ["alice_api", "catalogue"]  # fixtures used by name
REPO = Path(__file__).resolve().parents[2]
#: vector_add's launch spec, so that every check before the compile passes.
SPEC = "".join(line + "\n" for line in (REPO / "examples/cuda/vector_add.cu").read_text().splitlines()
               if line.startswith("// ") and ("=" in line or "solboard-launch" in line))
#: Eight nested #defines: H expands to 10^8 tokens. nvcc spent 131 s on it on this machine.
BOMB = (
    SPEC
    + "".join(
        f"#define {name} {' '.join([inner] * 10)}\n"
        for name, inner in zip("ABCDEFGH", "xABCDEFG", strict=True)
    )
    + 'extern "C" __global__ void vector_add(const float* a, const float* b, float* c, '
    + "unsigned long long n) { H; }\n"
)
PTX = (REPO / "examples/ptx/vector_add.ptx").read_text()
needs_nvcc = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")
needs_ptxas = pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas is not installed")


def cuda(client: APIClient, path: str, source: str = BOMB) -> Any:
    return client.post(path, submit_body(language="cuda", gpu_types=["h100"], source=source), format="json")


def ptx(client: APIClient, path: str = "/api/submissions/validate") -> Any:
    return client.post(path, submit_body(language="ptx", gpu_types=["h100"], source=PTX), format="json")


def test_the_estimate_finds_the_bomb_and_says_how_big_it_is() -> None:
    assert macro_expansion(BOMB, 1_000_000) == ("G", 1_000_001)  # G is the first past 10^6 (10^7)
    assert macro_expansion(BOMB, 10**8) is None  # H's 10^8 is not over a limit of 10^8
    assert macro_expansion(BOMB, 10**8 - 1) == ("H", 10**8)


def test_the_estimate_follows_line_continuations_and_function_like_macros_but_not_comments() -> None:
    chained = "#define A(x) x x x x x x x x x x \\\n x\n" + "".join(
        f"#define {n} {' '.join([p + '(1)'] * 10)}\n" for n, p in zip("BCDEFG", "ABCDEF", strict=True))
    assert macro_expansion(chained, 1_000_000) is not None
    commented = "/*\n" + BOMB + "*/\n// #define Z H H H H H H H H H H\n"
    assert macro_expansion(commented, 10) is None


def test_a_macro_that_names_itself_expands_once_as_in_the_preprocessor() -> None:
    assert macro_expansion("#define A A A A\n#define B A A\n", 6) is None


def test_no_header_of_the_cuda_toolkit_nor_any_example_looks_like_a_bomb() -> None:
    """The false-positive side: real macro-heavy C/C++ (cub, thrust, libcu++: 3,574 tokens at most)."""
    files = [path for pattern in ("/usr/local/cuda/include/**/*.h", "/usr/local/cuda/include/**/*.cuh",
                                  str(REPO / "examples/**/*.cu"), str(REPO / "examples/**/*.ptx"))
             for path in glob.glob(pattern, recursive=True)]
    flagged = [path for path in files if macro_expansion(Path(path).read_text(errors="replace"), 1_000_000)]
    assert files and not flagged


@pytest.mark.parametrize("path", ["/api/submissions/validate", "/api/submissions"])
def test_a_preprocessor_bomb_is_refused_before_nvcc_runs(alice_api: APIClient, path: str) -> None:
    started = time.monotonic()
    response = cuda(alice_api, path)
    assert time.monotonic() - started < 5
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert (
        error["code"] == "compile_error"
        and "macro G expands to more than 1,000,000 tokens" in error["message"]
    )
    assert not Submission.objects.exists()


def test_a_bomb_in_a_batch_refuses_that_item_only(alice_api: APIClient) -> None:
    body = {"submissions": [submit_body(language="cuda", gpu_types=["h100"], source=BOMB), submit_body()]}
    results = alice_api.post("/api/submissions/batch", body, format="json").json()["results"]
    assert [item["ok"] for item in results] == [False, True]
    assert results[0]["error"]["code"] == "compile_error"


@needs_ptxas
def test_while_her_upload_compiles_a_second_one_is_a_429_with_retry_after(
        alice: Any, alice_api: APIClient, settings: Any) -> None:
    settings.SOLBOARD_COMPILE_WAIT_SECONDS = 0
    with compile_slot(alice.pk):
        response = ptx(alice_api)
    assert response.status_code == 429 and response.json()["error"]["code"] == "compile_busy"
    assert int(response["Retry-After"]) == int(settings.SOLBOARD_COMPILE_SECONDS)
    assert ptx(alice_api).status_code == 200  # the slot is free again


@needs_ptxas
def test_when_the_sites_slots_are_taken_others_get_a_503_with_retry_after(
        bob: Any, alice_api: APIClient, settings: Any) -> None:
    settings.SOLBOARD_COMPILE_WAIT_SECONDS, settings.SOLBOARD_COMPILE_SLOTS = 0, 1
    with compile_slot(bob.pk):
        response = ptx(alice_api, "/api/submissions")
    assert response.status_code == 503 and response.json()["error"]["code"] == "site_busy"
    assert "Retry-After" in response and not Submission.objects.exists()


@needs_ptxas
def test_a_request_waits_for_a_slot_before_giving_up(alice_api: APIClient, bob: Any, settings: Any) -> None:
    settings.SOLBOARD_COMPILE_WAIT_SECONDS, settings.SOLBOARD_COMPILE_SLOTS = 0.5, 1
    with compile_slot(bob.pk):
        started = time.monotonic()
        assert ptx(alice_api).status_code == 503
    assert time.monotonic() - started >= 0.5


@needs_ptxas
def test_compile_time_is_charged_and_a_spent_budget_is_a_429(alice_api: APIClient, settings: Any) -> None:
    settings.SOLBOARD_COMPILE_SECONDS_PER_HOUR = 1
    assert ptx(alice_api).status_code == 200  # charged at least one second
    refused = ptx(alice_api)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limited"
    assert 0 < int(refused["Retry-After"]) <= 3600
    assert (
        alice_api.post("/api/submissions/validate", submit_body(), format="json").status_code == 200
    )  # Python


def test_dry_runs_and_batch_items_are_rate_limited(alice_api: APIClient, settings: Any) -> None:
    settings.SOLBOARD_CHECKS_PER_HOUR = 3
    for _ in range(2):
        assert alice_api.post("/api/submissions/validate", submit_body(), format="json").status_code == 200
    batch = alice_api.post(
        "/api/submissions/batch", {"submissions": [submit_body(), submit_body()]}, format="json"
    )
    assert batch.status_code == 429 and batch.json()["error"]["code"] == "rate_limited"
    assert not Submission.objects.exists()


@needs_ptxas
def test_a_batch_gets_one_compile_limit_of_compile_time_in_all(alice_api: APIClient, settings: Any) -> None:
    settings.SOLBOARD_COMPILE_SECONDS = 1.0
    items = [submit_body(language="ptx", gpu_types=["h100"], source=PTX)] * 16
    results = alice_api.post("/api/submissions/batch", {"submissions": items}, format="json").json()[
        "results"
    ]
    codes = [item["error"]["code"] if not item["ok"] else "ok" for item in results]
    assert codes[0] == "ok" and codes[-1] == "compile_busy", codes
    assert set(codes) == {"ok", "compile_busy"} and codes == sorted(codes, key=lambda code: code != "ok")


@needs_nvcc
def test_the_site_stops_a_compile_at_its_own_time_limit(alice_api: APIClient, settings: Any) -> None:
    """A source the estimate cannot see through (a function-like macro doubling at each call) is
    stopped at SOLBOARD_COMPILE_SECONDS, not the evaluator's 180 s."""
    settings.SOLBOARD_COMPILE_SECONDS = 3.0
    doubling = SPEC + "#define D(x) x x\n" + 'extern "C" __global__ void vector_add(const float* a, ' \
        'const float* b, float* c, unsigned long long n) { ' + "D(" * 30 + "1" + ")" * 30 + "; }\n"
    assert macro_expansion(doubling, 1_000_000) is None
    started = time.monotonic()
    response = cuda(alice_api, "/api/submissions/validate", doubling)
    assert time.monotonic() - started < 30
    assert response.status_code == 400 and "time limit of 3 s" in response.json()["error"]["message"]
