"""Fixtures of the ASPERA protocol tests: where ASPERA's checkout is, its plans folders, and its own agents'
requests (``aspera_side.py``, run in a subprocess so that its imports and global side effects stay out of the
test process)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tarfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import nestedtext
import pytest

from primsel.datasets import load_builtin_tasks
from primsel.types import Task
from tests.aspera import scripted

REPO = Path(__file__).resolve().parents[2]
#: Where CI finds ASPERA's checkout: beside the repository, as the shared datasets are.
DEFAULT_CHECKOUT = REPO.parent / "shared" / "aspera" / "ml-aspera"
ASPERA_SIDE = Path(__file__).with_name("aspera_side.py")
#: The worked-example module every Asper-Bench task names; the built-in tasks are shown it too.
EXAMPLES_MODULE = "work_calendar_query_solution"


def checkout() -> Path | None:
    """``$PRIMSEL_ASPERA_SRC``, else the checkout beside the repository; None when neither holds ``src/aspera``."""
    value = os.environ.get("PRIMSEL_ASPERA_SRC")
    path = Path(value) if value else DEFAULT_CHECKOUT
    if (path / "src" / "aspera" / "agent" / "primitives_selection_agent.py").is_file():
        return path.resolve()
    return None


@pytest.fixture(scope="session")
def aspera_src() -> Path:
    """ASPERA's checkout; skips when it is absent."""
    found = checkout()
    if found is None:
        where = os.environ.get("PRIMSEL_ASPERA_SRC") or str(DEFAULT_CHECKOUT)
        pytest.skip(f"ASPERA's checkout (apple/ml-aspera) not found at {where}: set PRIMSEL_ASPERA_SRC")
    return found


@pytest.fixture()
def aspera_env(aspera_src, monkeypatch) -> Path:
    """``$PRIMSEL_ASPERA_SRC`` set to the checkout for primsel."""
    monkeypatch.setenv("PRIMSEL_ASPERA_SRC", str(aspera_src))
    return aspera_src


def write_plans(tasks: Iterable[Task], folder: Path) -> Path:
    """An ASPERA plans folder (``queries_001.nt``, its record layout) holding ``tasks``, shown ASPERA's worked
    examples (:data:`EXAMPLES_MODULE`)."""
    records = []
    for task in tasks:
        guidelines = dict(task.scenario.get("guidelines") or {})
        records.append({
            "query_id": task.id, "program": task.program, "query": task.query,
            "scenario": {"apps": list(task.apps), "query_solution": [EXAMPLES_MODULE],
                         "guidelines": {"generation_labelling": list(guidelines.get("generation_labelling") or []),
                                        "runtime_setup": [], "evaluation": []}},
            "state_generation_programs": list(task.setup_programs),
            "evaluation_programs": list(task.evaluation_programs),
        })
    folder.mkdir(parents=True, exist_ok=True)
    nestedtext.dump(records, folder / "queries_001.nt")
    return folder


def extract_plans(archive: Path, folder: Path) -> Path:
    """The Asper-Bench archive's own ``plans/queries_*.nt`` shards, as ASPERA reads them."""
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            name = Path(member.name).name
            if member.isfile() and Path(member.name).parent.name == "plans" and name.startswith("queries_"):
                source = tar.extractfile(member)
                assert source is not None
                (folder / name).write_bytes(source.read())
    return folder


class AsperaRun:
    """ASPERA's agents rendering requests in a subprocess (:func:`start_aspera`); :meth:`rows` waits for them."""

    def __init__(self, process: subprocess.Popen[bytes], out: Path, log: Path) -> None:
        self.process = process
        self.out = out
        self.log = log
        self._rows: dict[str, dict[str, Any]] | None = None

    def rows(self, timeout: float = 3600) -> dict[str, dict[str, Any]]:
        """``{task id: row}`` (see ``aspera_side.py``). Fails the test, with ASPERA's output, if it failed."""
        if self._rows is None:
            self.process.wait(timeout=timeout)
            if self.process.returncode != 0:
                error = self.log.read_text(encoding="utf-8", errors="replace")[-4000:]
                pytest.fail(f"ASPERA's side failed (exit {self.process.returncode}):\n{error}")
            rows = [json.loads(line) for line in self.out.read_text(encoding="utf-8").splitlines()]
            self._rows = {row["id"]: row for row in rows}
        return self._rows

    def close(self) -> None:
        """Stop ASPERA's side if it still runs (a test that failed before reading its rows)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def start_aspera(src: Path, plans: Path, tasks: Sequence[Mapping[str, Any]], agents: Sequence[str],
                 folder: Path) -> AsperaRun:
    """Start ASPERA's side on ``tasks`` (``id``, ``query``, and ``names`` for the ``given`` agent)."""
    job = folder / "aspera_job.json"
    job.write_text(json.dumps({"src": str(src), "plans": str(plans), "agents": list(agents), "tasks": list(tasks)}),
                   encoding="utf-8")
    out = folder / "aspera_rows.jsonl"
    log = folder / "aspera_log.txt"  # a file, not a pipe: ASPERA logs a warning for every answer it rejects
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with open(log, "wb") as log_file:
        process = subprocess.Popen([sys.executable, str(ASPERA_SIDE), str(job), str(out)], cwd=str(folder),
                                   stdout=subprocess.DEVNULL, stderr=log_file, env=environment)
    return AsperaRun(process, out, log)


def library_names(src: Path) -> list[str]:
    """The top-level names defined in the modules of ASPERA's ``aspera.apps`` (read from the checkout's files)."""
    names: list[str] = []
    for module in sorted((src / "src" / "aspera" / "apps").glob("*.py")):
        if module.name != "__init__.py":
            text = f"# aspera.apps.{module.stem}.py\n" + module.read_text(encoding="utf-8")
            names += [n for n in scripted.module_shown(text)[1] if n not in names]
    return names


def given_names(task_id: str, names: Sequence[str]) -> list[str]:
    """A selection of 16 of ``names`` for a task, in an order of its own (what a retriever might select)."""
    return random.Random(scripted.digest(task_id)).sample(list(names), 16)


@pytest.fixture(scope="session")
def builtin_tasks() -> list[Task]:
    return load_builtin_tasks()


@pytest.fixture(scope="session")
def builtin_aspera(aspera_src, builtin_tasks, tmp_path_factory):
    """ASPERA's CCK and PS agents rendering the requests for the 32 built-in tasks (PS answered by the scripted
    model; ``given``: the PS generation request for :func:`given_names`), started: ``.rows()`` waits for them."""
    folder = tmp_path_factory.mktemp("aspera_builtin")
    plans = write_plans(builtin_tasks, folder / "plans")
    names = library_names(aspera_src)
    tasks = [{"id": t.id, "query": t.query, "names": given_names(t.id, names)} for t in builtin_tasks]
    run = start_aspera(aspera_src, plans, tasks, ("cck", "ps", "given"), folder)
    yield run
    run.close()


@pytest.fixture()
def aspera_runs():
    """``start(src, plans, tasks, agents, folder)``: :func:`start_aspera`, stopped after the test."""
    runs: list[AsperaRun] = []

    def start(*arguments: Any) -> AsperaRun:
        runs.append(start_aspera(*arguments))
        return runs[-1]

    yield start
    for run in runs:
        run.close()


@pytest.fixture(scope="session")
def assistant_library():
    """primsel's assistant library (65 primitives)."""
    from primsel.simulator.library import build_library

    return build_library()
