"""ASPERA's requests, rendered by ASPERA's code in a worker process (:mod:`primsel.aspera.worker`).

:func:`aspera_protocol` gives the one :class:`AsperaProtocol` of a checkout in this process; its methods return the
messages ASPERA's agents send for a task (Coca et al., ACL 2025, "ASPERA: A Simulated Environment to Evaluate
Planning for Complex Action Execution"; the agents of apple/ml-aspera's ``src/aspera/agent/``):

* :meth:`AsperaProtocol.cck_messages`: the complete-codebase-knowledge (CCK) agent's one request, ``[system,
  user]``: the documentation stubs of the task's apps, ASPERA's 5 worked examples and 10 guidelines, the query and
  the return type of the reference program's signature;
* :meth:`AsperaProtocol.selection_messages`: the primitive-selection (PS) agent's 12 selection requests, one
  ``system`` message each (one per module of ``aspera.apps``, in ASPERA's order), and
  :meth:`AsperaProtocol.parse_selection` for the symbols their answers name;
* :meth:`AsperaProtocol.generation_messages`: the PS agent's generation request for a list of selected symbols
  (ASPERA's own selection, or any retriever's), the examples' symbols added as the agent adds them.

The worker starts on the first call (about 2 s: ``black`` and ``pydantic`` load) and ends with this process.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from primsel.aspera.source import AsperaSourceError, locate, source_digest
from primsel.types import Task

__all__ = ["ASPERA_DEFAULTS", "AsperaProtocol", "DEFAULT_EXAMPLES", "aspera_endpoint", "aspera_protocol"]

#: The worked-example module every Asper-Bench task names (``scenario.query_solution``); a task naming modules
#: the checkout lacks (primsel's built-in tasks) is shown this one.
DEFAULT_EXAMPLES = ("work_calendar_query_solution",)
Messages = list[dict[str, str]]

#: What ASPERA's OpenAI completer sends unless the experiment sets it (``max_tokens`` is its table's
#: output limit for gpt-4o, ``seed`` its configured seed).
ASPERA_DEFAULTS = {"max_tokens": 4096, "seed": 0, "temperature": 0.0}


def aspera_endpoint(endpoint: Mapping[str, Any]) -> dict[str, Any]:
    """Endpoint settings with ASPERA's values (:data:`ASPERA_DEFAULTS`) where ``endpoint`` leaves one unset or
    None."""
    out = dict(endpoint)
    for key, value in ASPERA_DEFAULTS.items():
        if out.get(key) is None:
            out[key] = value
    return out


_LOCK = threading.Lock()
_SHARED: dict[Path, AsperaProtocol] = {}


def aspera_protocol(path: str | os.PathLike[str] | None = None) -> AsperaProtocol:
    """The :class:`AsperaProtocol` of the checkout ``path`` names (else ``$PRIMSEL_ASPERA_SRC``), one per
    checkout and process.

    Raises
    ------
    primsel.aspera.source.AsperaSourceError : no checkout named, or not a checkout of apple/ml-aspera.
    """
    root = locate(path)
    with _LOCK:
        if root not in _SHARED:
            _SHARED[root] = AsperaProtocol(root)
        return _SHARED[root]


class AsperaProtocol:
    """ASPERA's agents' requests for tasks, from one checkout of apple/ml-aspera.

    Parameters
    ----------
    root : the checkout (the folder holding ``src/aspera``), already checked (:func:`primsel.aspera.source.locate`).

    Notes
    -----
    Thread-safe: calls from several threads take turns on the worker.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.digest = source_digest(root)
        self._process: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()
        self._hello: dict[str, Any] = {}
        self._library: list[dict[str, Any]] | None = None
        examples = root / "src" / "aspera" / "examples"
        self._example_modules = {p.stem for p in examples.glob("*.py")}

    # -- the worker ---------------------------------------------------------------------------------------------
    def _start(self) -> None:
        environment = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "primsel.aspera.worker", str(self.root)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, encoding="utf-8", env=environment, cwd=str(self.root))
        atexit.register(self.close)
        self._hello = self._read("start")

    def _read(self, op: str) -> Any:
        assert self._process is not None and self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            code = self._process.wait()
            self._process = None
            raise AsperaSourceError(f"ASPERA's renderer stopped (exit {code}) during {op!r}; see the messages above")
        reply = json.loads(line)
        if "error" in reply:
            raise AsperaSourceError(f"ASPERA's code failed in {op!r} for the checkout {self.root}: {reply['error']}")
        return reply["ok"]

    def _call(self, op: str, **arguments: Any) -> Any:
        with self._lock:
            if self._process is None:
                self._start()
            assert self._process is not None and self._process.stdin is not None
            self._process.stdin.write(json.dumps({"op": op, **arguments}) + "\n")
            self._process.stdin.flush()
            return self._read(op)

    def close(self) -> None:
        """Stop the worker (it starts again on the next call)."""
        with self._lock:
            process, self._process = self._process, None
        if process is not None:
            if process.stdin is not None:
                process.stdin.close()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    # -- what the agents send -----------------------------------------------------------------------------------
    def _task_fields(self, task: Task) -> dict[str, Any]:
        named = [str(m) for m in task.scenario.get("query_solution", ())]
        examples = named if named and all(m in self._example_modules for m in named) else list(DEFAULT_EXAMPLES)
        return {"query": task.query, "apps": list(task.apps), "query_solution": examples, "program": task.program}

    def selection_modules(self) -> list[str]:
        """The modules of ``aspera.apps`` the PS agent asks about, in its order (12 for ASPERA's checkout)."""
        if not self._hello:
            self._call("hello")
        return list(self._hello["selection_modules"])

    def cck_messages(self, task: Task) -> Messages:
        """The CCK agent's request for ``task``: ``[system, user]``.

        Raises
        ------
        primsel.aspera.source.AsperaSourceError : ASPERA's code fails on the task (the message says how).
        """
        return self._call("cck", **self._task_fields(task))

    def selection_messages(self, query: str) -> list[Messages]:
        """The PS agent's selection requests for ``query``: one ``[system]`` list per module of
        :meth:`selection_modules`, in that order."""
        return self._call("selection", query=query)

    def parse_selection(self, answers: Sequence[str | None]) -> dict[str, Any]:
        """The symbols a task's selection answers name (one answer per module of :meth:`selection_modules`; None
        for a request that failed), by ASPERA's parser and substring rule, de-duplicated by name and sorted by their
        line in their own file as the PS agent does.

        Returns
        -------
        ``{"names": [symbol names, in the agent's order], "unparsed": answers ASPERA's parser rejects (they count
        as ``None``), "failed": answers missing}``.
        """
        return self._call("parse_selection", answers=list(answers))

    def generation_messages(self, task: Task, names: Sequence[str], agent_order: bool = False) -> Messages:
        """The PS agent's generation request for ``task`` when the selected symbols are ``names``: ``[system,
        user]``, the user turn equal to the CCK agent's.

        Parameters
        ----------
        task : the task.
        names : the selected symbols' names.
        agent_order : ``names`` are in the order the PS agent's own selection gave them (:meth:`parse_selection`),
            which the request keeps (it decides where symbols without a source line go); False: ``names`` are a
            set, a retriever's selection, ordered as ASPERA's agent would order them.
        """
        return self._call("ps_generation", names=list(names), agent_order=agent_order, **self._task_fields(task))

    def gold_names(self, program: str) -> list[str]:
        """The symbol names ASPERA's PS metric counts as the gold of a reference program (its substring rule)."""
        return self._call("gold_names", program=program)

    def library_rows(self) -> list[dict[str, Any]]:
        """Every definition of ``aspera.apps`` with the text ASPERA's prompts show for it (see
        :meth:`primsel.aspera.worker.Renderer.op_library`); read once."""
        if self._library is None:
            self._library = self._call("library")
        return [dict(row) for row in self._library]
