"""Paired significance tests between two configurations scored on the same tasks, and the
bootstrap interval of a mean over tasks (:func:`bootstrap_interval`, Efron and Tibshirani 1993,
"An Introduction to the Bootstrap", percentile method).

Both tests take two equally long sequences of per-task scores (``a[i]`` and ``b[i]`` belong to
the same task) and return a two-sided p-value for "the mean per-task difference is zero".

* :func:`paired_t_test`: Student's paired t-test (``scipy.stats.ttest_rel``, computed as
  ``scipy.stats.ttest_1samp`` of the differences).
* :func:`randomisation_test`: the paired randomisation (sign-flip permutation) test: under the
  null hypothesis the sign of each per-task difference is arbitrary, so the observed mean
  difference is compared with the mean differences of all (or ``n_resamples`` random) sign
  flips. Exact when there are at most ``n_resamples`` distinct flips. See Smucker, Allan and
  Carterette (2007), "A comparison of statistical significance tests for information retrieval
  evaluation", CIKM, and Fisher (1935), The Design of Experiments.

Both tests see the same differences: a per-task difference within float rounding of zero
(``|a[i] - b[i]| <= NOISE * max(1, |a[i]|, |b[i]|)``, e.g. 5.6e-17 between two sums of the same
terms in another order) is taken as zero. When every difference is zero both tests return
p = 1 (scipy would return NaN for the t-test, and a t-test on 5.6e-17 everywhere gives 0).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

import numpy as np

#: Default number of random sign flips of :func:`randomisation_test`.
N_RESAMPLES = 10_000
#: Default number of resamples of :func:`bootstrap_interval`.
N_BOOTSTRAP = 2000
#: Relative tolerance of both tests: a per-task difference within ``NOISE * max(1, |a|, |b|)``
#: of zero is zero, and a resampled statistic within ``NOISE * max(1, observed)`` of the
#: observed one counts as "at least as extreme".
NOISE = 1e-12
_TOLERANCE = NOISE


def _differences(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError("paired scores must be one-dimensional sequences")
    if x.shape != y.shape:
        raise ValueError(f"paired scores differ in length: {x.size} and {y.size}")
    if x.size == 0:
        raise ValueError("paired scores are empty")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("paired scores contain NaN or infinite values")
    d = x - y
    scale = np.maximum(1.0, np.maximum(np.abs(x), np.abs(y)))
    return np.where(np.abs(d) <= NOISE * scale, 0.0, d)


def paired_t_test(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Student's paired t-test (Student, 1908).

    Parameters
    ----------
    a, b : per-task scores of two configurations, same length n >= 1, ``a[i]`` and ``b[i]``
        from the same task.

    Returns
    -------
    float in [0, 1]: 1.0 when every difference is zero (within :data:`NOISE`); with n = 1 (no variance estimate) and a
    non-zero difference, 1.0 as well (no evidence); otherwise ``scipy.stats.ttest_1samp(a - b, 0).pvalue`` (the same as
    ``scipy.stats.ttest_rel(a, b)``) over the differences with noise set to zero.
    When the differences are all equal and non-zero (zero variance) the p-value is 0.0.

    Raises
    ------
    ValueError : different lengths, empty input, NaN or infinite scores.
    """
    d = _differences(a, b)
    if not np.any(d):
        return 1.0
    if d.size < 2:
        return 1.0
    if np.all(d == d[0]):
        return 0.0
    from scipy import stats

    return float(stats.ttest_1samp(d, 0.0).pvalue)


