"""What the judge established about one job, before it becomes an ``EvaluationReport``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class JudgeOutcome:
    """Shape results as plain dicts shaped like ``ShapeReport`` (``assemble`` validates them)."""

    device: dict[str, Any]
    shapes: list[dict[str, Any]] = field(default_factory=list)
    #: A whole-job status decided by the judge (TIMEOUT, REJECTED, COMPILE_ERROR, ...), or None.
    status: str | None = None
    message: str = ""
    evidence: dict[str, Any] | None = None
    log: str = ""
    phase_seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: Facts about the run that come from the judge itself (not the child's word).
    facts: dict[str, Any] = field(default_factory=dict)
    #: What the child said about itself (start-up split): informational, never a verdict.
    child_claims: dict[str, Any] = field(default_factory=dict)
