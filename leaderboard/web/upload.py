"""The upload form: validated through ``create_submission`` (the one way a kernel enters), errors
shown beside their field and every input kept (an uploaded file's text lands in the source box).

One limit, stated the same way everywhere: the source limit (``SOLBOARD_MAX_SOURCE_BYTES``,
``solboard_common.limits``). A file over it is dropped as it arrives (``SourceLimitHandler``: the
rest is read and discarded, never stored) and refused beside the file field, every other input
kept; the page's script refuses it before sending. Only a body too large to read at all (over
``upload_body_cap``, or pasted text over ``DATA_UPLOAD_MAX_MEMORY_SIZE``) gets the 413 page, which
states the same source limit.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.files.uploadhandler import FileUploadHandler, SkipFile
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_http_methods

from evaluator.vocabulary import DEFAULT_MODE
from leaderboard.models import GpuType, Language, Mode, Problem
from leaderboard.queues import availability, live_runners_by_queue, unserved
from leaderboard.submissions import create_submission
from solboard_common.limits import source_limit, source_too_large

#: Fields of ``create_submission``'s errors that the form shows elsewhere.
ERROR_FIELDS = {"source_sha256": "source"}


#: A multipart body may be this many times the source limit (a file over the limit is read and
#: dropped, so the form can answer with every input kept); a larger one is refused unread.
SKIPPED_FILE_FACTOR = 16


def upload_body_cap() -> int:
    return int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE) + SKIPPED_FILE_FACTOR * int(
        settings.SOLBOARD_MAX_SOURCE_BYTES
    )


class SourceLimitHandler(FileUploadHandler):
    """First upload handler of the form's requests: a file that passes the source limit is dropped
    (``SkipFile``: the parser reads the rest and discards it) and remembered on the request."""

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        if start + len(raw_data) > settings.SOLBOARD_MAX_SOURCE_BYTES:
            self.request.oversized_file = self.file_name  # type: ignore[union-attr]
            raise SkipFile()
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None  # the next handler (memory or temporary file) holds the file


def gpu_label(gpu: GpuType, served: bool) -> str:
    """The GPU type's checkbox label; it says when no runner would take the job now."""
    label = gpu.name + (" (development, CPU)" if gpu.development_device else "")
    return label if served else f"{label} — no runner online"


