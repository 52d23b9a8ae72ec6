"""What anyone may read about a submission, and what only its owner (and staff) may.

A private submission's source is its owner's, and so is everything that can quote it: a traceback
prints the failing source line, a Triton ``CompilationError`` and nvcc/ptxas diagnostics quote the
code around the error, an exception's message is whatever the kernel put in it, the log is the
kernel's own output, kernel names come from the source, and a runner's messages name its paths.
So anyone else sees a summary built by the site from fixed words only:

- the status and evaluator status, an **error kind** from a fixed vocabulary (``ERROR_KINDS``), the
  **failing shape** (a shape id of the catalogue) and, for a rejection, the **exploit class**;
- the report with every figure kept and every string dropped that is not one of the report's
  fixed vocabularies (``public_report``: an allow-list, so a field added later stays private until
  someone decides otherwise).

The owner, staff, and everyone once the owner makes the submission public, see it all.
"""

from __future__ import annotations

import re
from typing import Any

from evaluator.vocabulary import Status, Verdict

#: The error kinds a public summary may name, in the order they are tried.
ERROR_KINDS = ("syntax_error", "import_error", "no_kernel", "build_error", "wrong_language", "runtime_error",
               "wrong_output", "wrong_shape", "wrong_dtype", "timeout", "rejected", "site_refused",
               "infrastructure", "cancelled")
PRIVATE_DETAILS = "the details (messages, compiler output, tracebacks, logs) are shown to its owner only"
_CLASS = re.compile(r"\bclass (\d{1,2})\b")
#: Report strings that come from fixed vocabularies (statuses, shape ids, device facts...), by key.
_PUBLIC_STRINGS = frozenset(
    {
        "harness_version",
        "problem",
        "language",
        "mode",
        "status",
        "started_at",
        "finished_at",
        "kind",
        "gpu_type",
        "compute_capability",
        "driver",
        "cuda_runtime",
        "torch_version",
        "shape_id",
        "trial",
        "distribution",
        "method",
        "bound",
        "tool",
        "evidence_level",
        "arch",
        "grid",
        "block",
        "ranked_source",
        "flags",
        "notes",
        "required",
        "missing",
        "throttle_reasons",
        "output",
    }
)
#: The same, where the key alone is ambiguous: (key, the key of the object that holds it).
_PUBLIC_PAIRS = frozenset({("name", "device"), ("reason", "top_stalls"), ("message", "witness"),
                           ("source", "witness")})
#: Objects of the report that are nobody else's business at all (the runner's sandbox: its paths).
_PRIVATE_OBJECTS = frozenset({"sandbox", "log", "artifact"})


def may_see_details(user: Any, submission: Any) -> bool:
    """The owner and staff always; anyone once the owner made the submission public."""
    if submission.public:
        return True
    return bool(
        user is not None and user.is_authenticated and (user.is_staff or user.pk == submission.user_id)
    )


def error_kind(status: str, evaluator_status: str, message: str) -> str | None:
    """One word of ``ERROR_KINDS`` for a failed evaluation (None when it passed or is not over)."""
    text = message.lower()
    by_evaluator: dict[str, str] = {
        Status.RUNTIME_ERROR: "runtime_error",
        Status.INCORRECT_NUMERICAL: "wrong_output",
        Status.INCORRECT_SHAPE: "wrong_shape",
        Status.INCORRECT_DTYPE: "wrong_dtype",
        Status.TIMEOUT: "timeout",
        Status.REJECTED: "rejected",
    }
    if status == "cancelled":
        return "cancelled"
    if text.startswith("the site refused"):
        return "site_refused"
    if evaluator_status == Status.COMPILE_ERROR:
        return _compile_kind(text)
    if evaluator_status in by_evaluator:
        return by_evaluator[evaluator_status]
    if status in ("error", "timeout", "rejected", "failed"):
        return "infrastructure" if status == "error" else {"timeout": "timeout", "rejected": "rejected",
                                                           "failed": "wrong_output"}[status]
    return None


def _compile_kind(text: str) -> str:
    for needle, kind in (("syntax error", "syntax_error"), ("import failed", "import_error"),
                         ("defines no callable", "no_kernel"), ("does not accept", "wrong_language"),
                         ("not available on this runner", "wrong_language")):
        if needle in text:
            return kind
    return "build_error"


