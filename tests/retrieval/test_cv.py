"""Fold assignment and cross-validated runs."""

from __future__ import annotations

import pytest
from sklearn.model_selection import KFold

from primsel.retrieval.base import BaseRetriever
from primsel.retrieval.cv import cross_validated_run, fold_assignment
from primsel.types import task_sort_key


def test_task_ids_sort_numerically_then_by_string():
    ids = ["10", "b", "2", "1", "a", "builtin-01"]
    assert sorted(ids, key=task_sort_key) == ["1", "2", "10", "a", "b", "builtin-01"]


def test_fold_assignment_is_kfold_over_sorted_ids():
    ids = [str(i) for i in range(12, 0, -1)]  # given in reverse order
    folds = fold_assignment(ids, folds=3, seed=7)
    ordered = [str(i) for i in range(1, 13)]
    assert list(folds) == ordered
    for fold, (_, test) in enumerate(KFold(n_splits=3, shuffle=True, random_state=7).split(ordered)):
        assert sorted(ordered[i] for i in test) == sorted(t for t, f in folds.items() if f == fold)


@pytest.mark.parametrize("folds", [1, 0, 13])
def test_fold_assignment_rejects_bad_fold_counts(folds):
    with pytest.raises(ValueError, match="folds must be"):
        fold_assignment([str(i) for i in range(12)], folds=folds)


def test_fold_assignment_rejects_duplicate_ids():
    with pytest.raises(ValueError, match="duplicate"):
        fold_assignment(["1", "1", "2"], folds=2)


class Spy(BaseRetriever):
    """Records the training ids and the queried ids of every fit."""

    learns_from_tasks = True
    log: list[tuple[set[str], set[str]]] = []

    def fit(self, library, train_tasks=()):
        super().fit(library, train_tasks)
        self.train = {t.id for t in train_tasks}
        return self

    def score(self, queries):
        Spy.log.append((self.train, set(queries)))
        return {q: {} for q in queries}


def test_learned_retriever_never_sees_its_test_fold(small_library, small_tasks):
    Spy.log = []
    run, folds = cross_validated_run(Spy(), small_library, small_tasks, k=3, folds=4, seed=0)
    assert list(run) == [t.id for t in small_tasks]
    assert len(Spy.log) == 4
    for train, test in Spy.log:
        assert not train & test
        assert train | test == {t.id for t in small_tasks}
        assert {folds[t] for t in test} == {folds[next(iter(test))]}


def test_cross_validated_prior_is_deterministic(small_library, small_tasks):
    a = cross_validated_run("prior", small_library, small_tasks, k=6, folds=4, seed=3)
    b = cross_validated_run({"type": "prior"}, small_library, small_tasks, k=6, folds=4, seed=3)
    assert a == b


def test_cross_validated_prior_by_hand(small_library, small_tasks):
    run, folds = cross_validated_run("prior", small_library, small_tasks, k=6, folds=2, seed=0)
    for task in small_tasks:
        train = [t for t in small_tasks if folds[t.id] != folds[task.id]]
        expected = sum("calendar.add_event" in t.gold for t in train) / len(train)
        assert run[task.id]["calendar.add_event"] == expected


def test_oracle_is_handed_the_gold_sets(small_library, small_tasks):
    run, _ = cross_validated_run("oracle", small_library, small_tasks, k=2)
    assert set(run["3"]) == {"calendar.delete_event", "calendar.Event"}
    assert run["3"]["calendar.delete_event"] == 1.0 and run["3"]["calendar.Event"] == 0.0


class CountingSelector(BaseRetriever):
    """Reports made-up LLM usage for the queries it scored (the ReportsUsage ability): 5 calls
    and as many prompt tokens as characters of the query."""

    def __init__(self, learns: bool = False) -> None:
        self.learns_from_tasks = learns
        self._usage: dict[str, dict[str, float]] = {}

    def score(self, queries):
        for q, text in queries.items():
            self._usage[q] = {"prompt_tokens": len(text), "calls": 5}
        return {q: {} for q in queries}

    def usage(self):
        return {q: dict(u) for q, u in self._usage.items()}


@pytest.mark.parametrize("learns", [False, True])
def test_usage_out_collects_every_tasks_usage_over_the_folds(small_library, small_tasks, learns):
    usage: dict[str, dict[str, float]] = {}
    run, _ = cross_validated_run(CountingSelector(learns), small_library, small_tasks, k=3, folds=4, usage_out=usage)
    assert usage == {t.id: {"prompt_tokens": len(t.query), "calls": 5} for t in small_tasks}
    # without usage_out the result is the same pair as before
    assert cross_validated_run(CountingSelector(learns), small_library, small_tasks, k=3, folds=4)[0] == run


def test_usage_out_is_untouched_by_retrievers_without_usage(small_library, small_tasks):
    usage: dict[str, dict[str, float]] = {}
    cross_validated_run("bm25", small_library, small_tasks, k=3, usage_out=usage)
    assert usage == {}


def test_a_seed_numpy_cannot_take_is_refused_naming_the_bound():
    with pytest.raises(ValueError, match="seed must be an integer <= 4294967295, got 4294967296"):
        fold_assignment([str(i) for i in range(10)], folds=2, seed=2**32)
    assert set(fold_assignment([str(i) for i in range(10)], folds=2, seed=2**32 - 1).values()) == {0, 1}


class Echo(Spy):
    """A Spy that also records the text of every query it ranks."""

    texts: dict[str, str] = {}

    def score(self, queries):
        Echo.texts.update(queries)
        return super().score(queries)


def test_other_query_texts_rank_only_those_tasks_with_the_same_folds(small_library, small_tasks):
    Spy.log = []
    _, folds = cross_validated_run(Echo(), small_library, small_tasks, k=3, folds=4, seed=0)
    full = list(Spy.log)
    Spy.log, Echo.texts = [], {}
    some = {small_tasks[0].id: "query plus NameError: name 'x' is not defined", small_tasks[2].id: "other text"}
    run, again = cross_validated_run(Echo(), small_library, small_tasks, k=3, folds=4, seed=0, queries=some)
    assert again == folds and set(run) == set(some) and Echo.texts == some
    # each text is ranked by the retriever of its task's fold, trained on the same tasks as before
    for train, test in Spy.log:
        (fold,) = {folds[t] for t in test}
        assert train == next(tr for tr, te in full if {folds[t] for t in te} == {fold})
    assert len(Spy.log) == len({folds[t] for t in some})
    with pytest.raises(ValueError, match="queries name tasks that are not among the tasks: nope"):
        cross_validated_run(Echo(), small_library, small_tasks, k=3, folds=4, seed=0, queries={"nope": "x"})
