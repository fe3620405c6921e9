"""The retrieval store on a subset of a dataset: who ranks what, and with which folds."""

from __future__ import annotations

from types import SimpleNamespace

from primsel.retrieval.store import RetrievalStore


def _dataset(tasks):
    return SimpleNamespace(tasks=tuple(tasks), fingerprint="d/6/abc")


def test_a_retriever_that_does_not_learn_ranks_only_the_needed_tasks_with_every_task_s_fold(small_library,
                                                                                           small_tasks):
    tasks = small_tasks[:6]
    needed = [tasks[1].id, tasks[4].id]
    store = RetrievalStore(small_library, _dataset(tasks), use_disk=False, needed=needed)
    bm25 = store.get("bm25", folds=3, seed=0)
    assert set(bm25.ranked) == set(needed)
    # the folds of the whole dataset: a learning generator draws its examples from them
    assert set(bm25.folds) == {t.id for t in tasks}
    whole = RetrievalStore(small_library, _dataset(tasks), use_disk=False).get("bm25", folds=3, seed=0)
    assert {t: bm25.ranked[t] for t in needed} == {t: whole.ranked[t] for t in needed}
    assert bm25.folds == whole.folds
    assert bm25.key != whole.key


def test_a_retriever_that_learns_ranks_every_task_as_in_the_full_run(small_library, small_tasks):
    tasks = small_tasks[:6]
    store = RetrievalStore(small_library, _dataset(tasks), use_disk=False, needed=[tasks[0].id])
    prior = store.get("prior", folds=3, seed=0)
    assert set(prior.ranked) == {t.id for t in tasks}
    assert prior.key == RetrievalStore(small_library, _dataset(tasks), use_disk=False).get("prior", 3, 0).key
