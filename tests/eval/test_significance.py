"""Paired significance tests: hand-computed cases and parity with scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from primsel.eval.significance import compare, paired_t_test, randomisation_test


def test_identical_inputs_give_p_one():
    scores = [0.2, 0.5, 1.0, 0.0]
    assert paired_t_test(scores, scores) == 1.0
    assert randomisation_test(scores, scores) == 1.0


def test_t_test_hand_computed_df2():
    # d = [1, 2, 3]: mean 2, sd 1, t = 2 / (1 / sqrt(3)) = sqrt(12); with df = 2 the
    # two-sided p-value of Student's t is 1 - t / sqrt(t^2 + 2).
    t = math.sqrt(12)
    assert paired_t_test([1, 2, 3], [0, 0, 0]) == pytest.approx(1 - t / math.sqrt(t * t + 2))


def test_t_test_matches_scipy_on_random_scores():
    rng = np.random.default_rng(7)
    a, b = rng.random(40), rng.random(40)
    assert paired_t_test(a, b) == pytest.approx(stats.ttest_rel(a, b).pvalue)


def test_t_test_constant_nonzero_difference_is_zero():
    assert paired_t_test([1, 2, 3], [0, 1, 2]) == 0.0


def test_randomisation_exact_two_differences():
    # non-zero d = [1, 0.5] (the tie is dropped); sums of sign flips: 1.5, 0.5, -0.5, -1.5;
    # |sum| >= 1.5 for 2 of 4 patterns.
    assert randomisation_test([1, 0, 0.5], [0, 0, 0]) == 2 / 4


def test_randomisation_exact_mixed_signs():
    # d = [1, 2, -1], observed sum 2; the 8 flips give 2, 4, -2, 0, 0, 2, -4, -2: six have |sum| >= 2.
    assert randomisation_test([1, 2, 0], [0, 0, 1]) == 6 / 8


def test_randomisation_exact_one_sided_extreme():
    # d = [3, 1, 1], sum 5: only all-plus and all-minus reach |sum| 5.
    assert randomisation_test([3, 1, 1], [0, 0, 0]) == 2 / 8


def test_randomisation_sampled_close_to_exact_and_seeded():
    rng = np.random.default_rng(3)
    a, b = rng.random(12), rng.random(12)
    exact = randomisation_test(a, b, n_resamples=2**12)
    sampled = randomisation_test(a, b, n_resamples=2**12 - 1, seed=5)
    assert sampled == randomisation_test(a, b, n_resamples=2**12 - 1, seed=5)
    assert abs(sampled - exact) < 0.03
    # the sampled p-value counts the observed pattern: never zero
    assert randomisation_test([1] * 30, [0] * 30, n_resamples=99) == 1 / 100


@pytest.mark.parametrize("a,b", [([1, 2], [1]), ([], []), ([1, math.nan], [0, 0])])
def test_bad_pairs_raise(a, b):
    with pytest.raises(ValueError):
        paired_t_test(a, b)
    with pytest.raises(ValueError):
        randomisation_test(a, b)


def test_bad_n_resamples_raises():
    with pytest.raises(ValueError, match="n_resamples"):
        randomisation_test([1], [0], n_resamples=0)


def test_compare_matches_by_task_id():
    out = compare({"t1": 1.0, "t2": 0.5, "t3": 0.0}, {"t3": 0.0, "t1": 0.0, "t2": 0.0})
    assert out["n"] == 3
    assert out["mean_diff"] == pytest.approx(0.5)
    assert out["p_randomisation"] == 2 / 4
    with pytest.raises(ValueError, match="different tasks"):
        compare({"t1": 1.0}, {"t2": 1.0})


def test_float_noise_on_every_task_is_no_difference_for_either_test():
    # the case: sums of the same terms in another order differ by 5.6e-17 on every task;
    # the t-test said p = 0.0 (a constant non-zero difference), the randomisation test 1.0
    a = [0.1 + 0.2 + 0.3] * 3 + [0.7, 0.4]
    b = [0.3 + 0.2 + 0.1] * 3 + [0.7, 0.4]
    assert a[0] - b[0] == pytest.approx(1.1e-16, abs=1e-17)
    assert paired_t_test(a, b) == 1.0
    assert randomisation_test(a, b) == 1.0
    c = [x + 5.6e-17 for x in [0.5, 0.25, 0.75, 0.125]]
    assert all(x != y for x, y in zip(c, [0.5, 0.25, 0.75, 0.125]))
    assert paired_t_test(c, [0.5, 0.25, 0.75, 0.125]) == randomisation_test(c, [0.5, 0.25, 0.75, 0.125]) == 1.0
    assert compare({"1": 0.6 + 5.6e-17, "2": 0.3}, {"1": 0.6, "2": 0.3 + 5.6e-17})["p_t"] == 1.0


def test_a_real_difference_next_to_noise_is_kept():
    # d = [1, 2, 3] plus noise on a fourth task (0.1 + 0.2 - 0.3 = 5.6e-17): d = [1, 2, 3, 0]
    assert 0.1 + 0.2 != 0.3
    t_value = stats.ttest_1samp([1, 2, 3, 0], 0.0).pvalue
    assert paired_t_test([1, 2, 3, 0.1 + 0.2], [0, 0, 0, 0.3]) == pytest.approx(t_value)
    # randomisation: non-zero d = [1, 2, 3]; |sum of flips| >= 6 for 2 of 8 patterns
    assert randomisation_test([1, 2, 3, 0.1 + 0.2], [0, 0, 0, 0.3]) == 2 / 8
