"""ASPERA's own figures for a generator run, under ASPERA's names, from primsel's task rows.

ASPERA (Coca et al., ACL 2025) writes these figures to ``metrics.json`` at the end of an agent
run. Their definitions are read from ASPERA's public repository ``apple/ml-aspera``:
``src/aspera/endpoints/agent_runner.py`` (the score and the metrics file),
``src/aspera/agent/base_agent.py`` (``BaseAgent``: counters and rates) and
``src/aspera/evaluator.py`` (``Evaluator``: ``get_score``, the error counts, the primitive-
selection F1). The code is our own. Percentages are in [0, 100], as in ASPERA.

Definitions
-----------
A task row (a ``tasks.jsonl`` row of a cell with a generator) has ``status``, ``error_type``,
``message``, ``parse_failure``, ``import_lenient_status``, ``selection`` and ``gold``; under
ASPERA's protocol also ``aspera_selection`` and ``aspera_gold``: the symbol names ASPERA's
primitive-selection metric compares (``Evaluator.get_primitives_selection_feedback``: the names
of the selected symbols, empty for the CCK agent, which selects nothing; and the names ASPERA's
substring rule finds in the reference program, ``datetime`` among them when it is used). The
selection figures then compare those, as ASPERA does, instead of primitive ids.

* *refused*: the endpoint refused the request as an invalid prompt (``status`` ``llm_error``
  and the message holds ``"Invalid prompt"`` or ``"do not have"``, ASPERA's test); ASPERA skips
  the task.
* *parser failure*: ``parse_failure`` is set (``aspera`` extraction), or the answer gave no
  runnable program (``status`` ``no_program`` or ``truncated``: ``primsel`` extraction).
* *evaluated*: not refused, and not a parser failure of kind ``"entry_point"`` (ASPERA's
  evaluator found no function to call and did not run the task). ASPERA's ``total_err_count``
  counts the evaluated tasks that did not pass.
* *solution error* (the paper's task-completion error): an evaluated task whose check raised
  ``SolutionError`` (``status`` ``fail``, ``error_type`` ``SolutionError``). A bare
  ``AssertionError`` escaping a check is not one in ASPERA (it looks for the name
  ``SolutionError``): it is an execution error.
* *hand-back*: an evaluated task, not a solution error, with ``status`` ``requires_user_input``
  (the program raised ``RequiresUserInput`` where the check did not expect it).
* *bad import*: an evaluated task that failed with ``ModuleNotFoundError`` and has an
  import-lenient program; ``import_lenient_status`` is then the verdict of that program (the
  same program without its imports of library modules), else None.

Figures (ASPERA's ``metrics.json`` keys):

=========================================  ===============================================
``score``                                  100 * passed / evaluated, minus refused / all
                                           tasks -- a fraction taken from a percentage, as
                                           ASPERA's ``agent_runner`` does
``parser_failure_rate``                    100 * parser failures / all tasks (their number:
                                           ``parse_failures``)
``solution_error_rate``                    100 * solution errors / errors
``handback_control_error_rate``            100 * hand-backs / (errors - solution errors)
``handback_control_error_rate_normalise``  100 * hand-backs / errors
``execution_error_count``                  100 * (errors - solution errors - hand-backs) /
                                           errors (a rate despite ASPERA's name)
``bad_import_error_rate``                  100 * bad imports / errors
``import_lenient_score``                   100 * (passed, counting a bad import as passed
                                           when its import-lenient program passed) /
                                           evaluated; no refusal term
``primitives_selection_macro_f1``          mean per-task F1 of selection against gold over
                                           the tasks not refused (both empty: 1; gold empty:
                                           recall 1; selection empty: 0); None when no task
                                           has a selection
``primitives_selection_micro_f1``          F1 of pooled precision and recall (and
``..._micro_precision``, ``..._micro_recall``, which ASPERA reports with it)
=========================================  ===============================================

"errors" is ``total_err_count``; every rate is 0 when its denominator is 0, as in ASPERA.
Differences of the task verdicts themselves: primsel stops a task at the first (SIP, EP) pair
that raises, ASPERA runs every pair and a ``SolutionError`` in any decides (10 tasks of
Asper-Bench have two pairs); a request that failed for another reason (``llm_error``), which
would stop ASPERA's run, counts here as an evaluated execution error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["FIGURES", "aspera_figures", "is_refused", "selection_f1"]

#: The figures, in ASPERA's ``metrics.json`` order, with the column header of the report.
FIGURES = (
    ("score", "score"),
    ("primitives_selection_macro_f1", "PS F1 ma"),
    ("primitives_selection_micro_f1", "PS F1 mi"),
    ("parser_failure_rate", "parser fail %"),
    ("solution_error_rate", "solution err %"),
    ("handback_control_error_rate", "hand-back %"),
    ("handback_control_error_rate_normalise", "hand-back norm %"),
    ("execution_error_count", "execution err %"),
    ("bad_import_error_rate", "bad import %"),
    ("import_lenient_score", "import-lenient score"),
)
#: Substrings of an endpoint error that mark a refused prompt (ASPERA's ``agent_runner``).
REFUSAL_MARKS = ("Invalid prompt", "do not have")


def is_refused(row: Mapping[str, Any]) -> bool:
    """The endpoint refused the task's request as an invalid prompt."""
    message = row.get("message") or ""
    return row.get("status") == "llm_error" and any(mark in message for mark in REFUSAL_MARKS)


