"""Exceptions the harness maps to a status.

``CompileError`` -> COMPILE_ERROR (the source does not assemble/compile, the launch spec is wrong,
the entry or its parameters do not match). ``LaunchError`` -> RUNTIME_ERROR, with the driver's own
name and text for the error (cuGetErrorName / cuGetErrorString).
"""

from __future__ import annotations


class PtxError(Exception):
    """Base class: the message is shown to the submitter verbatim."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CompileError(PtxError):
    """The submission cannot be turned into a launchable kernel."""


class SpecError(CompileError):
    """The launch spec is malformed or does not fit the kernel or the problem."""


class ToolchainError(PtxError):
    """A CUDA tool (ptxas, nvcc, cuobjdump) is missing here: the evaluator's fault, not the user's."""


class LaunchError(PtxError):
    """A CUDA driver call failed while loading or launching the kernel."""
