"""Core data types of primsel: plain frozen dataclasses, the ranking rule, and protocols.

Everything a stage hands to the next stage is one of these types. They are frozen (a stage never
mutates its input) and convert to JSON with :func:`to_json`.

Shapes
------
* ``Run``: ``{task_id: {primitive_id: score}}``, the BEIR / ranx / TREC shape. Higher is better.
* ``Qrels``: ``{task_id: {primitive_id: relevance}}`` with relevance 1 for gold primitives.

Ranking
-------
A run entry is ranked by score, descending, ties broken by primitive id (ascending, as
strings): :func:`ranking`, and :func:`top_k` for a cut. Every retriever, metric, selector and
TREC file uses this one rule.

Abilities
---------
The required protocols (:class:`Retriever`, :class:`Generator`) never grow. Anything optional
is a separate protocol here, checked with ``isinstance``: a component has an ability when it
has the ability's methods (:class:`SeesGold`, :class:`ReportsUsage`, :class:`FitsOnTasks`,
:class:`GeneratesMany`, :class:`Revises`, :class:`SummarisesUsage`) or, for
:class:`LearnsFromTasks`, when its flag is true.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import numbers
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from primsel.checks import check_k

Run = dict[str, dict[str, float]]
Qrels = dict[str, dict[str, int]]

#: Statuses of one executed task (docs/architecture.md, "Statuses").
STATUSES = ("pass", "fail", "error", "timeout", "requires_user_input", "no_program")
#: Values of :attr:`ExecutionResult.raised_by` (besides None).
RAISED_BY = ("program", "sandbox", "task")
#: Views accepted by :meth:`Primitive.text`.
TEXT_VIEWS = ("name", "signature", "full")
#: Kind of a primitive that is a document of a retrieval-only corpus (a tool description, an API
#: document, a passage), not a symbol of the assistant library.
DOCUMENT_KIND = "document"


@dataclass(frozen=True)
class Primitive:
    """One prompt-facing symbol of the assistant library.

    Parameters
    ----------
    id : module-qualified id, ``"<module>.<name>"`` (``"work_calendar.add_event"``).
    name : the bare symbol name (``"add_event"``).
    module : the defining module's short name (``"work_calendar"``).
    kind : ``"function"``, ``"class"``, ``"enum"``, ``"exception"`` or ``"alias"``; ``"document"``
        (:data:`DOCUMENT_KIND`) for a document of a retrieval-only corpus.
    signature : one-line Python stub (``"def add_event(event: Event) -> str"``); for a document,
        its title line (a tool name, an API call).
    doc : the docstring, dedented.
    depends_on : ids of library types named in the signature or fields, sorted.
    shown : the documentation exactly as the library's own prompts show it (ASPERA's library: the source text of
        the definition); when set, ``text("full")`` is this text. Empty: ``text("full")`` is rendered from
        ``signature`` and ``doc``.
    """

    id: str
    name: str
    module: str
    kind: str
    signature: str
    doc: str
    depends_on: tuple[str, ...] = ()
    shown: str = ""

    def text(self, view: str = "full") -> str:
        """Render the primitive for an index or a prompt.

        Parameters
        ----------
        view : ``"name"`` (the bare name), ``"signature"`` (the stub line) or ``"full"``
            (the stub a prompt shows: signature plus indented docstring; for a document, the
            title line and the text below it).

        Raises
        ------
        ValueError : unknown view.
        """
        if view == "name":
            return self.name
        if view == "signature":
            return self.signature
        if view == "full":
            if self.shown:
                return self.shown
            if self.kind == DOCUMENT_KIND:
                return "\n".join(part for part in (self.signature, self.doc) if part)
            if not self.signature.startswith(("def ", "class ")):
                # an alias is an assignment: its docstring follows it at the same level
                return f'{self.signature}\n"""\n{self.doc}\n"""'
            body = "\n".join(("    " + line) if line.strip() else "" for line in self.doc.splitlines())
            return f'{self.signature}:\n    """\n{body}\n    """'
        raise ValueError(f"unknown view {view!r}; expected one of {TEXT_VIEWS}")


@dataclass(frozen=True)
class Task:
    """One benchmark task.

    A *retrieval-only* task (from a corpus such as MetaTool or APIBench) has only an id, a query
    and its gold set: no reference program and no setup or evaluation programs, so it can be
    ranked and scored but not generated for or executed (:attr:`executable` is False).

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
    source : ``"asper-bench"``, ``"builtin"``, or the name of a retrieval-only dataset.
    """

    id: str
    query: str
    program: str = ""
    setup_programs: tuple[str, ...] = ()
    evaluation_programs: tuple[str, ...] = ()
    scenario: Mapping[str, Any] = field(default_factory=dict, hash=False)
    gold: frozenset[str] = frozenset()
    source: str = ""

    @property
    def executable(self) -> bool:
        """False for a retrieval-only task (no reference program, no setup or evaluation
        programs): it can be ranked and scored, not generated for or executed."""
        return bool(self.program or self.setup_programs or self.evaluation_programs)

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
        tree = parse_program(self.program)
        for node in tree.body if tree is not None else ():
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return ast.unparse(node.returns) if node.returns is not None else None
        return None


def parse_program(source: str) -> ast.Module | None:
    """``ast.parse(source)``, or None when the text does not parse: a SyntaxError, a ValueError
    (a NUL byte, a lone surrogate), or a RecursionError or MemoryError from a pathologically
    nested expression (``1+1+...`` or ``--...-1`` 100,000 deep). Warnings (invalid escape
    sequences) are silenced. Every parse of program text in primsel goes through it, so no
    program text can crash the caller."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def task_sort_key(task_id: str) -> tuple[bool, int, str]:
    """Order of task ids: numeric ids first in numeric order (``"2"`` before ``"10"``), then the
    others by string: ``(not numeric, value, id)``."""
    numeric = task_id.isdecimal()
    return (not numeric, int(task_id) if numeric else 0, task_id)


