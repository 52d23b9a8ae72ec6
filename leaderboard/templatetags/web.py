"""Number formats of the website: times, scores, ratios, throughputs (``{% load web %}``)."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()
DASH = "—"


def _number(value: Any) -> float | None:
    try:
        return None if value is None or value == "" else float(value)
    except (TypeError, ValueError):
        return None


@register.filter
def us(value: Any) -> str:
    """A time in microseconds, three significant figures, in ms or s when large."""
    number = _number(value)
    if number is None:
        return DASH
    if abs(number) >= 1e6:
        return f"{number / 1e6:.3g} s"
    if abs(number) >= 1e4:
        return f"{number / 1e3:.3g} ms"
    return f"{number:.3g} µs" if abs(number) < 100 else f"{number:.0f} µs"


@register.filter
def score(value: Any) -> str:
    number = _number(value)
    return DASH if number is None else f"{number:.4f}"


@register.filter
def times(value: Any) -> str:
    """A ratio such as a speedup: 1.23×."""
    number = _number(value)
    return DASH if number is None else f"{number:.2f}×"


@register.filter
def percent(value: Any) -> str:
    """A fraction (0.5) as a percentage (50.0%)."""
    number = _number(value)
    return DASH if number is None else f"{number * 100:.1f}%"


@register.filter
def sig(value: Any, digits: int = 3) -> str:
    number = _number(value)
    return DASH if number is None else f"{number:.{int(digits)}g}"


@register.filter
def get(mapping: Any, key: Any) -> Any:
    """``mapping|get:key`` for dictionaries keyed by something a template cannot spell."""
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.filter
def tera(value: Any) -> str:
    """Bytes (or flop) per second as T…/s with three significant figures: 4.8e12 -> 4.8."""
    number = _number(value)
    return DASH if number is None else f"{number / 1e12:.3g}"
