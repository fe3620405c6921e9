"""Core data types of primsel: plain frozen dataclasses and two small protocols.

Everything a stage hands to the next stage is one of these types. They are frozen (a stage never
mutates its input) and convert to JSON with :func:`to_json`.

Shapes
------
* ``Run``: ``{task_id: {primitive_id: score}}``, the BEIR / ranx / TREC shape. Higher is better.
* ``Qrels``: ``{task_id: {primitive_id: relevance}}`` with relevance 1 for gold primitives.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

Run = dict[str, dict[str, float]]
Qrels = dict[str, dict[str, int]]

#: Statuses of one executed task (DESIGN.md, Interfaces).
STATUSES = ("pass", "fail", "error", "timeout", "requires_user_input", "no_program")
#: Views accepted by :meth:`Primitive.text`.
TEXT_VIEWS = ("name", "signature", "full")


@dataclass(frozen=True)
class Primitive:
    """One prompt-facing symbol of the assistant library.

    Parameters
    ----------
    id : module-qualified id, ``"<module>.<name>"`` (``"work_calendar.add_event"``).
    name : the bare symbol name (``"add_event"``).
    module : the defining module's short name (``"work_calendar"``).
    kind : ``"function"``, ``"class"``, ``"enum"``, ``"exception"`` or ``"alias"``.
    signature : one-line Python stub (``"def add_event(event: Event) -> str"``).
    doc : the docstring, dedented.
    depends_on : ids of library types named in the signature or fields, sorted.
    """

    id: str
    name: str
    module: str
    kind: str
    signature: str
    doc: str
    depends_on: tuple[str, ...] = ()

    def text(self, view: str = "full") -> str:
        """Render the primitive for an index or a prompt.

        Parameters
        ----------
        view : ``"name"`` (the bare name), ``"signature"`` (the stub line) or ``"full"``
            (the stub a prompt shows: signature plus indented docstring).

        Raises
        ------
        ValueError : unknown view.
        """
        if view == "name":
            return self.name
        if view == "signature":
            return self.signature
        if view == "full":
            if not self.signature.startswith(("def ", "class ")):
                # an alias is an assignment: its docstring follows it at the same level
                return f'{self.signature}\n"""\n{self.doc}\n"""'
            body = "\n".join(("    " + line) if line.strip() else "" for line in self.doc.splitlines())
            return f'{self.signature}:\n    """\n{body}\n    """'
        raise ValueError(f"unknown view {view!r}; expected one of {TEXT_VIEWS}")


@dataclass(frozen=True)
class Task:
    """One benchmark task.

    Parameters
    ----------
    id : task id (``"17"`` for Asper-Bench, ``"builtin-03"`` for built-in tasks).
    query : the user's request.
    program : the reference action execution program (AEP), Python source of one function.
    setup_programs : state initialisation programs (SIPs), paired by position with
    evaluation_programs : evaluation programs (EPs), each ``evaluate_*(query, executable, setup_function)``.
    scenario : ``apps`` (module names star-imported into program namespaces), ``guidelines``,
        ``simulation_tools`` and ``evaluation_tools`` (``"module::name"`` strings).
    gold : ids of the library primitives the reference program uses (filled by
        :func:`primsel.library.gold_primitives`; empty until then).
    source : ``"asper-bench"`` or ``"builtin"``.
    """

    id: str
    query: str
    program: str
    setup_programs: tuple[str, ...]
    evaluation_programs: tuple[str, ...]
    scenario: Mapping[str, Any] = field(default_factory=dict, hash=False)
    gold: frozenset[str] = frozenset()
    source: str = ""

    @property
    def apps(self) -> tuple[str, ...]:
        """App modules of the task's namespace, in star-import order."""
        return tuple(self.scenario.get("apps", ()))

    @property
    def entry_point(self) -> str | None:
        """Name of the reference program's first top-level function (None if there is none)."""
        return entry_point(self.program)

    @property
    def return_annotation(self) -> str | None:
        """Return annotation of the reference program's entry point, as source text, or None."""
        try:
            tree = ast.parse(self.program)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return ast.unparse(node.returns) if node.returns is not None else None
        return None


