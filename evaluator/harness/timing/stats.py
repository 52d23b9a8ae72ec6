"""Summary statistics of repeated timings: median with an order-statistics confidence interval.

Pure Python on lists of floats; no numpy, so the child can bind these functions before the
submission is imported and nothing the submission patches in numpy reaches them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Two-sided 95% normal quantile, for the binomial approximation of the median's CI.
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Summary:
    median: float
    mean: float
    minimum: float
    maximum: float
    std: float
    n: int
    ci_low: float
    ci_high: float

    @property
    def half_width_rel(self) -> float:
        """Half-width of the CI over the median (inf when undefined)."""
        if self.median <= 0 or self.n < 2:
            return math.inf
        return (self.ci_high - self.ci_low) / 2.0 / self.median


def median_of_sorted(values: list[float]) -> float:
    n = len(values)
    mid = n // 2
    return values[mid] if n % 2 else (values[mid - 1] + values[mid]) / 2.0


def median_ci_ranks(n: int) -> tuple[int, int]:
    """0-based ranks (low, high) of the distribution-free 95% CI of the median.

    The number of samples below the median is Binomial(n, 1/2); its normal approximation gives
    ranks n/2 -+ z*sqrt(n)/2. Exact enough from n = 10; below that the CI is the full range.
    """
    if n < 10:
        return 0, max(n - 1, 0)
    half = Z95 * math.sqrt(n) / 2.0
    low = max(math.floor(n / 2.0 - half) - 1, 0)
    high = min(math.ceil(n / 2.0 + half), n - 1)
    return low, high


def summarize(samples: list[float]) -> Summary:
    if not samples:
        raise ValueError("no samples to summarize")
    ordered = sorted(samples)
    n = len(ordered)
    mean = sum(ordered) / n
    variance = sum((x - mean) ** 2 for x in ordered) / (n - 1) if n > 1 else 0.0
    low, high = median_ci_ranks(n)
    return Summary(
        median=median_of_sorted(ordered),
        mean=mean,
        minimum=ordered[0],
        maximum=ordered[-1],
        std=math.sqrt(variance),
        n=n,
        ci_low=ordered[low],
        ci_high=ordered[high],
    )


def converged(summary: Summary, target_rel: float, min_samples: int) -> bool:
    return summary.n >= min_samples and summary.half_width_rel <= target_rel
