"""A problem's native ABI as the site shows it (problem page, upload form, API, CLI), generated from
the database's mirror of the catalogue by the evaluator's own generator (evaluator/ptx/native_abi.py),
so the page, the API and ``check-ptx`` never disagree about a kernel's parameters."""

from __future__ import annotations

from typing import Any

from evaluator.ptx.native_abi import NativeAbi, NativeAbiInput, describe
from leaderboard.models import Problem

#: (problem id, catalogue digest) -> description: a new catalogue content gets a new entry.
_DESCRIPTIONS: dict[tuple[int, str], NativeAbi] = {}
_MAX_ENTRIES = 512


def native_abi_of(problem: Problem) -> NativeAbi:
    """The description of one mirrored problem; computed once per catalogue content."""
    key = (problem.pk, problem.catalogue_sha256)
    found = _DESCRIPTIONS.get(key)
    if found is None:
        if len(_DESCRIPTIONS) >= _MAX_ENTRIES:
            _DESCRIPTIONS.clear()
        found = _DESCRIPTIONS[key] = _describe(problem)
    return found


def native_abi_body(problem: Problem) -> dict[str, Any]:
    """The API's ``native_abi`` field."""
    return native_abi_of(problem).to_dict()


def _describe(problem: Problem) -> NativeAbi:
    shapes = [shape.axes for shape in problem.shapes.all() if shape.active]
    return describe(NativeAbiInput(
        name=problem.name, kind=problem.kind, axes=list(problem.axes), inputs=list(problem.inputs),
        outputs=list(problem.outputs), languages=list(problem.languages), ptx=dict(problem.ptx_abi or {}),
        required_features=dict(problem.required_features or {}), shapes=shapes,
    ))
