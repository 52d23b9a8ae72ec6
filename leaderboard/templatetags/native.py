"""The native-ABI panel's data for templates (``{% load native %}``): a problem's generated
description (leaderboard/web/native_abi.py) and the languages every active problem takes."""

from __future__ import annotations

from typing import Any

from django import template

from evaluator.ptx.native_abi import NativeAbi
from leaderboard.models import Problem
from leaderboard.web.native_abi import native_abi_of

register = template.Library()


@register.simple_tag
def native_abi(problem: Problem | str | None) -> NativeAbi | None:
    """``{% native_abi problem as abi %}``: a Problem row, or an active problem's name (an upload
    form's choice); None when there is no such problem."""
    if isinstance(problem, str):
        problem = Problem.objects.filter(name=problem, active=True).first()
    return native_abi_of(problem) if isinstance(problem, Problem) else None


@register.simple_tag
def problems_by_language() -> list[dict[str, Any]]:
    """``{% problems_by_language as rows %}``: name, title and languages of every active problem."""
    rows = Problem.objects.filter(active=True).order_by("name").values("name", "title", "languages", "kind")
    return list(rows)