def _parser_failure(row: Mapping[str, Any]) -> bool:
    return row.get("parse_failure") is not None or row.get("status") in ("no_program", "truncated")


def _rate(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole > 0 else 0.0


def selection_f1(selected: set[str], gold: set[str]) -> tuple[float, float, float]:
    """ASPERA's per-task (precision, recall, F1) of a selection (``Evaluator``'s special cases:
    both empty 1, 1, 1; gold empty: recall 1; selection empty: 0, 0, 0)."""
    if not gold and not selected:
        return 1.0, 1.0, 1.0
    if not selected:
        return 0.0, 0.0, 0.0
    hits = len(selected & gold)
    precision = hits / len(selected)
    recall = hits / len(gold) if gold else 1.0
    return precision, recall, _f1(precision, recall)


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def aspera_figures(rows: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """ASPERA's figures of one generator run (see the module docstring for every definition).

    Parameters
    ----------
    rows : one task row per task of the run (never mutated).

    Returns
    -------
    ``{name: value}`` for every name of :data:`FIGURES`, plus
    ``primitives_selection_micro_precision`` and ``primitives_selection_micro_recall``, and
    ``parse_failures`` (the number of parser failures: ASPERA's ``num_unparseable``);
    percentages in [0, 100] (``score`` may go slightly below 0), F1 values in [0, 1] or None.
    """
    n = len(rows)
    refused = [r for r in rows if is_refused(r)]
    evaluated = [r for r in rows if not is_refused(r) and r.get("parse_failure") != "entry_point"]
    passed = [r for r in evaluated if r.get("status") == "pass"]
    errors = [r for r in evaluated if r.get("status") != "pass"]
    solution = [r for r in errors if r.get("status") == "fail" and r.get("error_type") == "SolutionError"]
    handback = [r for r in errors if r.get("status") == "requires_user_input"]
    bad_import = [r for r in errors if r.get("import_lenient_status") is not None]
    lenient_pass = len(passed) + sum(r.get("import_lenient_status") == "pass" for r in bad_import)
    out: dict[str, float | None] = {
        "score": (_rate(len(passed), len(evaluated)) if evaluated else 0.0) - (len(refused) / n if n else 0.0),
        "parse_failures": float(sum(_parser_failure(r) for r in rows)),
        "parser_failure_rate": _rate(sum(_parser_failure(r) for r in rows), n),
        "solution_error_rate": _rate(len(solution), len(errors)),
        "handback_control_error_rate": _rate(len(handback), len(errors) - len(solution)),
        "handback_control_error_rate_normalise": _rate(len(handback), len(errors)),
        "execution_error_count": _rate(len(errors) - len(solution) - len(handback), len(errors)),
        "bad_import_error_rate": _rate(len(bad_import), len(errors)),
        "import_lenient_score": _rate(lenient_pass, len(evaluated)),
    }
    out.update(_selection_figures([r for r in rows if not is_refused(r)]))
    return out


def _selection_figures(rows: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    pairs = [_selection_pair(r) for r in rows]
    names = ("primitives_selection_macro_f1", "primitives_selection_micro_f1",
             "primitives_selection_micro_precision", "primitives_selection_micro_recall")
    if not any(selected for selected, _ in pairs):
        return dict.fromkeys(names)
    macro = sum(selection_f1(s, g)[2] for s, g in pairs) / len(pairs)
    predicted = sum(len(s) for s, _ in pairs)
    actual = sum(len(g) for _, g in pairs)
    hits = sum(len(s & g) for s, g in pairs)
    precision = hits / predicted
    recall = hits / actual if actual else None
    micro = _f1(precision, recall) if recall is not None else None
    return dict(zip(names, (macro, micro, precision, recall)))


def _selection_pair(row: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """(selected, gold) of a row: under ASPERA's protocol the symbol names ASPERA counts
    (``aspera_selection``, ``aspera_gold``), else the selected and gold primitive ids."""
    if row.get("aspera_gold") is not None:
        return set(row.get("aspera_selection") or ()), set(row["aspera_gold"])
    return set(row.get("selection") or ()), set(row.get("gold") or ())
