"""Retrievers that learn from training tasks: prior, knn, expansion, classifier, and the bounds."""

from __future__ import annotations

import logging

import pytest

from primsel.retrieval.baselines import AllRetriever, OracleRetriever, RandomRetriever
from primsel.retrieval.learned import ClassifierRetriever, ExpansionRetriever, KnnRetriever
from primsel.retrieval.priors import PriorRetriever


def test_prior_is_gold_frequency_in_training_tasks(small_library, small_tasks):
    # tasks 1-4: book_room 2/4, Room 1/4, add_event 2/4, Event 1/4, delete_event 1/4, Slot 0
    run = PriorRetriever().fit(small_library, small_tasks[:4]).search({"q": "anything"}, 10)
    assert run["q"] == {
        "calendar.add_event": 0.5, "rooms.book_room": 0.5,
        "calendar.Event": 0.25, "calendar.delete_event": 0.25, "rooms.Room": 0.25,
        "rooms.Slot": 0.0,
    }
    assert list(run["q"]) == ["calendar.add_event", "rooms.book_room", "calendar.Event",
                              "calendar.delete_event", "rooms.Room", "rooms.Slot"]


def test_prior_without_training_tasks_ranks_by_id(small_library):
    run = PriorRetriever().fit(small_library).search({"q": "x"}, 10)
    assert list(run["q"]) == sorted(small_library) and set(run["q"].values()) == {0.0}


def test_knn_votes_with_the_nearest_training_queries(small_library, small_tasks):
    # only task 3 shares a word ("cancel") with the query: its gold gets the whole vote
    run = KnnRetriever(neighbours=3, features="tfidf").fit(small_library, small_tasks[:4]).search(
        {"q": "cancel"}, 10)
    assert run["q"]["calendar.delete_event"] == pytest.approx(1.0)
    assert sum(run["q"].values()) == pytest.approx(1.0)


def test_expansion_adds_training_queries_to_documents(small_library, small_tasks):
    # "standup" occurs in no docstring, only in task 6's query, whose gold is delete_event
    plain = ExpansionRetriever().fit(small_library).search({"q": "standup"}, 10)
    expanded = ExpansionRetriever().fit(small_library, small_tasks).search({"q": "standup"}, 10)
    assert set(plain["q"].values()) == {0.0}
    assert list(expanded["q"])[0] == "calendar.delete_event" and expanded["q"]["calendar.delete_event"] > 0


def test_classifier_learns_query_words(small_library, small_tasks):
    retriever = ClassifierRetriever(features="tfidf", C=10.0).fit(small_library, small_tasks)
    run = retriever.search({"a": "cancel and delete the event", "b": "book a room"}, 10)
    assert run["a"]["calendar.delete_event"] > run["b"]["calendar.delete_event"]
    assert run["b"]["rooms.book_room"] > run["a"]["rooms.book_room"]


def test_classifier_constant_labels(small_library, small_tasks):
    # trained on tasks 2 and 5 only: add_event and Event are in every gold set, the rest in none
    run = ClassifierRetriever(features="tfidf").fit(small_library, [small_tasks[1], small_tasks[4]]).search(
        {"q": "book a room"}, 10)
    assert run["q"]["calendar.add_event"] == 1.0 and run["q"]["rooms.book_room"] == 0.0


def test_learned_retrievers_reject_bad_parameters():
    with pytest.raises(ValueError, match="features"):
        ClassifierRetriever(features="words")
    with pytest.raises(ValueError, match="C must be"):
        ClassifierRetriever(C=0)
    with pytest.raises(ValueError, match="neighbours"):
        KnnRetriever(neighbours=0)
    with pytest.raises(ValueError, match="neighbours must be an integer"):
        KnnRetriever(neighbours=2.5)
    with pytest.raises(ValueError, match="class_weight must be one of 'balanced', None"):
        ClassifierRetriever(class_weight="even")
    with pytest.raises(ValueError, match="max_iter must be an integer >= 1"):
        ClassifierRetriever(max_iter=0)
    with pytest.raises(ValueError, match="dense_weight must be a number >= 0"):
        ClassifierRetriever(dense_weight=-1.0)
    with pytest.raises(ValueError, match="model must be a non-empty string"):
        KnnRetriever(model="")
    with pytest.raises(ValueError, match="k1 must be a number > 0"):
        ExpansionRetriever(k1=0)
    with pytest.raises(ValueError, match="seed must be an integer"):
        RandomRetriever(seed="1")


