"""Task success as a proportion: the Wilson interval and success against gold completeness."""

from __future__ import annotations

import math

import pytest
from scipy.stats import binomtest

from primsel.eval.success import success_by_coverage, wilson_interval


def test_wilson_interval_is_the_score_interval():
    # 2 of 32: centre (p + z^2/2n) / (1 + z^2/n), half-width z sqrt(p(1-p)/n + z^2/4n^2) / (1 + z^2/n)
    z, n, p = 1.959963984540054, 32, 2 / 32
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    assert wilson_interval(2, 32) == pytest.approx((centre - half, centre + half), abs=1e-12)


@pytest.mark.parametrize("k,n", [(0, 20), (3, 20), (20, 20), (45, 250), (1, 1)])
def test_wilson_interval_matches_scipy(k, n):
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    low, high = wilson_interval(k, n)
    assert low == pytest.approx(ci.low, abs=1e-9)
    assert high == pytest.approx(ci.high, abs=1e-9)


@pytest.mark.parametrize("k,n", [(-1, 5), (6, 5), (0, 0)])
def test_wilson_interval_refuses_impossible_counts(k, n):
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(k, n)


def _row(recall, passed):
    return {"status": "pass" if passed else "fail", "metrics": {"set_recall": recall}}


def test_success_by_coverage_counts_both_groups_and_tests_them():
    rows = ([_row(1.0, True)] * 3 + [_row(1.0, False)]            # complete: 3 of 4 pass
            + [_row(0.5, True)] + [_row(0.8, False)] * 5             # incomplete: 1 of 6 pass
            + [{"status": "pass", "metrics": {}}])                   # no recall: in neither group
    out = success_by_coverage(rows)
    assert out["complete"] == (4, 3)
    assert out["incomplete"] == (6, 1)
    # hypergeometric tables with margins 4 / 6 and 4 passes: P(a) = C(4,a) C(6,4-a) / C(10,4);
    # the observed a = 3 has 24/210; tables as or less likely: a = 3 (24), 4 (1), 0 (15)
    assert out["p_fisher"] == pytest.approx(40 / 210, rel=1e-9)


def test_success_by_coverage_without_one_group_has_no_test():
    out = success_by_coverage([_row(1.0, True), _row(1.0, False)])
    assert out == {"complete": (2, 1), "incomplete": (0, 0), "p_fisher": None}
