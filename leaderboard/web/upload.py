"""The upload form: validated through ``create_submission`` (the one way a kernel enters), errors
shown beside their field and every input kept (an uploaded file's text lands in the source box).

The body is refused before it is read when it is larger than the site accepts (413, with the
limit in words); a file larger than the source limit is refused with its size.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from leaderboard.models import GpuType, Language, Mode, Problem
from leaderboard.queues import availability, live_runners_by_queue, unserved
from leaderboard.submissions import create_submission

#: Fields of ``create_submission``'s errors that the form shows elsewhere.
ERROR_FIELDS = {"source_sha256": "source"}


def _kib(size: int) -> str:
    return f"{size / 1024:.0f} KiB"


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
                                  help_text="TOML; may instead sit in the source's header comment (docs/ptx.md).")
    mode = forms.ChoiceField(choices=Mode.choices, initial=Mode.RANKED, widget=forms.RadioSelect,
                             help_text="test: correctness and timing, never ranked; ranked: with the secret seed.")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.is_bound:
            self.data = self.data.copy()  # mutable: an uploaded file's text is put in the source box
        self.fields["problem"].choices = [
            (name, f"{title} ({name})") for name, title in Problem.objects.filter(active=True).values_list("name", "title")]
        served = live_runners_by_queue()
        self.fields["gpu_types"].choices = [(gpu.key, gpu_label(gpu, availability(gpu.key, 1, served).served))
                                            for gpu in GpuType.objects.order_by("development_device", "key")]
        self.fields["source"].help_text = f"At most {_kib(settings.SOLBOARD_MAX_SOURCE_BYTES)}."

    def clean_source_file(self) -> str | None:
        upload = self.cleaned_data.get("source_file")
        if upload is None:
            return None
        limit = settings.SOLBOARD_MAX_SOURCE_BYTES
        if upload.size > limit:
            raise ValidationError(f"the file is {upload.size} bytes; the limit is {limit} ({_kib(limit)})")
        try:
            return str(upload.read().decode("utf-8"))
        except UnicodeDecodeError as error:
            raise ValidationError(f"the file is not UTF-8 text (byte {error.start})") from None

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
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
    return length if length > settings.DATA_UPLOAD_MAX_MEMORY_SIZE else None


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


@login_required
@require_http_methods(["GET", "POST"])
def upload(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        size = _too_large(request)
        if size is not None:
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            refused = f"the upload is {size} bytes; the site accepts at most {limit} ({_kib(limit)}); nothing was saved"
            return render(request, "web/upload.html", {"form": UploadForm(), "refused": refused}, status=413)
        form = UploadForm(request.POST, request.FILES)
        if form.is_valid():
            done = _submit(request, form)
            if done is not None:
                return done
        return render(request, "web/upload.html", {"form": form}, status=400)
    initial = {"problem": request.GET.get("problem"), "gpu_types": [settings.SOLBOARD_DEV_GPU_TYPE]}
    return render(request, "web/upload.html", {"form": UploadForm(initial=initial)})
