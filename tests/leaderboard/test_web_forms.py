"""The website's forms: sign up / log in / log out (no open redirect), the upload form (errors
inline, input kept, size capped with a clear message) and CSRF on every form.

The cast (tests/conftest.py): alice signs in and uploads; visitors are anonymous.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from leaderboard.models import Submission

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_pages(settings: Any) -> None:
    """Every request renders from the database (the page cache is tested on its own)."""
    settings.SOLBOARD_WEB_CACHE_SECONDS = 0

REPO = Path(__file__).resolve().parents[2]
VECTOR_ADD = (REPO / "examples" / "python" / "vector_add.py").read_text()
GOOD = {"problem": "vector_add", "language": "python", "gpu_types": ["cpu"], "mode": "ranked"}


@pytest.fixture
def uploader(client: Client, alice: Any, problems: Any, gpu_types: Any, broker: str) -> Client:
    client.force_login(alice)
    return client


def textarea(html: str, name: str) -> str:
    found = re.search(rf'<textarea name="{name}"[^>]*>\n?(.*?)</textarea>', html, re.DOTALL)
    assert found is not None, name
    return found.group(1)


# ---------------------------------------------------------------- accounts


def test_signing_up_logs_the_new_user_in(client: Client) -> None:
    response = client.post("/accounts/signup/", {"username": "carol", "password1": "a-long-pass-phrase-9",
                                                 "password2": "a-long-pass-phrase-9"})
    assert response.status_code == 302 and response.url == "/"
    assert "carol" in client.get("/").content.decode()


def test_a_weak_password_is_refused_with_the_reason(client: Client) -> None:
    page = client.post("/accounts/signup/", {"username": "carol", "password1": "12345678",
                                             "password2": "12345678"}).content.decode()
    assert "too common" in page or "entirely numeric" in page


@pytest.mark.parametrize("url", ["/accounts/login/", "/accounts/signup/"])
@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/", "http://testserver.evil.example/"])
def test_it_never_redirects_off_site_after_login_or_sign_up(client: Client, alice: Any, url: str,
                                                            target: str) -> None:
    if url.endswith("login/"):
        data = {"username": "alice", "password": "alice-password-1", "next": target}
    else:
        data = {"username": "dave", "password1": "a-long-pass-phrase-9", "password2": "a-long-pass-phrase-9",
                "next": target}
    response = client.post(url, data)
    assert response.status_code == 302 and response.url == "/"


def test_it_follows_a_next_on_this_site_after_login(client: Client, alice: Any) -> None:
    response = client.post("/accounts/login/", {"username": "alice", "password": "alice-password-1",
                                                "next": "/problems/vector_add/"})
    assert response.url == "/problems/vector_add/"


def test_log_out_is_a_post(client: Client, alice: Any) -> None:
    client.force_login(alice)
    assert client.get("/accounts/logout/").status_code == 405
    client.post("/accounts/logout/")
    assert "Log in" in client.get("/").content.decode()


# ---------------------------------------------------------------- the upload form


def test_uploading_needs_an_account(client: Client) -> None:
    response = client.get("/submit/")
    assert response.status_code == 302 and response.url.startswith("/accounts/login/?next=/submit/")


def test_a_pasted_python_kernel_is_saved_queued_and_shown(uploader: Client, alice: Any) -> None:
    response = uploader.post("/submit/", {**GOOD, "source": VECTOR_ADD})
    submission = Submission.objects.get(user=alice)
    assert response.status_code == 302 and response.url == f"/submissions/{submission.pk}/"
    assert submission.source == VECTOR_ADD
    assert list(submission.evaluations.values_list("gpu_type__key", "mode", "status")) == [
        ("cpu", "ranked", "queued")
    ]


def test_an_uploaded_file_is_read_as_the_source(uploader: Client, alice: Any) -> None:
    upload = SimpleUploadedFile("vector_add.py", VECTOR_ADD.encode(), content_type="text/x-python")
    assert uploader.post("/submit/", {**GOOD, "source_file": upload}).status_code == 302
    assert Submission.objects.get(user=alice).source == VECTOR_ADD


def test_python_that_does_not_parse_is_refused_inline_and_the_input_kept(uploader: Client) -> None:
    broken = "def kernel(a, b, c:\n    pass\n"
    response = uploader.post("/submit/", {**GOOD, "source": broken, "mode": "test"})
    page = response.content.decode()
    assert response.status_code == 400
    assert re.search(r'data-field="source"><li>Python does not parse: line 1', page)
    assert textarea(page, "source").startswith("def kernel(a, b, c:")
    assert 'value="test" id="id_mode_0" checked' in page or re.search(r'value="test"[^>]*checked', page)
    assert not Submission.objects.exists()


def test_a_broken_uploaded_file_lands_in_the_source_box_with_the_error(uploader: Client) -> None:
    upload = SimpleUploadedFile("k.py", b"def kernel(:\n", content_type="text/x-python")
    page = uploader.post("/submit/", {**GOOD, "source_file": upload}).content.decode()
    assert "Python does not parse" in page and textarea(page, "source").startswith("def kernel(:")


def test_a_language_the_problem_does_not_accept_is_refused_on_its_field(uploader: Client) -> None:
    page = uploader.post("/submit/", {**GOOD, "language": "cobol", "source": VECTOR_ADD}).content.decode()
    assert re.search(r'data-field="language"><li>Select a valid choice', page)


def test_ptx_for_the_cpu_is_refused_with_the_gpu_types_that_can_run_it(uploader: Client) -> None:
    ptx = (REPO / "examples" / "ptx" / "vector_add.ptx").read_text()
    page = uploader.post("/submit/", {**GOOD, "language": "ptx", "source": ptx}).content.decode()
    assert re.search(r'data-field="gpu_types"><li>cpu \(.*\) has no GPU architecture', page)


def test_a_file_and_pasted_source_together_are_refused(uploader: Client) -> None:
    upload = SimpleUploadedFile("k.py", VECTOR_ADD.encode())
    page = uploader.post("/submit/", {**GOOD, "source": VECTOR_ADD, "source_file": upload}).content.decode()
    assert "give a file or pasted source, not both" in page


def test_a_file_over_the_source_limit_is_refused_beside_it_with_every_other_input_kept(
        uploader: Client, settings: Any) -> None:
    """Even a file far larger than the site reads into memory (2 MB against 512 KiB): it is dropped
    as it arrives and the form answers, not a 413 that resets everything."""
    assert settings.SOLBOARD_MAX_SOURCE_BYTES == 512 * 1024 and settings.DATA_UPLOAD_MAX_MEMORY_SIZE < 2 << 20
    upload = SimpleUploadedFile("big.py", b"#" * (2 << 20))
    spec = "[launch]\ngrid = 1\n"
    response = uploader.post("/submit/", {**GOOD, "gpu_types": ["cpu", "h100"], "launch_spec": spec,
                                          "source_file": upload})
    page = response.content.decode()
    assert response.status_code == 400
    assert "big.py: the source is over the limit of 524288 bytes (512 KiB)" in page
    for name, value in (("gpu_types", "cpu"), ("gpu_types", "h100"), ("mode", "ranked")):
        assert re.search(rf'<input[^>]*name="{name}" value="{value}"[^>]*checked', page), (name, value)
    assert spec in page and re.search(r'<option value="vector_add" selected>', page)
    assert not Submission.objects.exists()


def test_a_file_just_over_the_limit_is_refused_with_its_size_in_the_same_words(uploader: Client,
                                                                               settings: Any) -> None:
    settings.SOLBOARD_MAX_SOURCE_BYTES = 1000
    upload = SimpleUploadedFile("big.py", b"#" * 1000 + b"#" * 500)
    page = uploader.post("/submit/", {**GOOD, "source_file": upload}).content.decode()
    assert "big.py: the source is over the limit of 1000 bytes (0.9766 KiB)" in page


def test_pasted_source_over_the_limit_is_refused_with_the_limit(uploader: Client, settings: Any) -> None:
    settings.SOLBOARD_MAX_SOURCE_BYTES = 1000
    page = uploader.post("/submit/", {**GOOD, "source": "#" * 1500}).content.decode()
    assert "the source is 1500 bytes; the limit is 1000 bytes (0.9766 KiB)" in page


def test_a_body_larger_than_the_site_reads_is_a_413_that_states_the_source_limit(uploader: Client,
                                                                                settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096
    response = uploader.post("/submit/", {**GOOD, "source": "#" * 10_000})
    assert response.status_code == 413
    page = response.content.decode()
    assert "Nothing was saved" in page and "A kernel's source may be at most 524288 bytes (512 KiB)" in page
    assert not Submission.objects.exists()


def test_a_body_declared_over_the_cap_is_refused_unread(uploader: Client, settings: Any) -> None:
    settings.SOLBOARD_MAX_SOURCE_BYTES = 1000
    cap = settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 16 * 1000
    response = uploader.post(
        "/submit/", {**GOOD, "source_file": SimpleUploadedFile("big.py", b"#" * (cap + 1))}
    )
    assert response.status_code == 413
    assert (
        "the request was" in response.content.decode()
        and "1000 bytes (0.9766 KiB)" in response.content.decode()
    )


def test_the_form_api_and_cli_share_one_default_mode_and_say_it(uploader: Client) -> None:
    from evaluator.vocabulary import DEFAULT_MODE
    from leaderboard.api.serializers import SubmitSerializer
    from solboard_client.main import build_parser

    page = uploader.get("/submit/").content.decode()
    assert re.search(rf'value="{DEFAULT_MODE}"[^>]*checked', page) and f"Default {DEFAULT_MODE}" in page
    assert SubmitSerializer().fields["mode"].default == DEFAULT_MODE
    args = build_parser().parse_args(["submit", "k.py", "--problem", "vector_add", "--gpu", "cpu"])
    assert args.mode == DEFAULT_MODE == "test"


# ---------------------------------------------------------------- CSRF on every form


@pytest.mark.parametrize("url", [
    "/accounts/login/", "/accounts/signup/", "/accounts/logout/", "/submit/", "/account/tokens/",
    "/account/tokens/1/revoke", "/submissions/1/cancel", "/submissions/1/rerun", "/submissions/1/publish",
])
def test_every_form_refuses_a_post_without_the_csrf_token(url: str, alice: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post(url, {"name": "x"}).status_code == 403


def test_every_form_on_the_pages_carries_the_csrf_token(uploader: Client) -> None:
    for url in ("/submit/", "/account/tokens/", "/accounts/login/", "/"):
        page = uploader.get(url).content.decode()
        for form in re.findall(r'<form method="post".*?</form>', page, re.DOTALL):
            assert 'name="csrfmiddlewaretoken"' in form, (url, form[:200])


def test_a_too_large_body_is_a_413_that_says_so_even_when_csrf_reads_it_first(
    alice: Any, problems: Any, gpu_types: Any, settings: Any
) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', client.get("/submit/").content.decode())
    assert token is not None
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096
    response = client.post(
        "/submit/", {**GOOD, "source": "#" * 10_000, "csrfmiddlewaretoken": token.group(1)}
    )
    assert response.status_code == 413
    assert "The upload is too large" in response.content.decode()
    assert not Submission.objects.exists()
