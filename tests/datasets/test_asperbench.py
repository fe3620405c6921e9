"""Loading Asper-Bench from the released archive, its errors, and the built-in tasks."""

from __future__ import annotations

import io
import re
import shutil
import tarfile
import textwrap

import pytest

from primsel.datasets import (
    ENV_VAR,
    DatasetError,
    load_asper_bench,
    load_builtin_tasks,
    load_tasks,
    resolve_dataset,
)
from primsel.datasets.asperbench import sha256_of

TWO_CASE = ["141", "142", "145", "146", "147", "149", "154", "155", "161", "203"]


def synthetic_task(task_id: str, *, drop: str | None = None, extra_eval: bool = False) -> str:
    """One task record in the shards' NestedText schema (made-up content)."""
    fields = {
        "query_id": f"query_id: {task_id}",
        "program": "program:\n    > def answer():\n    >     return 42",
        "query": f"query: Hey, [Assistant], question {task_id}.",
        "scenario": textwrap.dedent(
            """\
            scenario:
                apps:
                    - exceptions
                    - time_utils
                simulation_tools:
                    - company_directory::simulate_org_structure
                evaluation_tools:
                    - exceptions::SolutionError
                symbols_in_apps:"""
        ),
        "state_generation_programs": "state_generation_programs:\n    -\n        > def setup_env():\n        >     pass",
        "evaluation_programs": "evaluation_programs:\n    -\n        > def evaluate(query, executable, setup_function):\n"
        "        >     setup_function()\n        >     assert executable() == 42",
        "timestamp": "timestamp: 2024-01-01 00:00:00",
    }
    if extra_eval:
        fields["evaluation_programs"] += "\n    -\n        > def evaluate_again(query, executable, setup_function):\n        >     pass"
    lines = [text for key, text in fields.items() if key != drop]
    return "-\n" + textwrap.indent("\n".join(lines), "    ") + "\n"


def build_archive(path, members: dict[str, str]) -> None:
    """A gzip tar with the given (name -> text) members."""
    with tarfile.open(path, "w:gz") as archive:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


# -- the real archive -------------------------------------------------------------------------


@pytest.mark.asper
def test_archive_has_250_tasks_in_numeric_order(asper_path):
    tasks = load_asper_bench(asper_path)
    assert [t.id for t in tasks] == [str(i) for i in range(1, 251)]
    assert {t.source for t in tasks} == {"asper-bench"}
    assert all(t.gold == frozenset() for t in tasks)
    assert [t.id for t in tasks if len(t.setup_programs) == 2] == TWO_CASE
    assert all(len(t.setup_programs) == len(t.evaluation_programs) >= 1 for t in tasks)


@pytest.mark.asper
def test_archive_scenarios(asper_path):
    tasks = load_asper_bench(asper_path)
    with_rooms = ("exceptions", "time_utils", "room_booking", "company_directory", "work_calendar")
    without_rooms = ("exceptions", "time_utils", "company_directory", "work_calendar")
    assert [t.apps for t in tasks] == [without_rooms] * 31 + [with_rooms] * 219
    assert all(len(t.scenario["simulation_tools"]) == 5 for t in tasks)
    assert all(len(t.scenario["evaluation_tools"]) == 3 for t in tasks)
    assert all(t.entry_point and t.query.startswith("Hey, [Assistant], ") for t in tasks)


@pytest.mark.asper
def test_load_tasks_uses_the_path_then_the_environment_and_caches(asper_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(asper_path))
    first = load_tasks()
    second = load_tasks(asper_path)
    assert len(first) == 250 and first == second and first is not second
    assert all(a is b for a, b in zip(first, second))  # same cached Task objects, new list


@pytest.mark.asper
def test_tampered_copy_fails_the_checksum(asper_path, tmp_path):
    copy = tmp_path / asper_path.name
    shutil.copyfile(asper_path, copy)
    with copy.open("ab") as handle:
        handle.write(b"\0")
    with pytest.raises(DatasetError, match="sha256"):
        load_asper_bench(copy)
    with pytest.raises(DatasetError, match="sha256"):
        load_tasks(copy)


# -- errors -----------------------------------------------------------------------------------


def test_missing_file(tmp_path):
    missing = tmp_path / "nothing.tgz"
    with pytest.raises(DatasetError, match="not found"):
        load_asper_bench(missing)
    with pytest.raises(DatasetError, match="not found"):
        load_tasks(missing)
    with pytest.raises(DatasetError, match="not found"):
        resolve_dataset(missing)


def test_resolve_dataset_order(tmp_path, monkeypatch):
    given = tmp_path / "given.tgz"
    given.write_bytes(b"x")
    from_env = tmp_path / "env.tgz"
    from_env.write_bytes(b"x")
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert resolve_dataset(None) is None
    monkeypatch.setenv(ENV_VAR, str(from_env))
    assert resolve_dataset(None) == from_env
    assert resolve_dataset(given) == given
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "gone.tgz"))
    with pytest.raises(DatasetError, match=ENV_VAR):
        resolve_dataset(None)


def test_wrong_checksum_on_any_file(tmp_path):
    path = tmp_path / "a.tgz"
    build_archive(path, {"plans/queries_001.nt": synthetic_task("1")})
    with pytest.raises(DatasetError, match="sha256"):
        load_asper_bench(path)


def test_checksum_cache_follows_file_changes(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"abc")
    assert sha256_of(path) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    path.write_bytes(b"abcd")
    assert sha256_of(path) == "88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589"


