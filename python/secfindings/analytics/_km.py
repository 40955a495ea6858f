"""The Kaplan-Meier estimator from counts per time: the database counts, per group and time,
the findings fixed then and those still open (censored) then; this module turns those few rows
into the survival curve, Greenwood's variance and the percentiles with their intervals (the
same exponential Greenwood / log(-log) interval as ``lifelines``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

__all__ = ["Curve", "kaplan_meier", "quantile", "z_value"]


def z_value(alpha: float) -> float:
    """The two-sided normal quantile for a ``1 - alpha`` interval."""
    return NormalDist().inv_cdf(1 - alpha / 2)


@dataclass
class Curve:
    """One group's curve: at each time (days) the findings at risk, fixed and censored, and the
    survival (share not yet fixed) with its interval."""

    times: list[float] = field(default_factory=list)
    at_risk: list[int] = field(default_factory=list)
    fixed: list[int] = field(default_factory=list)
    censored: list[int] = field(default_factory=list)
    survival: list[float] = field(default_factory=list)
    low: list[float] = field(default_factory=list)
    high: list[float] = field(default_factory=list)


def kaplan_meier(
    times: Sequence[float], fixed: Sequence[int], censored: Sequence[int], alpha: float = 0.05
) -> Curve:
    """The curve from counts at distinct ``times`` in ascending order. At a time with both, the
    fixes come first and the censored are still at risk then (the usual convention)."""
    z = z_value(alpha)
    n = int(sum(fixed) + sum(censored))
    curve = Curve()
    s = 1.0
    greenwood = 0.0
    for t, d, c in zip(times, fixed, censored, strict=True):
        d, c = int(d), int(c)
        if n > 0 and d > 0:
            s *= 1.0 - d / n
            greenwood = greenwood + d / (n * (n - d)) if n > d else math.inf
        low, high = _interval(s, greenwood, z)
        curve.times.append(float(t))
        curve.at_risk.append(n)
        curve.fixed.append(d)
        curve.censored.append(c)
        curve.survival.append(s)
        curve.low.append(low)
        curve.high.append(high)
        n -= d + c
    return curve


def _interval(s: float, greenwood: float, z: float) -> tuple[float, float]:
    """The exponential Greenwood interval (log(-log S)), as lifelines computes it."""
    if s >= 1.0 or greenwood == 0.0:
        return 1.0, 1.0
    if s <= 0.0 or math.isinf(greenwood):
        return 0.0, 0.0
    v = math.log(s)
    spread = z * math.sqrt(greenwood) / v
    low = math.exp(-math.exp(math.log(-v) - spread))
    high = math.exp(-math.exp(math.log(-v) + spread))
    return min(low, high), max(low, high)


def quantile(times: Sequence[float], survival: Sequence[float], fraction_fixed: float) -> float | None:
    """The first time by which ``fraction_fixed`` of the findings are fixed (the survival has
    fallen to ``1 - fraction_fixed``), or None where the curve never gets there (too many are
    still open)."""
    target = 1.0 - fraction_fixed
    for t, s in zip(times, survival, strict=True):
        if s <= target + 1e-12:
            return t
    return None
