"""Tokenisation, ranking and k validation shared by the retrievers."""

from __future__ import annotations

import pytest

from primsel.retrieval.base import check_k, code_tokens, split_identifier, top_k


def test_split_identifier_snake_and_camel():
    assert split_identifier("find_available_slots") == ["find", "available", "slots"]
    assert split_identifier("DateTimeClauseOperators") == ["date", "time", "clause", "operators"]
    assert split_identifier("now_") == ["now"]
    assert split_identifier("HTTPServer") == ["http", "server"]


def test_code_tokens_keep_whole_identifier_lower_cased():
    assert code_tokens("find_events(TimeUnits)") == ["find", "events", "find_events", "time", "units", "timeunits"]


def test_code_tokens_single_word_is_not_repeated():
    assert code_tokens("Meeting now_") == ["meeting", "now"]


def test_code_tokens_drop_stopwords():
    assert code_tokens("the find_the_room", stopwords={"the"}) == ["find", "room", "find_the_room"]


def test_top_k_breaks_ties_by_id_and_fills_zero():
    ranked = top_k(["c", "a", "b", "d"], {"b": 1.0, "d": 1.0}, 10)
    assert list(ranked) == ["b", "d", "a", "c"]
    assert list(ranked.values()) == [1.0, 1.0, 0.0, 0.0]


def test_top_k_cuts_at_k():
    assert list(top_k(["a", "b", "c"], [0.1, 0.3, 0.2], 2)) == ["b", "c"]


@pytest.mark.parametrize("k", [0, -1, 1.5, "3", True])
def test_check_k_rejects_non_positive_or_non_integer(k):
    with pytest.raises(ValueError, match="k must be"):
        check_k(k)
