"""PTX and CUDA C++ submissions: launch spec, validation with ptxas, feature evidence, launch.

``validate_upload`` needs no GPU and no torch (the site calls it); ``loader.load_native_kernel``
is the harness's entry point on a GPU runner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evaluator.ptx.models import UploadValidation

__all__ = ["validate_upload"]


def validate_upload(
    language: str, source: str, launch_spec: str | None, problem: Any = None, archs: list[str] | None = None,
    limits: Any = None,
) -> UploadValidation:
    """See :func:`evaluator.ptx.validate.validate_upload` (imported lazily: no CUDA needed)."""
    from evaluator.ptx.validate import validate_upload as _validate

    return _validate(language, source, launch_spec, problem, archs, limits)