def randomisation_test(
    a: Sequence[float], b: Sequence[float], n_resamples: int = N_RESAMPLES, seed: int = 0
) -> float:
    """Two-sided p-value of the paired randomisation (sign-flip permutation) test.

    The statistic is the mean per-task difference ``mean(a - b)``. Each resample multiplies
    every difference by an independent random sign; the p-value is the fraction of resamples
    whose ``|mean|`` is at least the observed ``|mean|``. Tasks with a zero difference do not
    change the statistic and are left out of the enumeration. When the m non-zero differences
    have ``2**m <= n_resamples`` sign patterns, all of them are enumerated and the p-value is
    exact (``count / 2**m``); otherwise ``n_resamples`` patterns are drawn with
    ``numpy.random.default_rng(seed)`` and the p-value is ``(count + 1) / (n_resamples + 1)``
    (the observed pattern counted once, so p > 0). Fisher (1935); Smucker et al. (2007).

    Parameters
    ----------
    a, b : per-task scores of two configurations, same length n >= 1, paired by position.
    n_resamples : number of random sign patterns, >= 1.
    seed : seed of the random sign patterns (unused when the test is exact).

    Returns
    -------
    float in (0, 1]; 1.0 when every difference is zero (within :data:`NOISE`).

    Raises
    ------
    ValueError : different lengths, empty input, NaN or infinite scores, n_resamples < 1.
    """
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise ValueError(f"n_resamples must be an integer >= 1, got {n_resamples!r}")
    d = _differences(a, b)
    d = d[d != 0]
    if d.size == 0:
        return 1.0
    observed = abs(d.sum())
    threshold = observed - _TOLERANCE * max(1.0, observed)
    m = d.size
    if m < 63 and 2**m <= n_resamples:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=m)))
        count = int(np.sum(np.abs(signs @ d) >= threshold))
        return count / 2**m
    rng = np.random.default_rng(seed)
    count = 0
    batch = 2048
    done = 0
    while done < n_resamples:
        size = min(batch, n_resamples - done)
        signs = rng.choice((-1.0, 1.0), size=(size, m))
        count += int(np.sum(np.abs(signs @ d) >= threshold))
        done += size
    return (count + 1) / (n_resamples + 1)


def compare(
    a: Mapping[str, float],
    b: Mapping[str, float],
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> dict[str, float]:
    """Paired tests of two configurations' per-task scores, matched by task id.

    Parameters
    ----------
    a, b : task id -> score; both must hold the same task ids.
    n_resamples, seed : see :func:`randomisation_test`.

    Returns
    -------
    ``{"n": tasks, "mean_a", "mean_b", "mean_diff" (a - b), "p_t" (paired t-test),
    "p_randomisation"}``.

    Raises
    ------
    ValueError : no tasks, or the task ids differ (the message gives a few of the unmatched
        ids), or see the tests.
    """
    if set(a) != set(b):
        only = sorted(set(a) ^ set(b))
        raise ValueError(f"per-task scores cover different tasks, e.g. {only[:5]}")
    if not a:
        raise ValueError("paired scores are empty")
    ids = sorted(a)
    x = [float(a[i]) for i in ids]
    y = [float(b[i]) for i in ids]
    n = len(ids)
    return {
        "n": n,
        "mean_a": math.fsum(x) / n,
        "mean_b": math.fsum(y) / n,
        "mean_diff": (math.fsum(x) - math.fsum(y)) / n,
        "p_t": paired_t_test(x, y),
        "p_randomisation": randomisation_test(x, y, n_resamples=n_resamples, seed=seed),
    }


def bootstrap_interval(values: Sequence[float] | np.ndarray, n_resamples: int = N_BOOTSTRAP, seed: int = 0,
                       confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval of the mean over tasks (``scipy.stats.bootstrap``) of ``values``,
    shape ``(n_tasks,)`` or ``(n_tasks, n_points)`` (one interval per column, the same resampled tasks
    for each). Returns (low, high) of shape ``()`` or ``(n_points,)``, both the mean for one task or
    constant values. ValueError: no tasks, or values not finite."""
    from scipy import stats

    data = np.asarray(values, dtype=float)
    if data.ndim not in (1, 2) or data.shape[0] == 0:
        raise ValueError("bootstrap needs per-task values of shape (n_tasks,) or (n_tasks, n_points), "
                         f"got {data.shape}")
    if not np.all(np.isfinite(data)):
        raise ValueError("bootstrap values contain NaN or infinite values")
    mean = data.mean(axis=0)
    if data.shape[0] == 1:
        return mean, mean
    low, high = stats.bootstrap((data,), np.mean, axis=0, vectorized=True, n_resamples=n_resamples,
                                confidence_level=confidence, method="percentile", random_state=seed).confidence_interval
    constant = np.ptp(data, axis=0) == 0  # every resample has the same mean: keep it exact
    return np.where(constant, mean, low), np.where(constant, mean, high)
