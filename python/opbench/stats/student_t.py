"""Student's t distribution: the two-sided tail probability and its inverse.

What ``opbench.stats.decide.runs`` needs for its t intervals and p-values, without
scipy: the tail is the regularized incomplete beta function
``I_x(df / 2, 1 / 2)`` at ``x = df / (df + t^2)``, evaluated by its continued
fraction (modified Lentz, as in Press et al., *Numerical Recipes*, 6.4); the
quantile inverts it by bisection.

Example:
    >>> round(two_sided_quantile(0.95, 10), 4)  # the familiar 2.228
    2.2281
    >>> round(two_sided_p(2.2281, 10), 4)
    0.05
"""
from __future__ import annotations

import math

__all__ = ["two_sided_p", "two_sided_quantile"]


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1, a - 1
    c, d = 1.0, 1 - qab * x / qap
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                   -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1 + aa * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h


def two_sided_p(t: float, df: float) -> float:
    """Two-sided tail probability P(|T| > |t|) of Student's t with ``df`` degrees."""
    if math.isinf(t):
        return 0.0
    x = df / (df + t * t)
    a, b = df / 2, 0.5
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x)) if 0 < x < 1 else 0.0
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    if x < (a + 1) / (a + b + 2):
        return min(1.0, front * _betacf(a, b, x) / a)
    return min(1.0, 1 - front * _betacf(b, a, 1 - x) / b)


def two_sided_quantile(level: float, df: float) -> float:
    """``q`` with P(|T| <= q) = ``level`` (bisection on the tail; exact to 1e-12)."""
    lo, hi = 0.0, 1.0
    while two_sided_p(hi, df) > 1 - level:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if two_sided_p(mid, df) > 1 - level:
            lo = mid
        else:
            hi = mid
    return hi
