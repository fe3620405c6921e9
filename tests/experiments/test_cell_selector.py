"""A cell's selector class: one per fold, fitted on the other folds' rankings only."""

from __future__ import annotations

from primsel import registry
from primsel.experiments.cell import compute_cell
from primsel.experiments.dataset import make_dataset
from primsel.experiments.settings import CellSettings
from primsel.experiments.store import Retrieval
from primsel.retrieval.selector import BaseSelector, select
from tests.retrieval.conftest import make_task, small_library as _small_library

small_library = _small_library  # the fixture of the retrieval tests

SEEN: dict[int, list[set[str]]] = {}


class Recording(BaseSelector):
    """Keeps as many primitives as it saw training examples; remembers their gold sets."""

    learns_from_tasks = True

    def __init__(self) -> None:
        pass

    def fit(self, library, examples=()):
        self._n = len(examples)
        SEEN[id(self)] = [set(gold) for _, gold in examples]
        return self

    def select(self, ranked, library, *, k=None, threshold=None, closure=False, task_id="", retriever="",
               usage=None):
        return select(ranked, library, k=self._n, closure=closure, task_id=task_id, retriever=retriever)


def test_each_fold_is_selected_by_a_selector_fitted_on_the_other_folds(small_library):
    registry.register("recording", "selector")(Recording)
    SEEN.clear()
    tasks = [make_task("1", "a", {"rooms.Slot"}), make_task("2", "b", {"rooms.Room"}),
             make_task("3", "c", {"calendar.Event"})]
    order = tuple((p, 1.0 / (i + 1)) for i, p in enumerate(sorted(small_library)))
    retrieval = Retrieval(ranked={t.id: order for t in tasks}, folds={"1": 0, "2": 0, "3": 1}, seconds=0.0)
    settings = CellSettings(retriever="bm25", k=6, selector="recording")
    outcome = compute_cell(settings, retrieval, make_dataset(tasks), small_library)
    # fold 0 (tasks 1, 2) is selected by a selector that saw task 3 only, fold 1 by one that saw 1 and 2
    assert sorted(map(len, (outcome.selections[t].ids for t in ("1", "2", "3")))) == [1, 1, 2]
    assert sorted(sorted(map(sorted, gold)) for gold in SEEN.values()) == [
        [["calendar.Event"]], [["rooms.Room"], ["rooms.Slot"]]]
    assert outcome.report["selected"] == (1 + 1 + 2) / 3