def entry_point(source: str, preferred: str | None = None) -> str | None:
    """Entry point of a program text (DESIGN.md, Interfaces).

    Parameters
    ----------
    source : Python source.
    preferred : a function name asked for; used when the source defines it at top level.

    Returns
    -------
    ``preferred`` if defined at top level, else the first top-level ``def`` name, else None
    (also None when the source does not parse: a SyntaxError, a lone surrogate, or nesting so
    deep that the parser gives up with RecursionError or MemoryError).
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # UnicodeEncodeError is a ValueError
        return None
    names = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if preferred is not None and preferred in names:
        return preferred
    return names[0] if names else None


@dataclass(frozen=True)
class Selection:
    """Primitives proposed for one task.

    Parameters
    ----------
    task_id : the task.
    retriever : name (or cell id) of the retriever that ranked.
    ranked : the full ranking, ``((primitive_id, score), ...)`` best first.
    ids : the selected primitive ids, in rank order (closure additions at the end).
    usage : cost of selection: ``prompt_tokens``, ``completion_tokens``, ``seconds``, ``calls``.
    added_by_closure : ids appended by type closure (a subset of ``ids``).
    """

    task_id: str
    retriever: str
    ranked: tuple[tuple[str, float], ...]
    ids: tuple[str, ...]
    usage: Mapping[str, float] = field(default_factory=dict, hash=False)
    added_by_closure: tuple[str, ...] = ()


@dataclass(frozen=True)
class Program:
    """A program produced for a task by a generator.

    Parameters
    ----------
    task_id : the task.
    code : Python source, or None when nothing usable was produced.
    status : ``"ok"``, ``"no_program"``, ``"truncated"`` or ``"llm_error"``.
    raw : the model's raw completion text ("" for non-LLM generators).
    messages : the chat messages sent, ``({"role": ..., "content": ...}, ...)``.
    usage : ``prompt_tokens``, ``completion_tokens``, ``seconds``, ``cached`` (0/1), ``calls``.
    entry_point : the function to call, or None to use the first top-level ``def``.
    """

    task_id: str
    code: str | None
    status: str = "ok"
    raw: str = ""
    messages: tuple[Mapping[str, str], ...] = ()
    usage: Mapping[str, float] = field(default_factory=dict, hash=False)
    entry_point: str | None = None


@dataclass(frozen=True)
class ExecutionResult:
    """Verdict of running one program on one task (all its SIP/EP pairs).

    Parameters
    ----------
    task_id : the task.
    status : one of :data:`STATUSES`.
    error_type : exception class name for ``fail``/``error``/``requires_user_input``, else None.
    message : exception message or a short explanation, else None.
    line : 1-based line in the program text where the exception was raised, if it was raised there.
    called_primitives : library primitive ids the program called, in first-call order.
    stdout_truncated : the program's output exceeded the cap and was cut.
    seconds : wall time of the whole task in seconds.
    program_seconds : of which, seconds the judge waited for the program's process (loading the
        program, and every call of its entry point with the world state crossing both ways).
    trace : every call of a library function (or instantiation of a library class) made by
        program code, in order: ``(primitive id, program line or None, summary of the
        arguments)`` (at most 2000).
    outcomes : one entry per completed call of the program's entry point, in order over the
        task's (SIP, EP) pairs: ``(number of trace entries the call added, "return" or
        "raise", summary of the returned value or "Type: message" of the exception)``.
    paths : for each entry of ``outcomes``, the program lines that call executed, in order, with
        ``0`` where each library call of the trace was made (at most 20,000 entries per call).
    """

    task_id: str
    status: str
    error_type: str | None = None
    message: str | None = None
    line: int | None = None
    called_primitives: tuple[str, ...] = ()
    stdout_truncated: bool = False
    seconds: float = 0.0
    program_seconds: float = 0.0
    trace: tuple[tuple[str, int | None, str], ...] = ()
    outcomes: tuple[tuple[int, str, str], ...] = ()
    paths: tuple[tuple[int, ...], ...] = ()

    @property
    def passed(self) -> bool:
        """True when every EP of the task returned normally."""
        return self.status == "pass"


@runtime_checkable
class Retriever(Protocol):
    """Ranks the library's primitives for queries.

    ``__init__`` only stores JSON-serialisable parameters; ``fit`` does the heavy work (indexing,
    loading models). ``train_tasks`` is ignored by retrievers that learn nothing from tasks.
    ``search`` returns every query id; for each, at most ``k`` unique primitive ids with scores
    in descending order (ties broken by primitive id).
    """

    def fit(self, library: Any, train_tasks: Sequence[Task] = ()) -> Retriever: ...

    def search(self, queries: Mapping[str, str], k: int) -> Run: ...


@runtime_checkable
class LearnsFromTasks(Protocol):
    """Optional ability: ``fit`` uses ``train_tasks``; runners must cross-validate it."""

    learns_from_tasks: bool


@runtime_checkable
class ReportsUsage(Protocol):
    """Optional ability: the retriever spent LLM tokens; ``usage()`` maps task id -> usage dict."""

    def usage(self) -> Mapping[str, Mapping[str, float]]: ...


@runtime_checkable
class Generator(Protocol):
    """Writes a program for a task from the documentation of the selected primitives."""

    def generate(self, task: Task, docs: Sequence[Primitive]) -> Program: ...


def to_json(obj: Any) -> Any:
    """Convert a primsel dataclass (or nested containers of them) to JSON-serialisable data."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_json(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, (frozenset, set)):
        return sorted(to_json(v) for v in obj)
    if isinstance(obj, (list, tuple)):
        return [to_json(v) for v in obj]
    return obj
