"""What can be evaluated and where: GPU types and the mirrored problem catalogue."""

from __future__ import annotations

from django.db import models


class GpuType(models.Model):
    """One row per GPU type key of evaluator/gpus.toml (``sync_gpu_types`` keeps them equal)."""

    key = models.SlugField(max_length=32, unique=True, help_text="h100, h200, b200, cpu, ...")
    name = models.CharField(max_length=100)
    arch = models.CharField(max_length=16, null=True, blank=True, help_text="sm_90a, sm_100a, ...")
    name_patterns = models.JSONField(default=list, blank=True, help_text="NVML names of this type.")
    peaks = models.JSONField(default=dict, blank=True, help_text="Dense TFLOP/s per flop class.")
    hbm_bytes_per_s = models.FloatField(null=True, blank=True)
    link_bytes_per_s_per_direction = models.FloatField(null=True, blank=True)
    estimated = models.BooleanField(default=False, help_text="Peaks derived from NVML facts.")
    verified_on_hardware = models.BooleanField(default=False)
    development_device = models.BooleanField(default=False, help_text="Never ranked (the CPU).")
    source = models.TextField(blank=True)
    notes = models.TextField(blank=True)
    synced_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["development_device", "key"]

    def __str__(self) -> str:
        return self.key


class Problem(models.Model):
    """Mirror of one folder of evaluator/problems (``sync_problems``); the catalogue is the truth."""

    class Kind(models.TextChoices):
        SINGLE = "single", "single GPU"
        MULTI = "multi", "multi GPU"

    name = models.SlugField(max_length=64, unique=True)
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.SINGLE)
    world_size = models.PositiveSmallIntegerField(default=1)
    axes = models.JSONField(default=list)
    languages = models.JSONField(default=list)
    tolerance = models.JSONField(default=dict, help_text="atol, rtol, matched_ratio.")
    inputs = models.JSONField(default=list)
    outputs = models.JSONField(default=list)
    distributions = models.JSONField(default=list)
    baseline_name = models.CharField(max_length=200, blank=True)
    ptx_abi = models.JSONField(default=dict, blank=True)
    required_features = models.JSONField(default=dict, blank=True, help_text="Per arch.")
    version = models.PositiveIntegerField()
    catalogue_sha256 = models.CharField(max_length=64, help_text="Of problem.toml + counts.py.")
    active = models.BooleanField(default=True, help_text="False once gone from the catalogue.")
    created_at = models.DateTimeField(auto_now_add=True)
    synced_at = models.DateTimeField()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=models.Q(world_size__gte=1), name="problem_world_size_positive"),
        ]

    def __str__(self) -> str:
        return self.name


class Shape(models.Model):
    problem = models.ForeignKey(Problem, on_delete=models.CASCADE, related_name="shapes")
    shape_id = models.CharField(max_length=200)
    axes = models.JSONField()
    ranked = models.BooleanField(default=True)
    quick = models.BooleanField(default=False)
    cpu = models.BooleanField(default=False, help_text="Runs on the CPU development device.")
    position = models.PositiveIntegerField(default=0)
    counts = models.JSONField(default=dict, help_text="flops per class, bytes, comm_bytes.")
    active = models.BooleanField(default=True, help_text="False once gone from the catalogue.")

    class Meta:
        ordering = ["problem", "position"]
        constraints = [
            models.UniqueConstraint(fields=["problem", "shape_id"], name="shape_unique_per_problem"),
        ]

    def __str__(self) -> str:
        return f"{self.problem_id}:{self.shape_id}"
