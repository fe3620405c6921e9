"""A cell's settings: typed, frozen, checked once on construction against their components' bounds."""

from __future__ import annotations

import dataclasses

import pytest

from primsel.experiments.settings import CellSettings, SettingError, check_setting
from primsel.simulator.sandbox import MAX_TIMEOUT, Sandbox


def test_defaults_and_canonical_specifications():
    s = CellSettings(retriever={"type": "bm25"}, generator="reference")
    assert (s.retriever, s.k, s.closure, s.folds, s.seed, s.timeout) == ("bm25", 10, False, 5, 0, 10.0)
    assert s.generator == {"type": "reference"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.k = 3  # type: ignore[misc]


def test_to_json_holds_timeout_metrics_and_threshold_only_when_they_matter():
    plain = CellSettings(retriever="bm25", metrics=["mrr", "recall@5", "mrr"], dataset="d")
    assert plain.to_json() == {"retriever": "bm25", "k": 10, "closure": False, "folds": 5, "seed": 0,
                               "generator": None, "metrics": ["mrr", "recall@5"], "dataset": "d"}
    generated = CellSettings(retriever="bm25", generator={"type": "reference"}, timeout=3, threshold=1)
    assert generated.to_json()["timeout"] == 3.0 and generated.to_json()["threshold"] == 1.0
    assert CellSettings.from_mapping(generated.to_json()) == generated


def test_the_timeout_bound_is_the_sandboxes():
    assert CellSettings(retriever="bm25", timeout=MAX_TIMEOUT).timeout == MAX_TIMEOUT
    with pytest.raises(SettingError) as info:
        CellSettings(retriever="bm25", timeout=MAX_TIMEOUT + 1)
    assert info.value.key == "timeout" and info.value.problem == f"must be a number <= 86400, got {MAX_TIMEOUT + 1}"
    with pytest.raises(ValueError, match="timeout"):  # the sandbox refuses the same value
        Sandbox(workers=1, timeout=MAX_TIMEOUT + 1)


@pytest.mark.parametrize(("key", "value", "problem"), [
    ("k", 0, "must be an integer >= 1, got 0"),
    ("k", True, "must be an integer, got True"),
    ("folds", 1, "must be an integer >= 2, got 1"),
    ("seed", -1, "must be an integer >= 0, got -1"),
    ("closure", "yes", "must be true or false, got 'yes'"),
    ("timeout", float("nan"), "must be a finite number, got nan"),
    ("threshold", "0.5", "must be a number, got '0.5'"),
    ("metrics", ["recall"], "needs a cut-off"),
    ("retriever", {"k1": 2}, "needs a 'type' string"),
    ("colour", 1, "is not a cell setting"),
])
def test_bad_values_name_the_setting(key, value, problem):
    with pytest.raises(SettingError) as info:
        check_setting(key, value)
    assert info.value.key == key and problem in info.value.problem


def test_from_mapping_refuses_unknown_keys_and_needs_a_retriever():
    with pytest.raises(SettingError, match="colour: is not a cell setting"):
        CellSettings.from_mapping({"retriever": "bm25", "colour": 1})
    with pytest.raises(SettingError, match="retriever: is missing"):
        CellSettings.from_mapping({"k": 5})
