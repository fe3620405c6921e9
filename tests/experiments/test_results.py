"""The run folder (primsel.experiments.results): the config.json and experiment.json a run writes are the bytes
the dict literals of the cell and the runner wrote before the typed records, they read back byte-identically,
files of older versions read, and bad files are errors naming them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from primsel.datasets import load_builtin_tasks
from primsel.experiments import cell as cell_module
from primsel.retrieval.windows import embedding_windows
from primsel.experiments.config import expand, parse_config
from primsel.experiments.dataset import make_dataset
from primsel.experiments.records import ConfigFile, ManifestCell, ManifestFile, ReportError, RunFileError
from primsel.experiments.results import load_experiment, read_config, read_manifest
from primsel.experiments.runner import _manifest, changed_sources, run_experiment
from primsel.files import dumps_json
from primsel.library import with_gold
from primsel.simulator.library import build_library

LIBRARY = build_library()
TASKS = with_gold(load_builtin_tasks()[:4], LIBRARY)


def legacy_config(cell, ctx, outcome_report, sources):
    """config.json as :func:`primsel.experiments.cell.write_cell` built it before the record."""
    s = cell.settings
    return {
        "id": cell.id,
        "label": cell.label,
        "experiment": ctx.experiment,
        "settings": s.to_json(),
        "data": ctx.dataset.summary(),
        "effective_folds": ctx.store.effective_folds(s.folds),
        **({"extraction": outcome_report.to_json().get("extraction")} if s.generator else {}),
        **({"embedding": windows} if (windows := embedding_windows(s.retriever, ctx.library)) else {}),
        "library": {"n_primitives": len(ctx.library), "fingerprint": ctx.store.library_fingerprint()},
        "sources": sources if sources is not None else s.sources(),
        "versions": ctx.versions,
    }


def legacy_manifest(config, datasets, cells):
    """experiment.json as :func:`primsel.experiments.runner._manifest` built it before the record."""
    if len(datasets) == 1:
        data = datasets[0].summary()
    else:
        data = {"source": "+".join(d.source for d in datasets), "n_tasks": sum(len(d.tasks) for d in datasets),
                "fingerprint": "+".join(d.fingerprint for d in datasets)}
    manifest = {
        "name": config.name,
        "description": config.description,
        "baseline": config.baseline,
        "data": data,
        "grids": [{k: [str(x) if isinstance(x, Path) else x for x in v] for k, v in g.items()} for g in config.grids],
        "cells": [{"id": c.id, "label": c.label, "settings": c.settings.to_json()} for c in cells],
    }
    if len(datasets) > 1:
        manifest["datasets"] = [{**d.summary(), "notes": list(d.notes)} for d in datasets]
    elif datasets[0].notes:
        manifest["notes"] = list(datasets[0].notes)
    if config.pair_on is not None:
        manifest["pair_on"] = list(config.pair_on)
    return manifest


def answers(tmp_path):
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps({"task_id": t.id, "program": t.program}) + "\n" for t in TASKS))
    return path


@pytest.mark.parametrize("generator", [False, True])
def test_a_run_writes_the_bytes_of_before_and_they_read_back_identically(tmp_path, monkeypatch, generator):
    legacy = {}
    write_cell = cell_module.write_cell

    def spy(cell, ctx, directory, outcome, seconds, sources=None):
        report = write_cell(cell, ctx, directory, outcome, seconds, sources)
        legacy[cell.id] = legacy_config(cell, ctx, report, sources)
        return report

    monkeypatch.setattr(cell_module, "write_cell", spy)
    table = {"name": "files", "description": "Two cells.", "retriever": "bm25", "folds": 2,
             "grid": {"k": [3, 5]}, "pair_on": ["k"]}
    if generator:
        table["generator"] = {"type": "replay", "programs": str(answers(tmp_path)), "extraction": "aspera"}
    result = run_experiment(parse_config(table), tmp_path / "runs", tasks=TASKS, library=LIBRARY, progress=False,
                            use_cache=False, workers=1)
    manifest_path = result.directory / "experiment.json"
    manifest = read_manifest(result.directory)
    assert dumps_json(manifest.to_json()) == manifest_path.read_text(encoding="utf-8")
    assert [c.id for c in manifest.cells] == [c.id for c in result.cells] and manifest.pair_on == ("k",)
    assert sorted(legacy) == sorted(c.id for c in result.cells)
    for entry in manifest.cells:
        path = result.directory / entry.id / "config.json"
        text = path.read_text(encoding="utf-8")
        assert text == dumps_json(legacy[entry.id])
        config = read_config(path.parent)
        assert dumps_json(config.to_json()) == text and config.to_json() == json.loads(text)
        written = ("extraction" in config.to_json(), config.extraction)
        assert written == ((True, "aspera") if generator else (False, None))
        assert config.sources and config.versions and config.extra == {}
        assert changed_sources(path.parent, config.sources) == []


def _datasets(notes=()):
    one = make_dataset(TASKS[:2], notes=notes)
    two = make_dataset(TASKS[2:], notes=("merged 1 duplicate",))
    return one, two


@pytest.mark.parametrize("several", [False, True])
@pytest.mark.parametrize("notes", [(), ("dropped 2 tasks",)])
@pytest.mark.parametrize("pair_on", [None, ["k"]])
def test_the_manifest_is_the_dict_the_runner_built_before(several, notes, pair_on):
    table = {"name": "m", "description": "Grid of k.", "baseline": "bm25", "retriever": "bm25",
             "grid": {"k": [3, 5]}}
    if pair_on is not None:
        table["pair_on"] = pair_on
    config = parse_config(table)
    datasets = list(_datasets(notes)) if several else [_datasets(notes)[0]]
    cells = [c for d in datasets for c in expand(config, dataset=d.fingerprint)]
    record = _manifest(config, datasets, cells)
    expected = legacy_manifest(config, datasets, cells)
    assert record.to_json() == expected and dumps_json(record.to_json()) == dumps_json(expected)
    assert list(record.to_json()) == list(expected)  # the same keys in the same order
    assert ManifestFile.from_json(json.loads(dumps_json(expected))) == record


def test_files_of_older_versions_read(tmp_path):
    # config.json as the first version wrote it: no extraction, embedding, sources
    first = {"id": "c1", "label": "bm25 k=5", "experiment": "old", "settings": {"retriever": "bm25", "k": 5},
             "data": {"source": "builtin", "n_tasks": 4, "fingerprint": "f"}, "effective_folds": 5,
             "library": {"n_primitives": 65, "fingerprint": None}, "versions": {"python": "3.12"}}
    config = ConfigFile.from_json(first)
    assert (config.sources, config.embedding, config.extraction) == ({}, {}, None)
    assert "extraction" not in config.to_json()
    # hand-made files of the tests and of users: the id alone
    bare = ConfigFile.from_json({"id": "c2"})
    assert (bare.label, bare.experiment, bare.settings, bare.data, bare.effective_folds) == (None, None, {}, {}, None)
    manifest = ManifestFile.from_json({"cells": [{"id": "c1"}]})
    assert (manifest.name, manifest.description, manifest.baseline, manifest.data, manifest.grids) == (
        None, None, None, {}, ())
    assert (manifest.datasets, manifest.notes, manifest.pair_on) == ((), (), None)
    assert manifest.cells == (ManifestCell(id="c1"),)
    # a folder of such files reports: labels default to ids, the name to the directory's
    root = tmp_path / "old"
    (root / "c1").mkdir(parents=True)
    (root / "c1" / "config.json").write_text(json.dumps({"id": "c1", "settings": {"retriever": "bm25", "k": 5}}))
    (root / "c1" / "report.json").write_text(json.dumps({"recall@5": 0.5}))
    experiment = load_experiment(root)
    assert (experiment.name, experiment.description, [c.label for c in experiment.cells]) == ("old", "", ["c1"])
    assert experiment.cells[0].settings == {"retriever": "bm25", "k": 5}
    (root / "experiment.json").write_text(json.dumps({"name": "old", "cells": [{"id": "c1"}]}))
    experiment = load_experiment(root)
    assert (experiment.cells[0].label, experiment.cells[0].settings, experiment.pair_on) == ("c1", {}, None)
    # a config.json without sources: every component counts as changed
    assert changed_sources(root / "c1", {"retriever": {"bm25": "abc"}}) == ["bm25"]


def test_unknown_keys_are_kept():
    data = {"id": "c", "label": "l", "experiment": "e", "settings": {}, "data": {}, "effective_folds": 2,
            "library": {}, "sources": {}, "versions": {}, "later": [1, 2]}
    config = ConfigFile.from_json(data)
    assert config.extra == {"later": [1, 2]} and config.to_json() == data
    manifest = {"name": "n", "description": "", "baseline": None, "data": {}, "grids": [{}],
                "cells": [{"id": "c", "label": "l", "settings": {}, "tag": "x"}], "later": True}
    record = ManifestFile.from_json(manifest)
    assert record.extra == {"later": True} and record.cells[0].extra == {"tag": "x"}
    assert record.to_json() == manifest


@pytest.mark.parametrize(("text", "message"), [
    ("{not json", "unreadable"),
    ("[1, 2]", "not a JSON object"),
    ('{"label": "x"}', "no 'id'"),
    ('{"id": "c", "settings": [1]}', "'settings' must be a table"),
])
def test_a_bad_config_is_an_error_naming_the_file(tmp_path, text, message):
    path = tmp_path / "c" / "config.json"
    path.parent.mkdir()
    path.write_text(text)
    with pytest.raises(RunFileError, match=message) as info:
        read_config(path.parent)
    assert str(path) in str(info.value)
    with pytest.raises(ReportError, match=message):  # a folder without experiment.json
        load_experiment(tmp_path)
    assert read_config(tmp_path / "none") is None


@pytest.mark.parametrize(("manifest", "message"), [
    ({"name": "n"}, "no 'cells'"),
    ({"cells": {"id": "c"}}, "'cells' must be a list"),
    ({"cells": [{"label": "c"}]}, "a cell entry without 'id'"),
    ({"cells": ["c"]}, "a cell entry must be a table"),
    ({"cells": [], "pair_on": "k"}, "'pair_on' must be a list of strings"),
    ({"cells": [], "datasets": [1]}, "'datasets' must be a list of tables"),
])
def test_a_bad_manifest_is_an_error_naming_the_file(tmp_path, manifest, message):
    (tmp_path / "experiment.json").write_text(json.dumps(manifest))
    with pytest.raises(RunFileError, match=message) as info:
        read_manifest(tmp_path)
    assert str(tmp_path / "experiment.json") in str(info.value)
    with pytest.raises(ReportError, match=message):
        load_experiment(tmp_path)
