"""Request validation and the documented shapes of every answer (drf-spectacular reads these).

Input serializers check types and sizes only; what a kernel must satisfy (problem, language,
GPU types, syntax, ptxas/nvcc, launch spec) is ``create_submission``'s job, so the API, the
website and the CLI get the same answers.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers

from evaluator.vocabulary import DEFAULT_MODE, language_of_file
from leaderboard.api.webhooks import RefusedCallback, check_callback_url
from leaderboard.models import Language, Mode

MAX_BATCH = 16
MAX_GPU_TYPES = 8


class StrictCharField(serializers.CharField):
    """A string and nothing else: DRF's CharField would turn 0 or true into "0" or "True"."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class StrictURLField(serializers.URLField):
    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Stable machine-readable code (docs/api.md lists them).")
    message = serializers.CharField(help_text="For people; may change.")
    field = serializers.CharField(allow_null=True, help_text="The request field at fault, if any.")
    limit = serializers.IntegerField(required=False, help_text="413: the limit in bytes.")
    retry_after = serializers.IntegerField(required=False, help_text="429: seconds to wait (= Retry-After).")
    quota = serializers.DictField(required=False, help_text="429: which quota, used, limit, reset time.")


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


class SubmitSerializer(serializers.Serializer):
    problem = StrictCharField(min_length=1, max_length=64)
    language = serializers.ChoiceField(
        choices=Language.values,
        required=False,
        allow_null=True,
        help_text="Default: from filename's extension (.py, .ptx, .cu), else python.",
    )
    gpu_types = serializers.ListField(child=StrictCharField(min_length=1, max_length=32), min_length=1,
                                      max_length=MAX_GPU_TYPES)
    source = StrictCharField(min_length=1, trim_whitespace=False)
    launch_spec = StrictCharField(required=False, allow_null=True, allow_blank=True, trim_whitespace=False)
    mode = serializers.ChoiceField(choices=Mode.values, default=DEFAULT_MODE,
                                   help_text=f"Default {DEFAULT_MODE}, as the upload form and the CLI.")
    filename = StrictCharField(required=False, allow_blank=True, max_length=255)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs.get("language"):
            attrs["language"] = language_for_filename(attrs.get("filename") or "")
        return attrs


def language_for_filename(filename: str) -> str:
    return language_of_file(filename)


class BatchSerializer(serializers.Serializer):
    submissions = serializers.ListField(
        child=serializers.DictField(),
        min_length=1,
        help_text=f"Up to {MAX_BATCH} submissions, each like a single create.",
    )


class RerunSerializer(serializers.Serializer):
    gpu_types = serializers.ListField(
        child=StrictCharField(min_length=1, max_length=32),
        required=False,
        min_length=1,
        max_length=MAX_GPU_TYPES,
        help_text="Default: every GPU type it was evaluated on.",
    )
    mode = serializers.ChoiceField(
        choices=Mode.values, required=False, help_text="Default: the latest run's."
    )


class CancelSerializer(serializers.Serializer):
    gpu_types = serializers.ListField(child=StrictCharField(min_length=1, max_length=32), required=False,
                                      help_text="Default: every evaluation still queued or running.")


class TokenCreateSerializer(serializers.Serializer):
    name = StrictCharField(max_length=100, required=False, allow_blank=True, default="")
    agent_name = StrictCharField(max_length=100, required=False, allow_blank=True, default="")
    agent_model = StrictCharField(max_length=100, required=False, allow_blank=True, default="")
    agent_version = StrictCharField(max_length=64, required=False, allow_blank=True, default="")
    callback_url = StrictURLField(max_length=500, required=False, allow_blank=True, default="")

    def validate_callback_url(self, value: str) -> str:
        """Checked now as at every delivery: a URL into the site's own network is refused here."""
        if value:
            try:
                check_callback_url(value)
            except RefusedCallback as error:
                raise serializers.ValidationError(str(error)) from None
        return value


class TokenSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The first characters of the token, to recognise it.")
    agent_name = serializers.CharField()
    agent_model = serializers.CharField()
    agent_version = serializers.CharField()
    callback_url = serializers.CharField()
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)
    gpu_seconds_total = serializers.FloatField(
        help_text="GPU-seconds the jobs of its submissions used, all time."
    )
    gpu_seconds_today = serializers.FloatField(
        help_text="The same, of jobs that ended in the current UTC day."
    )


class NewTokenSerializer(TokenSerializer):
    token = serializers.CharField(help_text="The token itself: shown once, never again.")
    webhook_secret = serializers.CharField(
        help_text="HMAC-SHA256 key of the webhooks (empty without a callback)."
    )


class GpuTypeSerializer(serializers.Serializer):
    key = serializers.CharField()
    name = serializers.CharField()
    arch = serializers.CharField(allow_null=True)
    development_device = serializers.BooleanField(
        help_text="The CPU device: wall-clock, no SOL, ranked apart."
    )
    estimated = serializers.BooleanField()
    peaks_tflops = serializers.DictField(child=serializers.FloatField())
    hbm_bytes_per_s = serializers.FloatField(allow_null=True)
    link_bytes_per_s_per_direction = serializers.FloatField(allow_null=True)


class ProblemSummarySerializer(serializers.Serializer):
    name = serializers.CharField()
    title = serializers.CharField()
    kind = serializers.CharField()
    world_size = serializers.IntegerField()
    languages = serializers.ListField(child=serializers.CharField())
    version = serializers.IntegerField()
    shape_count = serializers.IntegerField()


class SolSerializer(serializers.Serializer):
    t_sol_us = serializers.FloatField()
    bound = serializers.ChoiceField(choices=["compute", "memory", "link"])


class ShapeSerializer(serializers.Serializer):
    shape_id = serializers.CharField()
    axes = serializers.DictField()
    ranked = serializers.BooleanField()
    quick = serializers.BooleanField()
    cpu = serializers.BooleanField(help_text="Runs on the CPU development device.")
    counts = serializers.DictField()
    t_sol = serializers.DictField(child=SolSerializer(allow_null=True),
                                  help_text="GPU type -> speed of light of one call (null: peaks unknown).")


class ProblemSerializer(ProblemSummarySerializer):
    description = serializers.CharField()
    axes = serializers.ListField()
    tolerance = serializers.DictField()
    inputs = serializers.ListField()
    outputs = serializers.ListField()
    baseline = serializers.CharField()
    ptx_abi = serializers.DictField(help_text="The PTX/CUDA kernel parameter ABI (docs/ptx.md).")
    required_features = serializers.DictField(help_text="arch -> architecture features a ranked kernel uses.")
    native_abi = serializers.DictField(
        help_text="Generated from the definition: languages, the kernel's parameters in order (pointers, "
                  "scalars, fp32 constants), TMA-capable tensors, required features, and a launch spec with "
                  "CUDA C++ and PTX skeletons that pass check-ptx (docs/ptx.md).")
    shapes = ShapeSerializer(many=True)


class ShapeFeedbackSerializer(serializers.Serializer):
    shape_id = serializers.CharField()
    ranked = serializers.BooleanField(
        allow_null=True,
        help_text="Counts towards the problem score on this "
        "device: a ranked shape on a GPU, a cpu shape on the CPU development device.",
    )
    status = serializers.CharField()
    message = serializers.CharField(allow_blank=True)
    median_us = serializers.FloatField(allow_null=True)
    ci95_us = serializers.ListField(child=serializers.FloatField(allow_null=True), allow_null=True)
    baseline_median_us = serializers.FloatField(allow_null=True)
    t_sol_us = serializers.FloatField(allow_null=True)
    sol_fraction = serializers.FloatField(allow_null=True)
    bound = serializers.CharField(allow_null=True, help_text="compute, memory or link.")
    score = serializers.FloatField(allow_null=True, help_text="The site's score of the shape, as the report "
                                   "page shows it (on the CPU: t_b / (t_b + t_k)).")
    speedup = serializers.FloatField(allow_null=True)
    witnessed = serializers.BooleanField()
    worst_elements = serializers.ListField(child=serializers.DictField(),
                                           help_text="Failed correctness: output, index, expected, got.")
    ncu = serializers.DictField(
        allow_null=True, help_text="Headline Nsight Compute figures of the top kernel."
    )


class WarningSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="no_runner: no live runner serves this GPU type's queue.")
    gpu_type = serializers.CharField()
    message = serializers.CharField()


class EvaluationSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The evaluation's own id (webhooks, runners); people and every "
                                  "command name the submission: see label.")
    submission_id = serializers.IntegerField()
    label = serializers.CharField(help_text='How to show it: "submission 12, cpu ranked run 1".')
    gpu_type = serializers.CharField()
    development_device = serializers.BooleanField(
        help_text="The CPU development device: ranked only on its own development board (wall-clock, no SOL)."
    )
    mode = serializers.CharField()
    run_number = serializers.IntegerField()
    status = serializers.CharField(
        help_text="queued, running, passed, failed, error, timeout, rejected, cancelled."
    )
    evaluator_status = serializers.CharField(allow_null=True)
    message = serializers.CharField(allow_blank=True)
    queue_position = serializers.IntegerField(allow_null=True, help_text="While queued: its place in its GPU "
                                              "type's queue, counted from 1 (1 = next to start).")
    runners_online = serializers.IntegerField(
        allow_null=True,
        help_text="While queued: live runners that serve its queue (0: it waits until one connects).",
    )
    queued_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    score = serializers.FloatField(allow_null=True)
    rank_eligible = serializers.BooleanField()
    provisional = serializers.BooleanField(
        help_text="Passed, but its witness has not confirmed the timing; or running, with a provisional "
        "result from before its witness (provisional_report)."
    )
    provisional_at = serializers.DateTimeField(
        allow_null=True,
        help_text="When the running job's provisional result came (ranked stage done, witness "
        "running); null once the evaluation ended (its final result replaces it).",
    )
    provisional_score = serializers.FloatField(
        allow_null=True, help_text="The provisional result's problem score."
    )
    not_ranked_reason = serializers.CharField(allow_null=True)
    features_met = serializers.BooleanField(allow_null=True)
    flags = serializers.ListField(child=serializers.CharField())
    shapes = ShapeFeedbackSerializer(many=True)
    report = serializers.DictField(allow_null=True, required=False,
                                   help_text="The evaluator's full report (docs/report-schema.json).")
    provisional_report = serializers.DictField(
        allow_null=True, required=False, help_text="While running: the report when the ranked stage ended, "
        "before its witness (witnessed false, never ranked), as the site judged it.")


class AgentSerializer(serializers.Serializer):
    name = serializers.CharField(allow_blank=True)
    model = serializers.CharField(allow_blank=True)
    version = serializers.CharField(allow_blank=True)


class SubmissionSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    problem = serializers.CharField()
    problem_version = serializers.IntegerField()
    language = serializers.CharField()
    user = serializers.CharField()
    agent = AgentSerializer(allow_null=True)
    created_at = serializers.DateTimeField()
    source_sha256 = serializers.CharField()
    status = serializers.ChoiceField(choices=["queued", "running", "finished"])
    state = serializers.CharField(help_text="Changes exactly when a status changes: pass it as `since`.")
    static_evidence = serializers.DictField()
    evaluations = EvaluationSerializer(many=True)
    warnings = WarningSerializer(many=True, help_text="E.g. no runner online for a GPU type it waits for.")
    source = serializers.CharField(required=False, help_text="Owner, staff, or a public submission only.")
    launch_spec = serializers.CharField(required=False, allow_null=True)


class SubmissionSummarySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    problem = serializers.CharField()
    language = serializers.CharField()
    created_at = serializers.DateTimeField()
    agent = AgentSerializer(allow_null=True)
    status = serializers.CharField()
    evaluations = serializers.ListField(child=serializers.DictField())


class SubmissionPageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.CharField(allow_null=True)
    previous = serializers.CharField(allow_null=True)
    results = SubmissionSummarySerializer(many=True)


class BatchItemSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    ok = serializers.BooleanField()
    submission = SubmissionSerializer(required=False)
    error = ErrorDetailSerializer(required=False)


class BatchResultSerializer(serializers.Serializer):
    results = BatchItemSerializer(many=True)


class ValidationResultSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    language = serializers.CharField()
    static_evidence = serializers.DictField(help_text="PTX/CUDA: registers, features, warnings per target.")
    quota = serializers.CharField(allow_null=True, help_text="Why a real create would be refused now, if so.")
    warnings = WarningSerializer(many=True, help_text="E.g. no runner online for one of the GPU types.")


class LeaderboardRowSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    user = serializers.CharField()
    agent = AgentSerializer(allow_null=True)
    submission_id = serializers.IntegerField()
    evaluation_id = serializers.IntegerField()
    language = serializers.CharField()
    score = serializers.FloatField()
    median_us = serializers.FloatField(allow_null=True)
    features_met = serializers.BooleanField(allow_null=True)
    submitted_at = serializers.DateTimeField()


class ReferenceShapeSerializer(serializers.Serializer):
    shape = serializers.CharField()
    median_us = serializers.FloatField(allow_null=True)
    speedup = serializers.FloatField(
        allow_null=True, help_text="Baseline time / this line's time at the shape."
    )
    sol_fraction = serializers.FloatField(allow_null=True)
    score = serializers.FloatField(allow_null=True, help_text="The S this line gets at the shape.")


class ReferenceLineSerializer(serializers.Serializer):
    label = serializers.CharField(help_text="eager, torch_compile, liger, flash_attn, ...")
    title = serializers.CharField()
    kind = serializers.ChoiceField(choices=["baseline", "compiled", "library"])
    status = serializers.ChoiceField(choices=["measured", "measuring", "unavailable", "needs_gpu", "failed"])
    status_text = serializers.CharField()
    package = serializers.CharField(
        allow_null=True, help_text="The library's pip name (null for the baseline lines)."
    )
    versions = serializers.DictField(
        child=serializers.CharField(),
        help_text="Package -> version the runner measured (printed by the line).",
    )
    url = serializers.CharField(allow_null=True)
    source_path = serializers.CharField(help_text="The source (or its template) in the repository.")
    submission_id = serializers.IntegerField(allow_null=True, help_text="Its submission (public source).")
    evaluation_id = serializers.IntegerField(allow_null=True)
    score = serializers.FloatField(allow_null=True, help_text="The problem score it would get; never ranked.")
    speedup = serializers.FloatField(allow_null=True)
    sol_fraction = serializers.FloatField(allow_null=True)
    ranked = serializers.BooleanField(help_text="Always false: reference lines never take a rank.")
    shapes = ReferenceShapeSerializer(many=True)


class ReferenceLinesSerializer(serializers.Serializer):
    problem = serializers.CharField()
    version = serializers.IntegerField()
    gpu_types = serializers.DictField(child=ReferenceLineSerializer(many=True),
                                      help_text="GPU type key -> its reference lines.")


class LeaderboardSerializer(serializers.Serializer):
    problem = serializers.CharField()
    version = serializers.IntegerField(help_text="The problem's catalogue version this ranking is of.")
    current_version = serializers.IntegerField(help_text="The problem's current catalogue version.")
    gpu_type = serializers.CharField()
    shape = serializers.CharField(allow_null=True)
    track = serializers.CharField()
    order = serializers.CharField(help_text="score (whole problem, higher first) or median_us (per shape).")
    count = serializers.IntegerField()
    page = serializers.IntegerField()
    page_size = serializers.IntegerField()
    results = LeaderboardRowSerializer(many=True)
    references = ReferenceLineSerializer(
        many=True,
        help_text="Reference lines of this version and GPU type (at this shape, when one is named): "
        "labelled, never ranked.",
    )


class MetaSerializer(serializers.Serializer):
    api_version = serializers.CharField()
    max_batch = serializers.IntegerField()
    max_wait_seconds = serializers.IntegerField(help_text="The longest ?wait= the server honours.")
    max_source_bytes = serializers.IntegerField()
    max_body_bytes = serializers.IntegerField()
    user = serializers.CharField(allow_null=True)


def max_source_bytes() -> int:
    return int(settings.SOLBOARD_MAX_SOURCE_BYTES)