def entry_point(source: str, preferred: str | None = None) -> str | None:
    """Entry point of a program text (docs/architecture.md, "Programs").

    Parameters
    ----------
    source : Python source.
    preferred : a function name asked for; used when the source defines it at top level.

    Returns
    -------
    ``preferred`` if defined at top level, else the first top-level ``def`` name, else None
    (also None when the source does not parse, e.g. a SyntaxError, a lone surrogate, or an
    expression nested too deeply to parse).
    """
    tree = parse_program(source)
    if tree is None:
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
    extraction : how the program was taken from the answer, for generators that extract:
        ``mode``, ``dropped_lines``, ``parse_failure``, ``reason``, ``program_no_imports``,
        ``async_entry`` (:meth:`primsel.generation.extract.Extraction.details`); empty otherwise.
    prompt_digest : the answer-cache key of the request that gave the answer (a chat generator's;
        :attr:`primsel.llm.completion.Completion.key`), what exported answers are filed under; "" otherwise.
    """

    task_id: str
    code: str | None
    status: str = "ok"
    raw: str = ""
    messages: tuple[Mapping[str, str], ...] = ()
    usage: Mapping[str, float] = field(default_factory=dict, hash=False)
    entry_point: str | None = None
    extraction: Mapping[str, Any] = field(default_factory=dict, hash=False)
    prompt_digest: str = ""


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
    raised_by : who raised what ended the task (see :data:`RAISED_BY`): ``"program"`` (the
        program's own code, or a verdict on its text: a syntax error, no function, ...),
        ``"sandbox"`` (a verdict of the sandbox on the program's process or answer: time limit,
        an answer the judge cannot decode, dead process, ...; never a text the program's process
        sent, which the program may have written), ``"task"`` (the task's setup or evaluation
        program, or a fault of the judge); None when the task passed or it is not known. Only
        ``error_type``/``message`` of the first two describe the program alone; those of
        ``"task"`` may hold what an evaluation program expected.
    collateral : the collateral audit: rows of the world the program was given (after the setup
        program) that it removed or changed and that the task's reference program, run by the
        judge on the same world, did not; summed over the task's (SIP, EP) pairs. 0 when the
        program was never called. It does not change ``status`` (ASPERA's verdict); see
        :attr:`strict`.
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
    raised_by: str | None = None
    collateral: int = 0

    @property
    def passed(self) -> bool:
        """True when every EP of the task returned normally."""
        return self.status == "pass"

    @property
    def strict(self) -> bool:
        """Passed without collateral: the task's checks passed and the program removed or
        changed no row of the world that the reference program left alone."""
        return self.status == "pass" and self.collateral == 0


def ranking(scores: Mapping[str, float] | None) -> list[str]:
    """Primitive ids of one run entry, best first: score descending, ties by primitive id.

    Parameters
    ----------
    scores : ``{primitive_id: score}`` (None or empty gives ``[]``).
    """
    if not scores:
        return []
    return [p for p, _ in sorted(scores.items(), key=lambda item: (-float(item[1]), item[0]))]


def tie_groups(scores: Mapping[str, float] | None) -> list[tuple[str, ...]]:
    """The ranking of one run entry (:func:`ranking`) cut into groups of equal score.

    Within a group the ids are in primitive-id order, the order :func:`ranking` gives them; any
    other order of a group is as justified by the scores.

    Parameters
    ----------
    scores : ``{primitive_id: score}`` (None or empty gives ``[]``).

    Returns
    -------
    groups of primitive ids, best score first; their concatenation is ``ranking(scores)``.
    """
    groups: list[tuple[str, ...]] = []
    current: list[str] = []
    last: float | None = None
    for pid in ranking(scores):
        value = float(scores[pid])  # type: ignore[index]
        if current and value != last:
            groups.append(tuple(current))
            current = []
        current.append(pid)
        last = value
    if current:
        groups.append(tuple(current))
    return groups


def check_run(run: Any, what: str = "run") -> None:
    """Check the shape of a :data:`Run`: a mapping of string task ids to mappings of string
    primitive ids to real-number scores.

    An id of another type (an ``int`` read from a data frame, say) would never match the string
    ids of the gold sets and score 0 without a word; it is refused instead.

    Parameters
    ----------
    run : the value to check.
    what : how the message names it (``"run"``, ``"run file x.trec"``).

    Raises
    ------
    TypeError : naming the first task id, primitive id or score of the wrong type.
    """
    if not isinstance(run, Mapping):
        raise TypeError(f"{what} must be a mapping {{task_id: {{primitive_id: score}}}}, got {type(run).__name__}")
    for task_id, scores in run.items():
        if not isinstance(task_id, str):
            raise TypeError(f"{what}: task id {task_id!r} is {type(task_id).__name__}; ids must be strings")
        if not isinstance(scores, Mapping):
            raise TypeError(f"{what}: task {task_id!r} maps to {type(scores).__name__}; expected "
                            "{primitive_id: score}")
        for pid, score in scores.items():
            if not isinstance(pid, str):
                raise TypeError(f"{what}: task {task_id!r}: primitive id {pid!r} is {type(pid).__name__}; "
                                "ids must be strings")
            if type(score) is not float and (isinstance(score, bool) or not isinstance(score, numbers.Real)):
                raise TypeError(f"{what}: task {task_id!r}: score of {pid!r} is {type(score).__name__} "
                                f"{score!r}; expected a number")


def top_k(ids: Sequence[str], scores: Sequence[float] | Mapping[str, float], k: int) -> dict[str, float]:
    """Rank ``ids`` by score (descending, ties by id) and keep the first ``k``.

    Parameters
    ----------
    ids : every primitive id to rank (the library), unique.
    scores : one score per id (a sequence aligned with ``ids``) or ``{id: score}`` (missing -> 0).
    k : cut-off, >= 1.

    Returns
    -------
    ``{primitive_id: score}`` in rank order, ``min(k, len(ids))`` entries. Non-finite scores are
    treated as 0.

    Raises
    ------
    ValueError : bad k, or a score sequence of the wrong length.
    """
    check_k(k)
    if isinstance(scores, Mapping):
        values = [float(scores.get(i, 0.0)) for i in ids]
    else:
        values = [float(s) for s in scores]
        if len(values) != len(ids):
            raise ValueError(f"{len(values)} scores for {len(ids)} ids")
    values = [v if math.isfinite(v) else 0.0 for v in values]
    order = sorted(range(len(ids)), key=lambda i: (-values[i], ids[i]))
    return {ids[i]: values[i] for i in order[:k]}


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
class Generator(Protocol):
    """Writes a program for a task from the documentation of the selected primitives."""

    def generate(self, task: Task, docs: Sequence[Primitive]) -> Program: ...


class _FlagAbility(type(Protocol)):  # type: ignore[misc]
    """Metaclass of an ability declared by flags: an object has it when every flag the ability
    annotates is true on it (present and false is not enough)."""

    def __instancecheck__(cls, instance: Any) -> bool:
        return all(bool(getattr(instance, flag, False)) for flag in cls.__annotations__)


@runtime_checkable
class LearnsFromTasks(Protocol, metaclass=_FlagAbility):
    """Optional ability: ``learns_from_tasks`` is true; ``fit`` uses ``train_tasks``, so runners
    cross-validate the retriever (it never sees its test fold)."""

    learns_from_tasks: bool


@runtime_checkable
class SeesGold(Protocol):
    """Optional ability of bound retrievers (``oracle``): they are handed the gold sets.

    A runner that finds this ability calls ``set_gold({task_id: gold ids})`` after ``fit`` and
    before ``search``. Only upper bounds use it; no real retriever may.
    """

    def set_gold(self, gold: Mapping[str, Iterable[str]]) -> None: ...


@runtime_checkable
class ReportsUsage(Protocol):
    """Optional ability: the retriever spent LLM tokens; ``usage()`` maps task id -> usage dict."""

    def usage(self) -> Mapping[str, Mapping[str, float]]: ...


@runtime_checkable
class FitsOnTasks(Protocol):
    """Optional ability of a generator: ``fit(library, train_tasks)``, called once per
    cross-validation fold with that fold's training tasks (e.g. the pool of worked examples)."""

    def fit(self, library: Any, train_tasks: Sequence[Task] = ()) -> Any: ...


