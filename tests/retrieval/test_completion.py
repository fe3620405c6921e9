"""Set completion: co-occurrence of primitives in the training gold sets raises partners' scores."""

from __future__ import annotations

import numpy as np
import pytest

from primsel import registry
from primsel.retrieval.base import BaseRetriever
from primsel.retrieval.completion import CooccurrenceRetriever, boost, cooccurrence_matrix

IDS = ["a", "b", "c"]


def test_matrix_is_the_smoothed_share_of_sets_holding_both():
    p = cooccurrence_matrix([{"a", "b"}, {"a"}, {"b", "c"}], IDS, smoothing=1.0)
    # n(a) = 2, n(b) = 2, n(c) = 1; a and b together once, b and c once
    assert np.allclose(p, [[0, 1 / 3, 0], [1 / 3, 0, 1 / 3], [0, 1 / 2, 0]])


def test_boost_takes_the_strongest_partner_or_the_weighted_mean():
    p = np.array([[0, 0.5, 0], [0.2, 0, 1.0], [0, 0, 0]])
    s = np.array([[1.0, 0.5, 0.0]])
    assert np.allclose(boost(s, p, "max"), [[0.1, 0.5, 0.5]])
    assert np.allclose(boost(s, p, "mean"), [[0.1 / 1.5, 0.5 / 1.5, 0.5 / 1.5]])


class Fixed(BaseRetriever):
    """Scores 1 for calendar.add_event, 0.5 for rooms.book_room, 0 for the rest."""

    def __init__(self) -> None:
        pass

    def score(self, queries):
        return {q: {"calendar.add_event": 1.0, "rooms.book_room": 0.5} for q in queries}


def test_partner_of_a_strong_primitive_is_raised(small_library, small_tasks):
    registry.register("fixed")(Fixed)
    train = small_tasks[:6]
    plain = CooccurrenceRetriever(base="fixed", weight=0.0).fit(small_library, train).search({"q": "x"}, 6)["q"]
    boosted = CooccurrenceRetriever(base="fixed", weight=1.0).fit(small_library, train).search({"q": "x"}, 6)["q"]
    # add_event is gold in tasks 2, 4, 5; Event with it in 2 and 5: P = 2 / (3 + 1)
    assert boosted["calendar.Event"] == pytest.approx(1.0 * 2 / 4)
    assert plain.get("calendar.Event", 0.0) == 0.0
    # book_room (0.5 after min-max) is gold in 1 and 4; Room with it once: 0.5 * 1 / 3; add_event
    # gains max(0.5 * P(book_room -> add_event) = 0.5 * 1/3, ...) on top of its own 1
    assert boosted["rooms.Room"] == pytest.approx(0.5 / 3)
    assert boosted["calendar.add_event"] == pytest.approx(1.0 + 0.5 / 3)


def test_learns_from_tasks_and_checks_its_parameters():
    assert CooccurrenceRetriever(base="bm25").learns_from_tasks
    with pytest.raises(ValueError, match="weight"):
        CooccurrenceRetriever(weight=-1)
    with pytest.raises(ValueError, match="base"):
        CooccurrenceRetriever(base="nonexistent")