class UploadForm(forms.Form):
    data: Any  # the bound QueryDict, copied to be mutable
    problem = forms.ChoiceField()
    language = forms.ChoiceField(choices=Language.choices, initial=Language.PYTHON)
    gpu_types = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple, label="GPU types")
    source_file = forms.FileField(required=False, label="Source file",
                                  help_text=".py, .ptx or .cu; or paste the source below")
    source = forms.CharField(required=False, strip=False, label="Source",
                             widget=forms.Textarea(attrs={"rows": 18, "spellcheck": "false"}))
    launch_spec = forms.CharField(required=False, strip=False, label="Launch spec (PTX / CUDA, optional)",
                                  widget=forms.Textarea(attrs={"rows": 5, "spellcheck": "false"}),
                                  help_text="TOML; may instead sit in the source's header comment "
                                  '(<a href="/docs/ptx.md">docs/ptx.md</a>).')
    mode = forms.ChoiceField(
        choices=Mode.choices,
        initial=DEFAULT_MODE,
        widget=forms.RadioSelect,
        help_text=f"Default {DEFAULT_MODE} (as the API and the CLI). test: correctness and "
        "timing, never ranked; ranked: secret seed, witnessed timing, enters the rankings.",
    )

    def __init__(self, *args: Any, dropped_file: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.dropped_file = dropped_file  # a file the upload handler dropped for its size
        if self.is_bound:
            self.data = self.data.copy()  # mutable: an uploaded file's text is put in the source box
        self.fields["problem"].choices = [
            (name, f"{title} ({name})")
            for name, title in Problem.objects.filter(active=True).values_list("name", "title")
        ]
        served = live_runners_by_queue()
        self.fields["gpu_types"].choices = [(gpu.key, gpu_label(gpu, availability(gpu.key, 1, served).served))
                                            for gpu in GpuType.objects.order_by("development_device", "key")]
        self.fields["source"].help_text = f"At most {source_limit(settings.SOLBOARD_MAX_SOURCE_BYTES)}."

    def clean_source_file(self) -> str | None:
        upload = self.cleaned_data.get("source_file")
        if upload is None:
            return None
        limit = settings.SOLBOARD_MAX_SOURCE_BYTES
        if upload.size > limit:
            raise ValidationError(source_too_large(upload.size, limit))
        try:
            return str(upload.read().decode("utf-8"))
        except UnicodeDecodeError as error:
            raise ValidationError(f"the file is not UTF-8 text (byte {error.start})") from None

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.dropped_file:
            limit = settings.SOLBOARD_MAX_SOURCE_BYTES
            self.add_error("source_file", f"{self.dropped_file}: {source_too_large(None, limit)}")
            return cleaned
        from_file, pasted = cleaned.get("source_file"), cleaned.get("source") or ""
        if from_file is not None and pasted.strip():
            raise ValidationError("give a file or pasted source, not both")
        if from_file is not None:
            cleaned["source"] = from_file
            self.data["source"] = from_file  # kept in the box if anything else is wrong
        elif not pasted.strip() and not self.errors.get("source_file"):
            self.add_error("source", "paste the source or choose a file")
        return cleaned


def _too_large(request: HttpRequest) -> int | None:
    """The body's declared size when it exceeds what the site reads, else None."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None
    return length if length > upload_body_cap() else None


def too_large_page(request: HttpRequest, size: int | None) -> HttpResponse:
    """The 413 page: nothing saved, the source limit (the one that matters), the way back."""
    return render(
        request,
        "web/too_large.html",
        {"size": size, "limit": source_limit(settings.SOLBOARD_MAX_SOURCE_BYTES)},
        status=413,
    )


def _submit(request: HttpRequest, form: UploadForm) -> HttpResponse | None:
    """Create the submission; None (errors added to the form) when it is refused."""
    data = form.cleaned_data
    try:
        submission = create_submission(request.user, data["problem"], data["language"], data["source"],
                                       data["gpu_types"], data["mode"], data["launch_spec"] or None)
    except ValidationError as error:
        for field, errors in error.message_dict.items():
            name = ERROR_FIELDS.get(field, field)
            form.add_error(name if name in form.fields else None, errors)
        return None
    for found in unserved(list(data["gpu_types"]), submission.problem.world_size):
        messages.warning(request, found.warning()[0].upper() + found.warning()[1:] + ".")
    return redirect("submission", pk=submission.pk)


@csrf_exempt  # the upload handler must be in place before CSRF reads the body: checked just below
@login_required
@require_http_methods(["GET", "POST"])
def upload(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        size = _too_large(request)
        if size is not None:
            return too_large_page(request, size)
        request.upload_handlers.insert(0, SourceLimitHandler(request))
    return _upload(request)


@csrf_protect
def _upload(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = UploadForm(request.POST, request.FILES, dropped_file=getattr(request, "oversized_file", None))
        if form.is_valid():
            done = _submit(request, form)
            if done is not None:
                return done
        return render(request, "web/upload.html", form_context(form), status=400)
    initial = {"problem": request.GET.get("problem"), "gpu_types": [settings.SOLBOARD_DEV_GPU_TYPE]}
    return render(request, "web/upload.html", form_context(UploadForm(initial=initial)))


def form_context(form: UploadForm) -> dict[str, Any]:
    """The form, and the source limit the page's script checks before sending."""
    limit = int(settings.SOLBOARD_MAX_SOURCE_BYTES)
    return {"form": form, "source_limit": limit, "source_limit_text": source_limit(limit)}