def test_synthetic_archive_loads_sorted_and_skips_artefacts(tmp_path):
    path = tmp_path / "a.tgz"
    build_archive(
        path,
        {
            "./plans/queries_002.nt": synthetic_task("10"),
            "./plans/queries_001.nt": synthetic_task("2") + synthetic_task("1"),
            "./plans/._queries_001.nt": "\x00\x05binary resource fork",
            "./code/query_1.py": "this is not a shard",
            "./.gitignore": "*.pyc\n",
        },
    )
    tasks = load_asper_bench(path, sha256=None)
    assert [t.id for t in tasks] == ["1", "2", "10"]
    task = tasks[0]
    assert task.program == "def answer():\n    return 42"
    assert task.setup_programs == ("def setup_env():\n    pass",)
    assert task.apps == ("exceptions", "time_utils")
    assert task.scenario["evaluation_tools"] == ["exceptions::SolutionError"]
    assert "symbols_in_apps" not in task.scenario  # "" means absent (spec 10.2)
    assert task.entry_point == "answer"


def test_parsed_shards_are_cached_by_content(tmp_path, monkeypatch):
    from primsel.datasets import asperbench
    from primsel.files import cache_dir, caches_disabled

    path = tmp_path / "a.tgz"
    build_archive(path, {"plans/q1.nt": synthetic_task("2") + synthetic_task("1"), "plans/q2.nt": synthetic_task("3")})
    with caches_disabled():
        parsed = load_asper_bench(path, sha256=None)
    assert not (cache_dir() / "datasets").exists()  # nothing written while caches are off
    assert load_asper_bench(path, sha256=None) == parsed  # parsed, and the parse kept
    [entry] = (cache_dir() / "datasets").iterdir()
    assert entry.name == f"asper-bench-{sha256_of(path)}-{asperbench.SHARD_CACHE_FORMAT}.json"

    def no_parsing(text, where):
        raise AssertionError(f"{where} parsed again")

    parse = asperbench._parsed
    monkeypatch.setattr(asperbench, "_parsed", no_parsing)
    assert load_asper_bench(path, sha256=None) == parsed  # from the cache, the same tasks
    monkeypatch.setattr(asperbench, "_parsed", parse)
    entry.write_text("[[\"plans/q1.nt\"", encoding="utf-8")  # cut off: parsed again
    assert load_asper_bench(path, sha256=None) == parsed
    other = tmp_path / "b.tgz"
    build_archive(other, {"plans/q1.nt": synthetic_task("5")})  # other content, its own entry
    assert [t.id for t in load_asper_bench(other, sha256=None)] == ["5"]
    assert len(list((cache_dir() / "datasets").iterdir())) == 2


def test_malformed_shard_names_the_member(tmp_path):
    path = tmp_path / "a.tgz"
    build_archive(path, {"plans/queries_003.nt": "-\n    query_id: 1\n   program: x\n"})
    with pytest.raises(DatasetError, match=r"a\.tgz:plans/queries_003\.nt line 3: invalid NestedText"):
        load_asper_bench(path, sha256=None)


def test_shard_that_is_not_a_list(tmp_path):
    path = tmp_path / "a.tgz"
    build_archive(path, {"plans/queries_001.nt": "query_id: 1\n"})
    with pytest.raises(DatasetError, match="expected a list of tasks"):
        load_asper_bench(path, sha256=None)


@pytest.mark.parametrize("key", ["program", "query", "scenario", "evaluation_programs"])
def test_task_missing_a_key_names_task_and_key(tmp_path, key):
    path = tmp_path / "a.tgz"
    build_archive(path, {"plans/queries_001.nt": synthetic_task("1") + synthetic_task("7", drop=key)})
    with pytest.raises(DatasetError, match=rf"queries_001\.nt task '7': missing key '{key}'"):
        load_asper_bench(path, sha256=None)


def test_unpaired_programs_and_duplicate_ids(tmp_path):
    path = tmp_path / "a.tgz"
    build_archive(path, {"plans/queries_001.nt": synthetic_task("4", extra_eval=True)})
    with pytest.raises(DatasetError, match="task '4': 1 state_generation_programs but 2 evaluation_programs"):
        load_asper_bench(path, sha256=None)
    build_archive(path, {"plans/q1.nt": synthetic_task("4"), "plans/q2.nt": synthetic_task("4")})
    with pytest.raises(DatasetError, match="task id '4' also occurs"):
        load_asper_bench(path, sha256=None)


def test_not_an_archive_and_no_shards(tmp_path):
    junk = tmp_path / "junk.tgz"
    junk.write_bytes(b"not a tar file at all")
    with pytest.raises(DatasetError, match="not a readable gzip tar archive"):
        load_asper_bench(junk, sha256=None)
    empty = tmp_path / "empty.tgz"
    build_archive(empty, {"code/query_1.py": "x = 1\n"})
    with pytest.raises(DatasetError, match="no task shard"):
        load_asper_bench(empty, sha256=None)


# -- built-in tasks ---------------------------------------------------------------------------


def test_builtin_tasks(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    tasks = load_builtin_tasks()
    assert len(tasks) >= 2
    assert [t.id for t in tasks] == [f"builtin-{i:02d}" for i in range(1, len(tasks) + 1)]
    assert {t.source for t in tasks} == {"builtin"}
    assert all(t.entry_point and t.apps for t in tasks)
    assert load_tasks() == tasks


def test_a_directory_is_not_an_archive(tmp_path, monkeypatch):
    with pytest.raises(DatasetError, match=f"{re.escape(str(tmp_path))} \\(from --data\\) is a directory"):
        resolve_dataset(tmp_path)
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    with pytest.raises(DatasetError, match=f"from \\${ENV_VAR}\\) is a directory"):
        load_tasks(None)
