"""The cell pipeline (primsel.experiments.cell): a selector class and a generator that learn, one per fold,
fitted on the other folds only."""

from __future__ import annotations

from primsel import registry
from primsel.experiments.cell import compute_cell
from primsel.experiments.dataset import make_dataset
from primsel.experiments.settings import CellSettings
from primsel.retrieval.store import Retrieval
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
    assert outcome.report.selection.selected == (1 + 1 + 2) / 3


class FoldGenerator:
    """Writes no program; remembers, per instance, the tasks it was fitted on and the tasks it
    was asked about (a generator that learns from tasks: :class:`primsel.types.FitsOnTasks`)."""

    def __init__(self) -> None:
        pass

    def fit(self, library, train_tasks=()):
        FITTED[id(self)] = {"train": sorted(t.id for t in train_tasks), "asked": []}

    def generate(self, task, docs):
        from primsel.types import Program

        FITTED[id(self)]["asked"].append(task.id)
        return Program(task.id, None, status="no_program", raw="no")


FITTED: dict[int, dict[str, list[str]]] = {}


def test_each_fold_is_generated_by_a_generator_fitted_on_the_other_folds(small_library):
    registry.register("fold_generator", "generator")(FoldGenerator)
    FITTED.clear()
    tasks = [make_task("1", "a", {"rooms.Slot"}), make_task("2", "b", {"rooms.Room"}),
             make_task("3", "c", {"calendar.Event"})]
    order = tuple((p, 1.0 / (i + 1)) for i, p in enumerate(sorted(small_library)))
    retrieval = Retrieval(ranked={t.id: order for t in tasks}, folds={"1": 0, "2": 1, "3": 0}, seconds=0.0)
    settings = CellSettings(retriever="bm25", k=2, generator="fold_generator")
    outcome = compute_cell(settings, retrieval, make_dataset(tasks), small_library, workers=1)
    assert sorted(FITTED.values(), key=lambda f: f["asked"]) == [
        {"train": ["2"], "asked": ["1", "3"]}, {"train": ["1", "3"], "asked": ["2"]}]
    assert outcome.report.generation.status["no_program"] == 1.0


def test_fit_per_fold_builds_one_component_per_fold_lazily():
    from primsel.retrieval.cv import fit_per_fold

    events: list[str] = []
    built = iter(["b", "c"])

    def fit(component, fold):
        events.append(f"fit {component} on all but {fold}")
        return component.upper() if fold == 2 else None

    folds = fit_per_fold("a", lambda: next(built), [0, 2, 5], fit)
    for fold, component in folds:
        events.append(f"use {component} for {fold}")
    assert events == ["fit a on all but 0", "use a for 0", "fit b on all but 2", "use B for 2",
                      "fit c on all but 5", "use c for 5"]
