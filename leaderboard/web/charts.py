"""Geometry of the SVG charts (pure functions; the templates only draw what these return).

- ``history_chart``: the record line (best score so far, a step line) and each leader's own
  best-so-far trend, score against submission time.
- ``roofline_chart``: a GPU's memory roof (TFLOP/s = intensity x HBM bandwidth) and compute roof
  (peak TFLOP/s of the problem's flop class), log-log, with the shapes as points.

Charts are drawn server-side so that they read without JavaScript; each comes with a text
equivalent in the page (a table), for screen readers and for exact figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime

WIDTH, HEIGHT = 640, 300
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 56, 24, 30, 40
#: Below this span the time axis is labelled with hours and minutes, above it with dates.
DATE_ONLY_SPAN_S = 3 * 86400


@dataclass(frozen=True)
class Scale:
    """Maps [low, high] onto [start, end] pixels, linearly or in log10."""

    low: float
    high: float
    start: float
    end: float
    log: bool = False

    def __call__(self, value: float) -> float:
        low, high, value = (math.log10(self.low), math.log10(self.high), math.log10(value)) if self.log \
            else (self.low, self.high, value)
        fraction = 0.5 if high == low else (value - low) / (high - low)
        return round(self.start + fraction * (self.end - self.start), 1)


@dataclass(frozen=True)
class Tick:
    at: float
    label: str
    anchor: str = "middle"  # SVG text-anchor: the axis's last label ends at its tick, inside the chart


@dataclass(frozen=True)
class Marker:
    x: float
    y: float
    label: str


@dataclass(frozen=True)
class Series:
    name: str
    css_class: str
    points: str  # an SVG polyline "x,y x,y ..."
    markers: list[Marker] = field(default_factory=list)


@dataclass(frozen=True)
class Chart:
    series: list[Series]
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    x_label: str
    y_label: str
    width: int = WIDTH
    height: int = HEIGHT
    left: int = MARGIN_LEFT
    top: int = MARGIN_TOP
    right: int = WIDTH - MARGIN_RIGHT
    bottom: int = HEIGHT - MARGIN_BOTTOM

    @property
    def trend_names(self) -> list[str]:
        """Names of the dashed lines (every series but the record and the roofs)."""
        return [series.name for series in self.series if series.css_class.startswith("trend")]


def _x_scale(low: float, high: float, log: bool = False) -> Scale:
    return Scale(low, high, MARGIN_LEFT, WIDTH - MARGIN_RIGHT, log)


def _y_scale(low: float, high: float, log: bool = False) -> Scale:
    return Scale(low, high, HEIGHT - MARGIN_BOTTOM, MARGIN_TOP, log)


def _polyline(points: list[tuple[float, float]]) -> str:
    return " ".join(f"{x},{y}" for x, y in points)


# ---------------------------------------------------------------- score history


@dataclass(frozen=True)
class ScorePoint:
    at: datetime
    score: float
    label: str


def running_best(points: list[ScorePoint]) -> list[ScorePoint]:
    """The points that raised the best score so far (time order): the records."""
    records: list[ScorePoint] = []
    for point in sorted(points, key=lambda p: p.at):
        if not records or point.score > records[-1].score:
            records.append(point)
    return records


def _step_points(records: list[ScorePoint], until: datetime, x: Scale, y: Scale) -> list[tuple[float, float]]:
    points: list[tuple[float, float]] = []
    for index, record in enumerate(records):
        if index:
            points.append((x(record.at.timestamp()), y(records[index - 1].score)))
        points.append((x(record.at.timestamp()), y(record.score)))
    points.append((x(until.timestamp()), y(records[-1].score)))
    return points


def history_chart(
    records: list[ScorePoint], trends: dict[str, list[ScorePoint]], now: datetime
) -> Chart | None:
    """Record line plus one best-so-far line per user in ``trends``; None when nothing ranked yet."""
    if not records:
        return None
    every = records + [point for points in trends.values() for point in points]
    start = min(point.at for point in every).timestamp()
    x, y = _x_scale(start, max(now.timestamp(), start + 1)), _y_scale(0.0, 1.0)
    # The record first: each user's dashed line is drawn over it, so the record holder's own line,
    # which runs along the record, stays visible.
    series = [Series("record", "record", _polyline(_step_points(records, now, x, y)),
                     [Marker(x(r.at.timestamp()), y(r.score), f"{r.label}: {r.score:.3f}") for r in records])]
    series += [Series(f"{user}'s best", f"trend trend-{index % 5}",
                      _polyline(_step_points(running_best(points), now, x, y)))
               for index, (user, points) in enumerate(trends.items()) if points]
    span = now.timestamp() - start
    label = "%Y-%m-%d" if span >= DATE_ONLY_SPAN_S else "%m-%d %H:%M"
    x_ticks = [
        Tick(
            x(start + span * i / 4),
            datetime.fromtimestamp(start + span * i / 4, tz=now.tzinfo).strftime(label),
            "end" if i == 4 else "start" if i == 0 else "middle",
        )
        for i in range(5)
    ]
    y_ticks = [Tick(y(value), f"{value:.2f}") for value in (0.0, 0.25, 0.5, 0.75, 1.0)]
    return Chart(series, x_ticks, y_ticks, "submitted", "score S")


# ---------------------------------------------------------------- roofline


@dataclass(frozen=True)
class RooflinePoint:
    label: str
    intensity: float  # flop per byte
    tflops: float


def _decade_ticks(low: float, high: float, scale: Scale, unit: str = "") -> list[Tick]:
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    ticks = [Tick(scale(10.0 ** power), f"{10.0 ** power:g}{unit}") for power in range(first, last + 1)
             if low <= 10.0 ** power <= high]
    if ticks and ticks[-1].at >= WIDTH - MARGIN_RIGHT:  # the x axis's last label: inside the chart
        ticks[-1] = Tick(ticks[-1].at, ticks[-1].label, "end")
    return ticks


def roofline_chart(points: list[RooflinePoint], peak_tflops: float, hbm_tbps: float) -> Chart | None:
    """Memory roof ``intensity x TB/s`` up to the ridge, then the compute roof; None without points."""
    shown = [point for point in points if point.intensity > 0 and point.tflops > 0]
    if not shown or peak_tflops <= 0 or hbm_tbps <= 0:
        return None
    ridge = peak_tflops / hbm_tbps  # flop/byte where the two roofs meet
    x_low = 10.0 ** math.floor(math.log10(min(ridge, *(p.intensity for p in shown)) / 2))
    x_high = 10.0 ** math.ceil(math.log10(max(ridge, *(p.intensity for p in shown)) * 2))
    y_low = 10.0 ** math.floor(math.log10(min(x_low * hbm_tbps, *(p.tflops for p in shown))))
    y_high = 10.0 ** math.ceil(math.log10(max(peak_tflops, *(p.tflops for p in shown)) * 1.2))
    x, y = _x_scale(x_low, x_high, log=True), _y_scale(y_low, y_high, log=True)
    roof = Series("roof", "roof", _polyline([(x(x_low), y(x_low * hbm_tbps)), (x(ridge), y(peak_tflops)),
                                              (x(x_high), y(peak_tflops))]))
    shapes = Series(
        "shapes",
        "shapes",
        "",
        [
            Marker(
                x(p.intensity), y(p.tflops), f"{p.label}: {p.tflops:.3g} TFLOP/s at {p.intensity:.3g} flop/B"
            )
            for p in shown
        ],
    )
    return Chart([roof, shapes], _decade_ticks(x_low, x_high, x), _decade_ticks(y_low, y_high, y),
                 "arithmetic intensity (flop/byte)", "TFLOP/s")