def exploit_class(message: str) -> int | None:
    """The exploit class a rejection names (docs/security.md lists them), if any."""
    found = _CLASS.search(message)
    return int(found.group(1)) if found and 1 <= int(found.group(1)) <= 19 else None


def failing_shape(report: dict[str, Any] | None) -> str | None:
    for shape in (report or {}).get("shapes", []):
        if shape.get("status") not in (None, Status.PASSED) and isinstance(shape.get("shape_id"), str):
            return str(shape["shape_id"])
    return None


def public_summary(
    status: str, evaluator_status: str, message: str, report: dict[str, Any] | None
) -> dict[str, Any]:
    """The fixed-vocabulary facts of a result that anyone may read."""
    kind = error_kind(status, evaluator_status, message)
    return {"error_kind": kind, "failing_shape": failing_shape(report) if kind else None,
            "exploit_class": exploit_class(message) if kind in ("rejected", "site_refused") else None}


#: Kinds that say no more than the status itself.
_SAME_AS_STATUS = frozenset({"rejected", "timeout", "cancelled"})


def public_reason(status: str, evaluator_status: str, message: str, report: dict[str, Any] | None) -> str:
    """The summary's words: ``import error``, ``wrong output, first on shape n1024``, ``exploit
    class 16``... ('' for a result without an error)."""
    facts = public_summary(status, evaluator_status, message, report)
    if facts["error_kind"] is None:
        return ""
    words = [] if facts["error_kind"] in _SAME_AS_STATUS else [str(facts["error_kind"]).replace("_", " ")]
    if facts["failing_shape"]:
        words.append(f"first on shape {facts['failing_shape']}")
    if facts["exploit_class"]:
        words.append(f"exploit class {facts['exploit_class']}")
    return ", ".join(words)


def public_message(status: str, evaluator_status: str, message: str, report: dict[str, Any] | None) -> str:
    """A message built from the summary's words only ('' for a result without an error)."""
    if error_kind(status, evaluator_status, message) is None:
        return ""
    reason = public_reason(status, evaluator_status, message, report)
    return f"{evaluator_status or status}{f': {reason}' if reason else ''}; {PRIVATE_DETAILS}"


def public_shape_message(status: str, message: str) -> str:
    if status in (Status.PASSED, Verdict.PASSED) or not message:
        return ""
    return f"{status}; {PRIVATE_DETAILS}"


def public_report(report: dict[str, Any] | None) -> dict[str, Any] | None:
    """The report with every number kept and only fixed-vocabulary strings (``_PUBLIC_STRINGS``);
    the top-level and per-shape messages become the public summary's words."""
    if report is None:
        return None
    public: dict[str, Any] = _keep(report, "", "")
    public["message"] = public_message(str(report.get("status", "")), str(report.get("status", "")),
                                       str(report.get("message", "")), report)
    for shape, original in zip(public.get("shapes", []), report.get("shapes", []), strict=False):
        shape["message"] = public_shape_message(
            str(original.get("status", "")), str(original.get("message", ""))
        )
    return public


def _keep(value: Any, key: str, holder: str) -> Any:
    if isinstance(value, dict):
        return {
            name: ({} if name == "sandbox" else "" if name in _PRIVATE_OBJECTS else _keep(item, name, key))
            for name, item in value.items()
        }
    if isinstance(value, list):
        return [_keep(item, key, holder) for item in value]
    if isinstance(value, str):
        return value if key in _PUBLIC_STRINGS or (key, holder) in _PUBLIC_PAIRS else ""
    return value


def public_evidence(evidence: dict[str, Any] | None) -> dict[str, Any]:
    """A PTX/CUDA upload's static evidence without what quotes the source: the compilers'
    warnings and the kernels' names (the resources and instruction families stay)."""
    if not evidence:
        return {}
    archs = {}
    for arch, found in (evidence.get("archs") or {}).items():
        kernels = [
            {**kernel, "name": f"kernel {index + 1}"} for index, kernel in enumerate(found.get("kernels", []))
        ]
        warnings = [{**warning, "message": ""} for warning in found.get("warnings", [])]
        archs[arch] = {**found, "entry": "", "kernels": kernels, "warnings": warnings}
    return {**evidence, "archs": archs}