def test_classifier_reports_its_fit_at_debug_level_only(small_library, small_tasks, caplog, capsys):
    with caplog.at_level(logging.DEBUG, logger="primsel"):
        ClassifierRetriever(features="tfidf").fit(small_library, small_tasks)
    # all 6 primitives are gold in some but not all of the 8 tasks: one model each
    assert [r.levelno for r in caplog.records] == [logging.DEBUG]
    assert caplog.records[0].getMessage() == "classifier: 6 primitives learned from 8 tasks"
    assert capsys.readouterr().err == ""


def test_oracle_ranks_gold_first_by_id(small_library):
    oracle = OracleRetriever().fit(small_library)
    oracle.set_gold({"q": {"rooms.Room", "calendar.Event"}})
    assert list(oracle.search({"q": "x"}, 3)["q"].items()) == [
        ("calendar.Event", 1.0), ("rooms.Room", 1.0), ("calendar.add_event", 0.0)]


def test_oracle_without_gold_is_an_error(small_library):
    with pytest.raises(RuntimeError, match="set_gold"):
        OracleRetriever().fit(small_library).search({"q": "x"}, 3)


def test_all_selects_the_library_in_id_order(small_library):
    assert list(AllRetriever().fit(small_library).search({"q": "x"}, 100)["q"]) == sorted(small_library)


def test_random_depends_on_seed_and_task_only(small_library):
    a = RandomRetriever(seed=1).fit(small_library).search({"q1": "x", "q2": "y"}, 6)
    b = RandomRetriever(seed=1).fit(small_library).search({"q2": "other text", "q1": "x"}, 6)
    c = RandomRetriever(seed=2).fit(small_library).search({"q1": "x"}, 6)
    assert a["q1"] == b["q1"] and a["q2"] == b["q2"]
    assert list(a["q1"]) != list(c["q1"])


@pytest.mark.parametrize("make", [lambda: KnnRetriever(features="tfidf"),
                                  lambda: ClassifierRetriever(features="tfidf")])
def test_learned_retrievers_fitted_on_queries_without_words_score_zero_with_a_warning(
        small_library, small_tasks, make, caplog):
    from dataclasses import replace

    # no word at all: scikit-learn's vectoriser would raise "empty vocabulary"
    wordless = [replace(t, query="?!") for t in small_tasks[:4]]
    with caplog.at_level(logging.WARNING, logger="primsel"):
        run = make().fit(small_library, wordless).search({"q": "book a room", "r": "…"}, 10)
    assert "no word in any of the 4 training queries" in caplog.text
    assert set(run) == {"q", "r"} and all(set(scores.values()) == {0.0} for scores in run.values())
    assert all(len(scores) == len(small_library) for scores in run.values())


def test_a_classifier_fitted_on_the_same_tasks_is_fitted_once_per_process(small_library, small_tasks, monkeypatch):
    """Cells, hybrids and nested folds that train a classifier on the same tasks share one fit
    (it is deterministic); other tasks, other parameters or an encoder of one's own fit again."""
    from sklearn.linear_model import LogisticRegression

    from primsel.retrieval import learned

    monkeypatch.setattr(learned, "_FITTED", {})
    fits = []
    real_fit = LogisticRegression.fit
    monkeypatch.setattr(LogisticRegression, "fit", lambda self, x, y: fits.append(1) or real_fit(self, x, y))
    queries = {t.id: t.query for t in small_tasks[6:]}
    first = ClassifierRetriever(features="tfidf").fit(small_library, small_tasks[:6])
    # primitives with both positive and negative training tasks: book_room, Room, add_event, Event, delete_event
    assert len(fits) == 5
    again = ClassifierRetriever(features="tfidf").fit(small_library, small_tasks[:6])
    assert len(fits) == 5 and again.search(queries, 6) == first.search(queries, 6)
    ClassifierRetriever(features="tfidf").fit(small_library, small_tasks[:5])
    ClassifierRetriever(features="tfidf", C=1.0).fit(small_library, small_tasks[:6])
    assert len(fits) == 5 + 5 + 5
    own = ClassifierRetriever(features="tfidf").set_encoder(lambda texts: [[0.0]] * len(texts))
    own.fit(small_library, small_tasks[:6])
    assert len(fits) == 20