@runtime_checkable
class GeneratesMany(Protocol):
    """Optional ability of a generator: ``generate_many([(task, docs), ...])`` returns the
    programs in input order (e.g. with requests in flight concurrently)."""

    def generate_many(self, items: Sequence[tuple[Task, Sequence[Primitive]]]) -> list[Program]: ...


@runtime_checkable
class Revises(Protocol):
    """Optional ability of a generator: ``revise_many([(task, docs, turns), ...])`` continues
    each task's conversation and returns the corrected programs in input order. ``turns`` are
    the task's earlier rounds, ``((program, feedback text), ...)`` oldest first: the request
    for ``docs`` is followed, for each turn, by the program's answer and the feedback on it
    (reflection rounds, :mod:`primsel.experiments.reflection`)."""

    def revise_many(self, items: Sequence[tuple[Task, Sequence[Primitive], Sequence[tuple[Program, str]]]]
                    ) -> list[Program]: ...


@runtime_checkable
class SummarisesUsage(Protocol):
    """Optional ability: ``usage_summary()`` gives counters over every call (requests, cache
    hits, tokens, seconds, ...), summed into a cell's report."""

    def usage_summary(self) -> Mapping[str, float]: ...


def to_json(obj: Any) -> Any:
    """Convert a primsel dataclass (or nested containers of them) to JSON-serialisable data."""
    if obj is None or isinstance(obj, (str, int, float)):  # the leaves, most of the calls
        return obj
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_json(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, (frozenset, set)):
        return sorted(to_json(v) for v in obj)
    if isinstance(obj, (list, tuple)):
        return [to_json(v) for v in obj]
    return obj
