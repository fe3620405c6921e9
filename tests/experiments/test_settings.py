"""A cell's settings: typed, frozen, checked once on construction against their components' bounds."""

from __future__ import annotations

import dataclasses

import pytest

from primsel import checks
from primsel.experiments.reflection import Reflection
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


def test_every_bound_lives_in_checks():
    assert MAX_TIMEOUT is checks.MAX_TIMEOUT == 86400.0
    assert checks.TIMEOUT_BOUNDS == {"above": 0, "maximum": 86400.0}
    assert checks.FOLDS_BOUNDS["minimum"] == 2 and checks.SEED_BOUNDS["maximum"] == 4294967295
    assert checks.DEPTH_BOUNDS["minimum"] == 20 and checks.ROUNDS_BOUNDS["minimum"] == 1
    with pytest.raises(SettingError, match="depth: must be an integer >= 20, got 19"):
        CellSettings(retriever="bm25", depth=19)


def test_importing_the_settings_loads_no_retriever_and_no_sandbox():
    import subprocess
    import sys

    code = ("import sys, primsel.experiments.settings; "
            "print(sorted(m for m in ('primsel.retrieval', 'primsel.simulator.sandbox', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(("settings", "key", "problem"), [
    ({"retriever": "bm99"}, "retriever", "unknown retriever 'bm99'"),
    ({"retriever": {"type": "hybrid", "members": ["bm25", "nope"]}}, "retriever.members[1]", "unknown retriever 'nope'"),
    ({"retriever": {"type": "bm25", "k1": "x"}}, "retriever.k1", "retriever 'bm25' expects float, got string 'x'"),
    ({"retriever": "bm25", "selector": "best"}, "selector", "unknown selector 'best'"),
    ({"retriever": "bm25", "generator": {"type": "reference", "rounds": 2}}, "generator.rounds",
     "generator 'reference' cannot revise a program"),
    ({"retriever": "bm25", "generator": "reference", "reflection": {"rounds": 2}}, "reflection.rounds",
     "generator 'reference' cannot revise a program"),
    ({"retriever": "bm25", "reflection": {"rounds": 2}}, "reflection", "needs a generator"),
    ({"retriever": "bm25", "generator": {"type": "reference", "rounds": 1}, "reflection": {"feedback": "trace"}},
     "generator", "sets rounds, and so does reflection; set the reflection rounds in one place"),
    ({"retriever": "bm25", "generator": "reference", "reflection": {"round": 1}}, "reflection",
     "'round' is not a reflection setting; expected one of rounds, feedback, reselect"),
    ({"retriever": "bm25", "generator": "reference", "reflection": {"rounds": 0}}, "reflection",
     "rounds must be an integer >= 1, got 0"),
])
def test_construction_checks_the_whole_cell_and_names_the_key(settings, key, problem):
    with pytest.raises(SettingError) as info:
        CellSettings.from_mapping(settings)
    assert info.value.key == key and problem in info.value.problem, str(info.value)


def test_reflection_is_a_typed_field_and_keeps_the_cell_id_of_the_generator_table():
    inside = CellSettings(retriever="bm25", generator={"type": "openai", "model": "m", "rounds": 3, "reselect": True})
    apart = CellSettings(retriever="bm25", generator={"type": "openai", "model": "m"},
                         reflection={"rounds": 3, "reselect": True})
    assert inside == apart
    assert inside.generator == {"type": "openai", "model": "m"}
    assert inside.reflection == Reflection(rounds=3, feedback="error", reselect=True, given=("rounds", "reselect"))
    assert inside.reflection.configured and not CellSettings(retriever="bm25").reflection.configured
    # config.json (and so the cell id) holds the keys in the generator table, as before
    assert apart.to_json()["generator"] == {"type": "openai", "model": "m", "rounds": 3, "reselect": True}
    assert CellSettings.from_mapping(apart.to_json()) == apart


def test_for_dataset_changes_only_the_dataset():
    s = CellSettings(retriever="bm25", k=3, generator={"type": "reference", "rounds": 1})
    moved = s.for_dataset("builtin/32/abc")
    assert moved.dataset == "builtin/32/abc" and s.dataset == ""
    assert dataclasses.replace(moved, dataset="") == s
    with pytest.raises(SettingError, match="dataset: must be a string, got 3"):
        s.for_dataset(3)  # type: ignore[arg-type]
