"""The run explorer: the site's files, and the site opened in headless Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from primsel.cli import main
from primsel.datasets import load_builtin_tasks
from primsel.eval.faults import make_faults
from primsel.experiments.config import load_config
from primsel.experiments.runner import run_experiment
from primsel.explore.browser import BrowserError, Chromium, find_chromium
from primsel.explore.site import build_site
from primsel.library import with_gold
from primsel.simulator.library import build_library
from primsel.simulator.program import load_apps, star_exports

READY = "!!(document.body && document.body.dataset.ready === '1')"
#: A comment that must show as text, never as markup.
MARKUP = "# <b id='injected'>bold</b>"


def library_names() -> set[str]:
    return {name for module in load_apps().values() for name, value in star_exports(module).items()
            if callable(value) and getattr(value, "__module__", "").startswith("primsel.simulator.apps.")}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A two-cell run on the built-in tasks whose replayed programs fail in several ways."""
    root = tmp_path_factory.mktemp("explore")
    names = library_names()
    rows = []
    for i, task in enumerate(load_builtin_tasks()):
        program = task.program
        if i % 4 == 1:  # a changed constant or a flipped comparison
            kind = "change_constant" if i % 8 == 1 else "flip_comparison"
            faults = make_faults(task.id, task.program, names, kinds=[kind]) or make_faults(task.id, task.program, names)
            program = faults[0].program
        elif i == 2:
            program = "def plan():\n    return find_meetings_with('Tomasz')\n"
        elif i == 3:
            continue  # absent from the file: no program
        if i == 0:
            program = program.replace("\n", f"  {MARKUP}\n", 1)
        rows.append({"task_id": task.id, "program": program})
    (root / "programs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "site.toml").write_text(
        'name = "site"\nbaseline = "bm25"\n[generator]\ntype = "replay"\nprograms = "programs.jsonl"\n'
        '[grid]\nretriever = ["bm25", "oracle"]\nk = [5]\n')
    library = build_library()
    result = run_experiment(load_config(root / "site.toml"), root / "runs", tasks=with_gold(load_builtin_tasks(), library),
                            library=library, progress=False, use_cache=False)
    from primsel.reporting import write_report

    write_report(result.directory, n_resamples=200)
    return result.directory


def rows_of(run_dir: Path, cell: str) -> list[dict]:
    return [json.loads(line) for line in (run_dir / cell / "tasks.jsonl").read_text().splitlines()]


def loaded(path: Path) -> tuple[str, object]:
    """(kind, data) of a data script ``PRIMSEL.load("kind",key,data);``."""
    match = re.fullmatch(r'PRIMSEL\.load\("(\w+)",(null|"[^"]*"),(.*)\);\n', path.read_text(), re.S)
    assert match, path
    return match.group(1), json.loads(match.group(3))


def test_site_files_hold_every_cell_and_task(run_dir, tmp_path):
    index = build_site(run_dir, tmp_path / "site")
    assert index == tmp_path / "site" / "index.html"
    kind, data = loaded(tmp_path / "site" / "data" / "index.js")
    manifest = json.loads((run_dir / "experiment.json").read_text())
    assert kind == "index" and [c["id"] for c in data["cells"]] == [c["id"] for c in manifest["cells"]]
    # a generator experiment has a success plot; every experiment the recall/tokens frontier
    assert sorted(data["plots"]) == ["plots/site_frontier.png", "plots/site_recall_at_k.png",
                                     "plots/site_recall_vs_tokens.png", "plots/site_success.png"]
    assert all((tmp_path / "site" / p).is_file() for p in data["plots"])
    assert "<table>" in data["summary_html"]
    # each cell carries the colour of its configuration in the report's figures
    colours = json.loads((run_dir / "colours.json").read_text())["cells"]
    assert {c["id"]: c["colour"] for c in data["cells"]} == colours
    assert all(re.fullmatch(r"#[0-9a-f]{6}", c) for c in colours.values())
    for cell in manifest["cells"]:
        kind, rows = loaded(tmp_path / "site" / "data" / "cells" / f"{cell['id']}.js")
        source = rows_of(run_dir, cell["id"])
        assert [r["id"] for r in rows] == [r["task_id"] for r in source]
        assert [r["status"] for r in rows] == [r["status"] for r in source]
        assert [r["category"] for r in rows] == [(r["attribution"] or {}).get("category") for r in source]
    kind, texts = loaded(tmp_path / "site" / "data" / "tasks.js")
    assert {t: v["query"] for t, v in texts.items()} == {t.id: t.query for t in load_builtin_tasks()}
    for name in ("explorer.js", "explorer.css"):
        assert "http" not in (tmp_path / "site" / "assets" / name).read_text()  # nothing from the network


