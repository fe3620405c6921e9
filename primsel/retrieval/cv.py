"""k-fold cross-validation of retrievers that learn from tasks.

The folds are ``sklearn.model_selection.KFold(n_splits=folds, shuffle=True, random_state=seed)``
over the task ids sorted numerically (docs/architecture.md, "Folds"). A retriever that learns from tasks
(:class:`primsel.types.LearnsFromTasks`) is built afresh for every fold and fitted on the other folds'
tasks; it then ranks the held-out fold. Other retrievers are fitted once, without tasks.

Retrievers that spend LLM tokens (:class:`primsel.types.ReportsUsage`) built here report their
per-task usage through the ``usage_out`` argument of :func:`cross_validated_run`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from primsel.checks import FOLDS_BOUNDS, SEED_BOUNDS, check_k, check_number
from primsel.registry import build
from primsel.types import LearnsFromTasks, ReportsUsage, Run, SeesGold, Task, task_sort_key

C = TypeVar("C")


def fold_assignment(task_ids: Iterable[str], folds: int = 5, seed: int = 0) -> dict[str, int]:
    """The fold (0-based) of every task.

    Parameters
    ----------
    task_ids : unique task ids.
    folds : number of folds, 2 <= folds <= number of tasks.
    seed : ``random_state`` of the shuffled KFold.

    Returns
    -------
    ``{task_id: fold}`` with the ids in sorted order (:func:`primsel.types.task_sort_key`).

    Raises
    ------
    ValueError : duplicate ids, folds out of range, or a seed outside :data:`primsel.checks.SEED_BOUNDS`.
    """
    from sklearn.model_selection import KFold

    ids = sorted((str(t) for t in task_ids), key=task_sort_key)
    if len(set(ids)) != len(ids):
        raise ValueError("duplicate task ids")
    low = FOLDS_BOUNDS["minimum"]
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < low or folds > len(ids):
        raise ValueError(f"folds must be an integer in [{low}, {len(ids)}] (number of tasks), got {folds!r}")
    check_number("seed", seed, **SEED_BOUNDS)
    out: dict[str, int] = {}
    for fold, (_, test) in enumerate(KFold(n_splits=folds, shuffle=True, random_state=seed).split(ids)):
        for i in test:
            out[ids[i]] = fold
    return {t: out[t] for t in ids}


def fit_per_fold(first: C, build: Callable[[], C], folds: Iterable[int],
                 fit: Callable[[C, int], C | None]) -> Iterator[tuple[int, C]]:
    """One component per fold, each fitted without the fold it serves: the cross-validation of
    everything that learns from tasks (retrievers here, selectors and generators in
    :mod:`primsel.experiments.cell`).

    Parameters
    ----------
    first : an unfitted component (the one built to ask whether it learns); it serves the
        first fold.
    build : returns a fresh unfitted component, for every other fold.
    folds : the folds to serve, in order.
    fit : ``fit(component, fold)`` fits the component on the tasks outside ``fold`` and
        returns the fitted component, or None when it fitted in place.

    Yields
    ------
    ``(fold, fitted component)``, one fold at a time: a component is built and fitted only when
    the caller asks for the next, so no more than one fold's model needs to be held at once.
    """
    for i, fold in enumerate(folds):
        component = first if i == 0 else build()
        fitted = fit(component, fold)
        yield fold, component if fitted is None else fitted


def _fresh(spec: Any) -> Any:
    if isinstance(spec, (str, Mapping)):
        return build(spec, "retriever")
    return copy.deepcopy(spec)


def _hand_gold(retriever: Any, tasks: Sequence[Task]) -> None:
    if isinstance(retriever, SeesGold):
        retriever.set_gold({t.id: t.gold for t in tasks})


def _collect_usage(retriever: Any, tasks: Sequence[Task], usage_out: dict[str, dict[str, float]] | None) -> None:
    if usage_out is None or not isinstance(retriever, ReportsUsage):
        return
    usage = retriever.usage()
    for t in tasks:
        if t.id in usage:
            usage_out[t.id] = dict(usage[t.id])


def cross_validated_run(
    spec: str | Mapping[str, Any] | Any,
    library: Mapping[str, Any],
    tasks: Sequence[Task],
    k: int,
    folds: int = 5,
    seed: int = 0,
    usage_out: dict[str, dict[str, float]] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    queries: Mapping[str, str] | None = None,
) -> tuple[Run, dict[str, int]]:
    """Rank the library for every task, never letting a learned retriever see a test task.

    Parameters
    ----------
    spec : retriever specification (registered name, ``"module:Class"``, table) or an unfitted
        retriever instance (deep-copied for every fold).
    library : the library (``primsel.library.Library``).
    tasks : the tasks, with ``gold`` filled (for learned retrievers and ``oracle``).
    k : cut-off passed to ``search`` (>= 1; ``len(library)`` ranks everything).
    folds, seed : the fold split (:func:`fold_assignment`); folds only matter for retrievers
        that learn from tasks, but the fold of every task is returned either way (fold 0 for
        a single task).
    usage_out : when given, filled with ``{task_id: usage}`` for the tasks ranked by a retriever
        with the :class:`primsel.types.ReportsUsage` ability (its ``usage()`` entries: tokens,
        seconds, calls, ... as that retriever defines them; see e.g.
        :meth:`primsel.retrieval.llm_selector.LLMSelector.usage`); left untouched otherwise.
    progress : when given, called before each stage as ``progress(stage, i, n)``: stage
        ``"fitting"`` or ``"ranking"``, ``i`` the fold (1-based) and ``n`` the number of fits
        (the folds for a retriever that learns from tasks, else 1).
    queries : when given, ``{task_id: text}`` of some of ``tasks``: only these tasks are ranked,
        each with its text instead of its query (e.g. the query plus an error message); the
        folds, and each fold's training tasks, are still those of ``tasks``.

    Returns
    -------
    (run, folds): ``{task_id: {primitive_id: score}}`` for every task (every task of
    ``queries``, when given), and ``{task_id: fold}`` for every task.

    Raises
    ------
    ValueError : bad k or folds, duplicate task ids, or fewer than 2 tasks for a retriever that
        learns from tasks.
    """
    check_k(k)
    probe = _fresh(spec)
    learns = isinstance(probe, LearnsFromTasks)
    if len(tasks) < 2 and not learns:  # nothing to split: the one task is fold 0
        assignment = {t.id: 0 for t in tasks}
    elif len(tasks) < 2:
        raise ValueError("a retriever that learns from tasks needs at least 2 tasks to cross-validate")
    else:
        assignment = fold_assignment([t.id for t in tasks], folds, seed)
    texts = {t.id: t.query for t in tasks} if queries is None else dict(queries)
    unknown = sorted(set(texts) - {t.id for t in tasks})
    if unknown:
        raise ValueError(f"queries name tasks that are not among the tasks: {', '.join(unknown[:5])}")
    ranked = [t for t in tasks if t.id in texts]
    run: Run = {}
    stage = progress or (lambda what, i, n: None)
    if not learns:
        stage("fitting", 1, 1)
        probe.fit(library)
        _hand_gold(probe, ranked)
        stage("ranking", 1, 1)
        run = probe.search({t.id: texts[t.id] for t in ranked}, k) if ranked else {}
        _collect_usage(probe, ranked, usage_out)
    else:
        def fit(retriever: Any, fold: int) -> None:
            stage("fitting", fold + 1, folds)
            retriever.fit(library, [t for t in tasks if assignment[t.id] != fold])

        tested = [fold for fold in range(folds) if any(assignment[t.id] == fold for t in ranked)]
        for fold, retriever in fit_per_fold(probe, lambda: _fresh(spec), tested, fit):
            test = [t for t in ranked if assignment[t.id] == fold]
            _hand_gold(retriever, test)
            stage("ranking", fold + 1, folds)
            run.update(retriever.search({t.id: texts[t.id] for t in test}, k))
            _collect_usage(retriever, test, usage_out)
    order = {t.id: i for i, t in enumerate(tasks)}
    return {t: run[t] for t in sorted(run, key=order.__getitem__)}, assignment
