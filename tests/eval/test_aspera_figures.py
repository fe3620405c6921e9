"""ASPERA's figures on hand-made task rows, each value worked out by hand from ASPERA's
definitions (apple/ml-aspera: agent_runner.py, agent/base_agent.py, evaluator.py)."""

from __future__ import annotations

import pytest

from primsel.eval.aspera import FIGURES, aspera_figures, is_refused, selection_f1


def row(status, error_type=None, selection=(), gold=(), **extra):
    return {"status": status, "error_type": error_type, "message": extra.pop("message", None),
            "selection": list(selection), "gold": list(gold), "parse_failure": extra.pop("parse_failure", None),
            "import_lenient_status": extra.pop("import_lenient_status", None), **extra}


ROWS = [
    row("pass", selection="ab", gold="ab"),                                    # 1 passed
    row("pass", selection="a", gold="ac"),                                     # 2 passed
    row("fail", "SolutionError", selection="ab", gold="b"),                    # 3 solution error
    row("fail", "AssertionError", selection="", gold="a"),                     # 4 execution error in ASPERA
    row("requires_user_input", "RequiresUserInput", selection="c", gold="c"),  # 5 hand-back
    row("error", "ModuleNotFoundError", selection="a", gold="a", import_lenient_status="pass"),  # 6 bad import
    row("error", "ModuleNotFoundError", selection="a", gold="b", import_lenient_status="fail"),  # 7 bad import
    row("llm_error", message="rejected with HTTP 400: Invalid prompt: flagged", selection="abc", gold="a"),  # 8
    row("fail", "SolutionError", selection="b", gold="b", parse_failure="entry_point"),  # 9 not run by ASPERA
    row("fail", "SolutionError", selection="a", gold="a", parse_failure="answer"),       # 10 placeholder ran
]


def test_counts_and_rates_follow_aspera():
    figures = aspera_figures(ROWS)
    # evaluated: all but the refused 8 and the unrun 9 -> 8 tasks, 2 passed, 6 errors
    # (3 and 10 solution errors, 5 a hand-back, 6 and 7 bad imports)
    assert figures["score"] == pytest.approx(100 * 2 / 8 - 1 / 10)
    assert figures["parser_failure_rate"] == pytest.approx(100 * 2 / 10) and figures["parse_failures"] == 2
    assert figures["solution_error_rate"] == pytest.approx(100 * 2 / 6)
    assert figures["handback_control_error_rate"] == pytest.approx(100 * 1 / (6 - 2))
    assert figures["handback_control_error_rate_normalise"] == pytest.approx(100 * 1 / 6)
    assert figures["execution_error_count"] == pytest.approx(100 * (6 - 2 - 1) / 6)
    assert figures["bad_import_error_rate"] == pytest.approx(100 * 2 / 6)
    assert figures["import_lenient_score"] == pytest.approx(100 * 3 / 8)


def test_selection_f1_over_the_tasks_not_refused():
    figures = aspera_figures(ROWS)
    # per-task F1 of rows 1-7, 9, 10: 1, 2/3, 2/3, 0, 1, 1, 0, 1, 1
    assert figures["primitives_selection_macro_f1"] == pytest.approx((5 + 4 / 3) / 9)
    # pooled: 8 hits, 10 selected, 11 gold
    assert figures["primitives_selection_micro_precision"] == pytest.approx(8 / 10)
    assert figures["primitives_selection_micro_recall"] == pytest.approx(8 / 11)
    assert figures["primitives_selection_micro_f1"] == pytest.approx(2 * 0.8 * (8 / 11) / (0.8 + 8 / 11))


def test_selection_f1_special_cases():
    assert selection_f1(set(), set()) == (1.0, 1.0, 1.0)
    assert selection_f1(set(), {"a"}) == (0.0, 0.0, 0.0)
    assert selection_f1({"a"}, set()) == (0.0, 1.0, 0.0)


def test_rates_are_zero_without_errors_and_f1_none_without_selections():
    figures = aspera_figures([row("pass", gold="a"), row("pass", gold="b")])
    assert figures["score"] == 100.0 and figures["import_lenient_score"] == 100.0
    assert all(figures[k] == 0.0 for k in ("solution_error_rate", "handback_control_error_rate",
                                           "execution_error_count", "bad_import_error_rate", "parser_failure_rate"))
    assert figures["primitives_selection_macro_f1"] is None and figures["primitives_selection_micro_f1"] is None


def test_primsel_statuses_of_unrun_answers_are_parser_failures_and_errors():
    rows = [row("no_program", gold="a"), row("truncated", gold="a"), row("pass", gold="a"),
            row("llm_error", message="gave up after 4 attempts; last: HTTP 503", gold="a")]
    figures = aspera_figures(rows)
    assert figures["parser_failure_rate"] == 50.0
    assert figures["score"] == pytest.approx(25.0)          # a failed request is not a refusal
    assert figures["execution_error_count"] == 100.0


def test_refusal_needs_aspera_s_words():
    assert is_refused(row("llm_error", message="... do not have access ..."))
    assert not is_refused(row("llm_error", message="HTTP 503"))
    assert not is_refused(row("error", message="Invalid prompt"))


def test_rows_are_not_mutated():
    copy = [dict(r) for r in ROWS]
    aspera_figures(ROWS)
    assert ROWS == copy


def test_under_aspera_s_protocol_the_selection_figures_compare_symbol_names():
    # the ids would give F1 1 (selection = gold); ASPERA's names add "datetime" to the gold
    rows = [row("pass", selection=["m.a"], gold=["m.a"], aspera_selection=["a"], aspera_gold=["a", "datetime"]),
            row("fail", "SolutionError", selection=["m.b"], gold=["m.b"], aspera_selection=["b", "Enum"],
                aspera_gold=["b"])]
    figures = aspera_figures(rows)
    # task 1: p 1, r 1/2, F1 2/3; task 2: p 1/2, r 1, F1 2/3; pooled: 2 hits of 3 selected and 3 gold
    assert figures["primitives_selection_macro_f1"] == pytest.approx(2 / 3)
    assert figures["primitives_selection_micro_precision"] == pytest.approx(2 / 3)
    assert figures["primitives_selection_micro_recall"] == pytest.approx(2 / 3)


def test_the_cck_agent_has_no_selection_figures_as_in_aspera():
    rows = [row("pass", selection=["m.a"], gold=["m.a"], aspera_selection=[], aspera_gold=["a"])]
    assert aspera_figures(rows)["primitives_selection_macro_f1"] is None