def test_explore_command(run_dir, tmp_path, capsys):
    assert main(["explore", str(run_dir), "--out", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "out" / "index.html")
    assert main(["explore", str(tmp_path)]) == 2
    assert "not an experiment directory" in capsys.readouterr().err


@pytest.fixture(scope="module")
def browser():
    if find_chromium() is None:
        pytest.skip("no Chromium (Debian package 'chromium'; .ci/run installs it)")
    pytest.importorskip("websocket", reason="websocket-client (the dev extra) drives Chromium")
    try:
        with Chromium() as chromium:
            yield chromium
    except BrowserError as exc:  # pragma: no cover - a broken browser install
        pytest.skip(f"Chromium does not start here: {exc}")


def count(browser, table: str) -> int:
    return browser.evaluate(f"document.querySelectorAll('#{table} tbody tr').length")


def choose(browser, select: str, value: str) -> None:
    browser.evaluate(f"(() => {{ const s = document.getElementById('{select}'); s.value = {json.dumps(value)};"
                     "s.dispatchEvent(new Event('change', {bubbles: true})); })()")


def test_explorer_in_headless_chromium(run_dir, tmp_path, browser):
    url = build_site(run_dir, tmp_path / "site").resolve().as_uri()
    manifest = json.loads((run_dir / "experiment.json").read_text())
    bm25 = next(c["id"] for c in manifest["cells"] if c["settings"]["retriever"] == "bm25")
    oracle = next(c["id"] for c in manifest["cells"] if c["settings"]["retriever"] == "oracle")
    rows = rows_of(run_dir, bm25)
    browser.errors.clear()

    # the index: both cells, a retriever filter that hides one
    browser.open(url)
    browser.wait_for(READY)
    assert browser.evaluate("document.body.dataset.view") == "index"
    assert count(browser, "cells") == 2
    choose(browser, "filter-retriever", "oracle")
    assert count(browser, "cells") == 1
    assert browser.evaluate("document.querySelector('#cells tbody a').textContent").startswith("oracle")
    assert browser.evaluate("Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
    # figures keep their aspect ratio (a flex row used to stretch them)
    assert browser.evaluate("Array.from(document.querySelectorAll('.plots img')).every(i => "
                            "Math.abs(i.clientHeight / i.clientWidth - i.naturalHeight / i.naturalWidth) < 0.01)")
    # the cell's swatch has its configuration's colour in the report's figures
    colour = json.loads((run_dir / "colours.json").read_text())["cells"][oracle]
    rgb = "rgb(" + ", ".join(str(int(colour[i:i + 2], 16)) for i in (1, 3, 5)) + ")"
    assert browser.evaluate("getComputedStyle(document.querySelector('#cells .swatch')).backgroundColor") == rgb

    # a cell: filters by status, category, module and primitive change the visible rows
    browser.open(f"{url}#/cell/{bm25}")
    browser.wait_for(READY)
    assert count(browser, "tasks") == len(rows)
    failed = [r for r in rows if r["status"] != "pass"]
    assert 0 < len(failed) < len(rows)
    choose(browser, "filter-status", "pass")
    assert count(browser, "tasks") == len(rows) - len(failed)
    choose(browser, "filter-status", "")
    category = failed[0]["attribution"]["category"]
    choose(browser, "filter-category", category)
    assert count(browser, "tasks") == sum(1 for r in failed if r["attribution"]["category"] == category)
    choose(browser, "filter-category", "")
    choose(browser, "filter-module", "room_booking")
    assert count(browser, "tasks") == sum(1 for r in rows if any(g.startswith("room_booking.") for g in r["gold"]))
    choose(browser, "filter-module", "")
    choose(browser, "filter-primitive", "work_calendar.delete_event")
    assert count(browser, "tasks") == sum(1 for r in rows if "work_calendar.delete_event"
                                          in r["gold"] + r["selection"] + r["called_primitives"])
    choose(browser, "filter-primitive", "")
    browser.evaluate("document.querySelector('#tasks th').click()")  # sort by task, then descending
    browser.evaluate("document.querySelector('#tasks th').click()")
    assert browser.evaluate("document.querySelector('#tasks tbody a').textContent") == max(r["task_id"] for r in rows)

    # a failed task: its failing line is marked in the program
    located = next(r for r in failed if (r["attribution"] or {}).get("divergence_line"))
    browser.open(f"{url}#/task/{bm25}/{located['task_id']}")
    browser.wait_for(READY)
    assert browser.evaluate("document.body.dataset.view") == "task"
    marked = browser.evaluate("Array.from(document.querySelectorAll('#program .failing')).map(e => +e.dataset.line)")
    assert marked == [located["attribution"]["divergence_line"]]
    missed = browser.evaluate("Array.from(document.querySelectorAll('#selection .missed')).map(e => e.textContent)")
    assert missed == [g for g in located["gold"] if g not in located["selection"]]

    # text from the run is shown as text
    browser.open(f"{url}#/task/{bm25}/{rows[0]['task_id']}")
    browser.wait_for(READY)
    assert browser.evaluate("document.getElementById('injected') === null")
    assert MARKUP in browser.evaluate("document.getElementById('program').textContent")

    # two cells: the tasks that pass in one and fail in the other
    other = {r["task_id"]: r["status"] for r in rows_of(run_dir, oracle)}
    flips = sum(1 for r in rows if (r["status"] == "pass") != (other[r["task_id"]] == "pass"))
    browser.open(f"{url}#/compare/{bm25}/{oracle}")
    browser.wait_for(READY)
    assert count(browser, "flips") == flips if flips else browser.evaluate("document.getElementById('flips') === null")
    assert browser.errors == []


@pytest.mark.parametrize("cell_id", ["../../../escaped", "/abs/escaped", "a/b", "..", ""])
def test_a_cell_id_that_is_not_a_folder_name_is_refused_before_anything_is_written(tmp_path, capsys, cell_id):
    """A cell id names the cell's folder and its files in the site: ``../`` or an absolute id
    would lead outside the run and outside ``--out``."""
    run = tmp_path / "deep" / "er" / "run"
    (run / "c0").mkdir(parents=True)
    for folder in (run / "c0", tmp_path / "escaped"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "report.json").write_text(json.dumps({"recall@5": 1.0}))
        (folder / "tasks.jsonl").write_text(json.dumps({"task_id": "1", "metrics": {"recall@5": 1.0}}) + "\n")
    cells = [{"id": "c0", "label": "a", "settings": {"retriever": "bm25", "k": 5}},
             {"id": cell_id, "label": "b", "settings": {"retriever": "bm25", "k": 5}}]
    (run / "experiment.json").write_text(json.dumps({"name": "run", "cells": cells}))
    before = sorted(p for p in tmp_path.rglob("*"))
    assert main(["explore", str(run), "--out", str(tmp_path / "deep" / "er" / "site")]) == 2
    err = capsys.readouterr().err
    assert f"the cell id {cell_id!r} is not the name of a cell folder" in err
    assert sorted(p for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("source", ["beir-toy", "metatool", "apibench-huggingface", "asper-bench"])
def test_task_texts_come_only_from_the_dataset_the_run_was_computed_on(tmp_path, monkeypatch, source):
    """A BEIR (MetaTool, APIBench) run whose query ids are "1", "2" never shows the Asper-Bench
    tasks of those ids, even with $PRIMSEL_ASPER_BENCH set; a run on Asper-Bench shows them."""
    import primsel.explore.site as site
    from primsel.types import Task

    archive = tmp_path / "asper.tgz"
    archive.write_bytes(b"")
    monkeypatch.setenv("PRIMSEL_ASPER_BENCH", str(archive))
    monkeypatch.setattr(site, "resolve_dataset", lambda data: archive)
    asper = [Task(id="1", query="an Asper-Bench query", program="def f():\n    pass\n",
                  setup_programs=("pass",), evaluation_programs=("pass",))]
    monkeypatch.setattr(site, "load_tasks", lambda path: asper if path == archive else [])
    run = tmp_path / "run"
    (run / "c0").mkdir(parents=True)
    (run / "c0" / "report.json").write_text(json.dumps({"recall@5": 1.0}))
    (run / "c0" / "tasks.jsonl").write_text(json.dumps({"task_id": "1", "metrics": {"recall@5": 1.0}}) + "\n")
    (run / "experiment.json").write_text(json.dumps({
        "name": "run", "data": {"source": source, "n_tasks": 1},
        "cells": [{"id": "c0", "label": "bm25 k=5", "settings": {"retriever": "bm25", "k": 5}}]}))
    build_site(run, tmp_path / "site")
    kind, texts = loaded(tmp_path / "site" / "data" / "tasks.js")
    expected = {"1": {"query": "an Asper-Bench query", "reference": "def f():\n    pass\n", "pairs": 1}}
    assert texts == (expected if source == "asper-bench" else {})
