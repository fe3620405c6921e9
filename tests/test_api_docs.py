"""docs/api.md runs: its ```python blocks, in order, in one namespace, on the built-in tasks; and
the faults a notebook user met are fixed (tasks with no gold, ``gold_primitives(task, ...)``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from primsel import api
from primsel.library import gold_primitives

PAGE = Path(__file__).parents[1] / "docs" / "api.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def test_the_page_has_the_examples_the_api_is_read_by():
    blocks = BLOCK.findall(PAGE.read_text(encoding="utf-8"))
    code = "\n".join(blocks)
    assert len(blocks) == 5
    for name in api.__all__:
        if name != "DEFAULT_METRICS":
            assert f"api.{name}(" in code, name


def test_every_example_of_the_page_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)
    monkeypatch.setenv("PRIMSEL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "api_md"}
    for number, block in enumerate(BLOCK.findall(PAGE.read_text(encoding="utf-8")), start=1):
        exec(compile(block, f"docs/api.md block {number}", "exec"), namespace)  # noqa: S102
    assert (tmp_path / "runs" / "api_example" / "experiment.json").is_file()
    assert len(namespace["experiment"].cells) == 4
    out = capsys.readouterr().out
    assert "builtin-01" in out


def test_loaded_tasks_have_gold_and_score_without_error(monkeypatch):
    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)
    tasks = api.load_tasks()
    assert len(tasks) == 32 and all(t.gold for t in tasks)
    # builtin-01's reference program (primsel/datasets/builtin/tasks.nt) calls these, among others
    assert {"work_calendar.add_event", "time_utils.time_by_hm"} <= tasks[0].gold
    # the oracle ranks the gold first: recall@65 and complete@65 are 1 by construction
    run = api.rank("oracle", tasks)
    assert api.score(run, tasks, ["recall@65", "complete@65"]) == {"recall@65": 1.0, "complete@65": 1.0}


def test_gold_primitives_takes_a_task():
    library = api.load_library()
    task = api.load_tasks()[0]
    assert gold_primitives(task, library) == gold_primitives(task.program, library) == task.gold
    with pytest.raises(TypeError, match="source or a Task, got int"):
        gold_primitives(3, library)


def test_scoring_tasks_without_gold_says_where_gold_comes_from():
    from primsel.datasets import load_builtin_tasks

    bare = load_builtin_tasks()[:2]
    with pytest.raises(ValueError, match="primsel.api.load_tasks fills them"):
        api.score({t.id: {} for t in bare}, bare, ["recall@5"])


def test_a_frame_without_pandas_says_how_to_install_it(monkeypatch, tmp_path):
    import builtins

    real_import = builtins.__import__

    def no_pandas(name, *args, **kwargs):
        if name == "pandas":
            raise ImportError("No module named 'pandas'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    with pytest.raises(ImportError, match="pip install pandas"):
        api.tasks_frame(Path(__file__).parent / "experiments" / "fixtures" / "typed_records")
