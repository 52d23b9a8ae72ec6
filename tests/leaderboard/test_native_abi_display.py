"""Each problem's languages and native ABI, as the problem page, the upload form, the API and the
``solboard`` client show them: generated from the synced catalogue, the same description
everywhere, with skeletons that pass upload validation as served."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from evaluator.problems import get_problem
from evaluator.ptx import validate_upload
from evaluator.ptx.toolchain import find_tool
from solboard_client.main import main as solboard


@pytest.fixture
def catalogue(problems: Any, gpu_types: Any) -> None:
    """The real problem catalogue and GPU table, synced."""


def test_the_api_gives_each_problem_its_native_abi_generated_from_the_definition(catalogue: None) -> None:
    body = APIClient().get("/api/problems/attention_fwd").json()
    abi = body["native_abi"]
    assert abi["native"] and abi["languages"] == ["python", "ptx", "cuda"] == body["languages"]
    assert [(p["kind"], p["name"]) for p in abi["parameters"]][-3:] == [("u32", "D"), ("u32", "causal"),
                                                                        ("f32", "softmax_scale")]
    assert abi["tensormaps"] == ["q", "k", "v", "O"]
    assert abi["required_features"]["sm_90a"] == ["wgmma", "tma"]
    assert '{kind="u32", axis="causal"},' in abi["launch_spec"]


def test_a_multi_gpu_problem_says_it_takes_no_native_kernel(catalogue: None) -> None:
    abi = APIClient().get("/api/problems/allreduce").json()["native_abi"]
    assert abi == {**abi, "native": False, "languages": ["python"], "parameters": [], "launch_spec": ""}
    assert "multi-GPU" in abi["reason"]


@pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas is not installed")
def test_the_served_ptx_skeleton_passes_upload_validation(catalogue: None) -> None:
    abi = APIClient().get("/api/problems/paged_decode_attention").json()["native_abi"]
    result = validate_upload(
        "ptx", abi["ptx_skeleton"], None, get_problem("paged_decode_attention"), ["sm_90a"]
    )
    assert result.ok, result.messages()


def test_the_problem_page_shows_languages_parameters_and_skeletons(client: Client, catalogue: None) -> None:
    page = client.get("/problems/rmsnorm/").content.decode()
    section = page[page.index('id="native-abi"'):]
    assert "Languages: <strong>python, ptx, cuda</strong>" in section
    assert "<code>float eps</code>" in section and "constant eps = 0.000001" in section
    assert "<code>unsigned H</code>" in section and "axis H" in section
    assert "Features track on sm_90a</dt><dd>nothing required" in section
    assert "// solboard-launch:" in section and "solboard problem rmsnorm --launch-spec" in section


def test_the_upload_form_shows_the_chosen_problems_abi_and_every_problems_languages(
        client: Client, alice: Any, catalogue: None) -> None:
    client.force_login(alice)
    page = client.get("/submit/?problem=gemm_fp8").content.decode()
    assert 'id="native-abi"' in page and "const __nv_fp8_e4m3* __restrict__ A" in page
    assert "Features track on sm_90a</dt><dd>wgmma, tma" in page
    languages = page[page.index('id="languages-by-problem"'):]
    assert "<code>allreduce</code>" in languages and "<code>attention_bwd</code>" in languages
    assert 'id="native-abi-hint"' in client.get("/submit/").content.decode()


def _cli(capfd: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = solboard(list(args))
    out, err = capfd.readouterr()
    return code, out, err


@pytest.mark.django_db(transaction=True)
def test_the_cli_prints_a_launch_spec_skeleton_and_the_abi(live_server: Any, problems: Any, gpu_types: Any,
                                                           monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
                                                           capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SOLBOARD_CREDENTIALS", str(tmp_path / "none.json"))
    monkeypatch.delenv("SOLBOARD_TOKEN", raising=False)
    code, out, _ = _cli(capfd, "problem", "top_k_sampling", "--launch-spec", "--server", live_server.url)
    assert code == 0 and out.startswith("// top_k_sampling: a starting point")
    assert 'extern "C" __global__ void top_k_sampling_kernel(' in out and "unsigned K" in out
    code, out, _ = _cli(
        capfd, "problem", "top_k_sampling", "--launch-spec", "ptx", "--server", live_server.url
    )
    assert code == 0 and ".visible .entry top_k_sampling_kernel(" in out
    code, out, _ = _cli(capfd, "problem", "attention_fwd", "--abi", "--server", live_server.url)
    assert code == 0 and "features track on sm_90a: wgmma, tma" in out and "constant softmax_scale" in out
    code, _, err = _cli(capfd, "problem", "allreduce", "--launch-spec", "--server", live_server.url)
    assert code == 2 and "allreduce takes no native kernel (python)" in err
