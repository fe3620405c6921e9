"""Tokenisation, ranking and k validation shared by the retrievers."""

from __future__ import annotations

import pytest

from primsel.checks import check_choice, check_flag, check_k, check_number, check_text
from primsel.retrieval.base import code_tokens, split_identifier
from primsel.types import top_k


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


def test_check_number_returns_the_value_within_bounds():
    assert check_number("x", 0, minimum=0) == 0
    assert check_number("x", 1.0, minimum=0, maximum=1) == 1.0
    assert check_number("n", 3, minimum=1, integer=True) == 3


@pytest.mark.parametrize(("value", "rules", "message"), [
    ("1", {}, "x must be a number, got '1'"),
    (True, {}, "x must be a number, got True"),
    (None, {}, "x must be a number, got None"),
    (float("inf"), {}, "x must be a finite number, got inf"),
    (0, {"above": 0}, "x must be a number > 0, got 0"),
    (-1, {"minimum": 0}, "x must be a number >= 0, got -1"),
    (2, {"maximum": 1}, "x must be a number <= 1, got 2"),
    (2.0, {"integer": True}, "x must be an integer, got 2.0"),
])
def test_check_number_names_the_parameter(value, rules, message):
    with pytest.raises(ValueError) as info:
        check_number("x", value, **rules)
    assert str(info.value) == message


def test_check_choice_flag_and_text():
    assert check_choice("m", None, ("a", None)) is None
    with pytest.raises(ValueError, match="m must be one of 'a', 'b'; got 'c'"):
        check_choice("m", "c", ("a", "b"))
    with pytest.raises(ValueError, match="m must be one of"):
        check_choice("m", True, (1, 2))  # True == 1, but a flag is not a choice
    assert check_flag("f", False) is False
    with pytest.raises(ValueError, match="f must be true or false, got 0"):
        check_flag("f", 0)
    assert check_text("t", "") == ""
    with pytest.raises(ValueError, match="t must be a non-empty string, got ' '"):
        check_text("t", " ", empty=False)


# --- Unicode: NFKC, case folding, Unicode word characters, accents --------------------------

def test_accented_words_are_whole_tokens_matching_their_ascii_spelling():
    assert code_tokens("café naïve") == ["cafe", "naive"]  # not ['caf', 'na', 've']
    assert code_tokens("résumé") == code_tokens("resume") == code_tokens("RÉSUMÉ") == ["resume"]


def test_full_width_letters_are_their_plain_letters():
    assert code_tokens("ｆｉｎｄ ｅｖｅｎｔｓ") == code_tokens("find events") == ["find", "events"]
    assert code_tokens("ＦｉｎｄＥｖｅｎｔｓ") == ["find", "events", "findevents"]


def test_case_folding_and_letters_of_any_script():
    assert code_tokens("STRASSE straße") == ["strasse", "strasse"]
    assert code_tokens("Ärger 日本語") == ["arger", "日本語"]
    assert split_identifier("ÄrgerÜber") == ["ärger", "über"]


def test_accented_and_full_width_queries_score_as_their_ascii_spelling():
    from primsel.simulator.library import build_library
    from primsel.retrieval.bm25 import BM25Retriever

    library = build_library()
    bm25 = BM25Retriever().fit(library)
    run = bm25.search({"accented": "résumé", "ascii": "resume", "wide": "ｆｉｎｄ ｅｖｅｎｔｓ",
                       "plain": "find events"}, len(library))
    assert run["accented"] == run["ascii"]
    # "résumé" used to be the tokens "r" and "sum", matching DateRange and sum_time_units
    assert run["accented"]["time_utils.sum_time_units"] == run["ascii"]["time_utils.sum_time_units"] == 0.0
    assert run["wide"] == run["plain"] and run["wide"]["work_calendar.find_events"] > 0
