"""Generators: write a program for a task from the documentation of the selected primitives.

Registered names (``primsel.registry.build({"type": ...}, kind="generator")``):

``openai``     an LLM behind any OpenAI-compatible chat endpoint (:class:`OpenAIGenerator`).
``local``      a GGUF model served by llama.cpp on this machine for the run (:class:`LocalGenerator`).
``reference``  the task's own reference program (an upper bound that ignores the selection).
``replay``     programs read from a JSONL file of ``{"task_id", "program"}`` lines.

Every generator has ``generate(task, docs) -> Program`` and the optional abilities of
:mod:`primsel.types`: ``generate_many(items)`` (a list of ``(task, docs)`` pairs; programs in the
same order), ``revise_many(items)`` (``openai`` only: the next round of each task's
conversation, given its earlier programs and the feedback on them),
``fit(library, train_tasks)`` (the runner calls it once per cross-validation fold
with that fold's training tasks) and ``usage_summary()``. Constructors only store and check
parameters; nothing heavy (no ``openai`` import, no network) happens before the first program
is requested.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from primsel.aspera import aspera_endpoint, aspera_protocol
from primsel.datasets import load_builtin_tasks
from primsel.files import read_jsonl
from primsel.generation.extract import MODES, extract_program, program_extraction
from primsel.generation.prompts import (
    choose_examples,
    expected_function,
    generation_messages,
    reflection_turn,
)
from primsel.library import LIBRARY_NAMES
from primsel.llm.client import (
    ChatClient,
    Completion,
    EndpointUnreachableError,
    LLMError,
    PromptTooLongError,
    prefix_order,
)
from primsel.llm.endpoint import takes_endpoint
from primsel.llm.local import LocalChat, ServerSettings
from primsel.llm.templates import load_template
from primsel.registry import register
from primsel.types import Primitive, Program, Task

__all__ = ["LocalGenerator", "OpenAIGenerator", "ReferenceGenerator", "ReplayGenerator", "prefix_order"]

Items = Sequence[tuple[Task, Sequence[Primitive]]]


def _default_module_order() -> tuple[str, ...]:
    return tuple(LIBRARY_NAMES)


@register("openai", kind="generator")
@takes_endpoint
class OpenAIGenerator:
    """Program generation by an LLM behind an OpenAI-compatible chat-completions endpoint.

    The prompt (template ``ps`` by default, see :mod:`primsel.generation.prompts`) holds the
    task's generation guidelines, the stubs of the selected primitives grouped by module (in
    library order, so the same selection always gives the same prompt), ``examples`` worked
    examples and the request, and asks for the function named like the reference program's
    entry point with its return annotation -- the program-generation step of ASPERA's
    primitive-selection agent (Coca et al., 2025, "ASPERA: A Simulated Environment to Evaluate
    Planning for Complex Action Execution"). The answer goes through
    :func:`primsel.generation.extract.extract_program` in the ``extraction`` mode.

    In a reflection round (:meth:`revise_many`) the same request is followed, for each earlier
    round, by the model's answer and the feedback on its program (template
    ``reflect_template``), and the answer to that conversation is the round's program. Each
    round's request is cached like any other (its messages are part of the key).

    With ``protocol = "aspera"`` every request is the one ASPERA's own agent sends
    (:mod:`primsel.aspera`, rendered by ASPERA's code from the checkout ``$PRIMSEL_ASPERA_SRC``
    names): ``agent = "cck"`` sends the complete-codebase-knowledge agent's request (the
    documentation of the task's apps, whatever the selection), ``"ps"`` and ``"ps_generation"``
    the primitive-selection agent's generation request built from the selected primitives, the
    worked examples' symbols added as ASPERA adds them (``"ps"``: the selection is the agent's
    own, in its order; ``"ps_generation"``: another retriever's, ordered as ASPERA orders symbols). The body is
    ASPERA's (``max_tokens`` 4096 and ``seed`` 0 unless set, ``n`` 1, ``stop`` null), answers
    are processed by ASPERA's rules (``extraction = "aspera"``), and ``examples``,
    ``template``, ``example_selection`` and ``reflect_template`` are not used; there are no
    reflection rounds.

    Examples come from the pool given to :meth:`fit` (the training folds' tasks), or the
    built-in tasks when ``fit`` got none; never from the task itself. ``example_selection``
    ``"similar"`` picks the pool tasks whose queries share most words with the request
    (deterministic, ties by task id); ``"fixed"`` picks the same tasks for every request
    (shuffled with ``seed``, or 0).

    Parameters
    ----------
    examples : number of worked examples in the prompt (>= 0).
    template : packaged template name (``"ps"``, ``"cck"``) or a template file path.
    example_selection : ``"similar"`` or ``"fixed"``.
    extraction : how a program is taken from the answer: ``"primsel"`` (our rules) or
        ``"aspera"`` (ASPERA's agent, quirks included; see :mod:`primsel.generation.extract`);
        None: ``"aspera"`` under ASPERA's protocol, else ``"primsel"``.
    protocol : ``"primsel"`` (primsel's prompts) or ``"aspera"`` (ASPERA's requests, byte for byte).
    agent : under ``protocol = "aspera"``, what the request is (:data:`AGENTS`): ``"cck"``, ``"ps"`` or
        ``"ps_generation"`` (None: ``"ps_generation"``); an experiment sets it from the retriever (``all``:
        ``"cck"``, ``llm_selector``: ``"ps"``). Must be None under ``"primsel"``.
    reflect_template : packaged template name (``"reflect"``) or a template file path: the turn
        carrying the feedback in a reflection round (placeholders ``feedback``,
        ``function_name``, ``return_annotation``, ``signature``).
    **endpoint : the :class:`primsel.llm.endpoint.Endpoint` settings (``model``, required;
        ``base_url``, ``api_key_env``, ``api_key``, ``timeout_s``, ``max_retries``,
        ``temperature``, ``seed`` (also the ``"fixed"`` shuffle's seed), ``max_tokens``,
        ``concurrency``, ``backoff_s``, ``cache_namespace``).

    Raises
    ------
    ValueError : missing model, out-of-range number, unknown template, example selection,
        extraction mode, protocol or agent, or ``extraction = "primsel"`` under ASPERA's protocol.
    """

    def __init__(self, examples: int = 1, template: str = "ps", example_selection: str = "similar",
                 extraction: str | None = None, reflect_template: str = "reflect", protocol: str = "primsel",
                 agent: str | None = None, **endpoint: Any) -> None:
        self.protocol, self.agent = _check_protocol(protocol, agent)
        if self.protocol == "aspera":
            endpoint = aspera_endpoint(endpoint)
        # checks the endpoint settings now; the client sends nothing until asked
        self._client = ChatClient(prefix_ordered=True, aspera_body=self.protocol == "aspera", **endpoint)
        if isinstance(examples, bool) or not isinstance(examples, int) or examples < 0:
            raise ValueError(f"examples must be an integer >= 0, got {examples!r}")
        if example_selection not in ("similar", "fixed"):
            raise ValueError(f"example_selection must be 'similar' or 'fixed', got {example_selection!r}")
        self.extraction = _check_extraction(extraction, self.protocol)
        self._template = load_template(template)  # parsed once; fails early on a bad name or path
        self._reflect = load_template(reflect_template)
        self.examples = examples
        self.template = template
        self.reflect_template = reflect_template
        self.example_selection = example_selection
        self._pool: list[Task] | None = None
        self._library_order: dict[str, int] = {}
        self._module_order: tuple[str, ...] = ()
        self._statuses: Counter[str] = Counter()
        self._lock = threading.Lock()

    def get_params(self) -> dict[str, Any]:
        """The constructor parameters (JSON-serialisable); the API key is never included."""
        return {"examples": self.examples, "template": self.template, "example_selection": self.example_selection,
                "extraction": self.extraction, "reflect_template": self.reflect_template, "protocol": self.protocol,
                "agent": self.agent, **self._client.endpoint.params()}

    def fit(self, library: Mapping[str, Primitive], train_tasks: Sequence[Task] = ()) -> OpenAIGenerator:
        """Remember the library's order and the example pool. Returns ``self``.

        Parameters
        ----------
        library : the library (its order fixes the order of stubs in prompts).
        train_tasks : the example pool: the training folds' tasks. Empty: the built-in tasks.
        """
        prims = list(library.values())
        self._library_order = {p.id: i for i, p in enumerate(prims)}
        self._module_order = tuple(dict.fromkeys(p.module for p in prims))
        self._pool = list(train_tasks) if train_tasks else None
        return self

    # -- prompting ----------------------------------------------------------------------------
    def _example_pool(self) -> list[Task]:
        if self._pool is None:
            if self.examples == 0:
                return []
            self._pool = load_builtin_tasks()
        return self._pool

    def messages(self, task: Task, docs: Sequence[Primitive]) -> list[dict[str, str]]:
        """The chat messages sent for ``task`` with documentation ``docs``.

        Raises
        ------
        primsel.aspera.AsperaSourceError : under ASPERA's protocol, no usable checkout of ASPERA.
        """
        if self.protocol == "aspera":
            protocol = aspera_protocol()
            if self.agent == "cck":
                return protocol.cck_messages(task)
            return protocol.generation_messages(task, [p.name for p in docs], agent_order=self.agent == "ps")
        seed = self._client.endpoint.seed or 0
        examples = choose_examples(task, self._example_pool(), self.examples, self.example_selection, seed)
        order = self._library_order
        shown = sorted(dict((p.id, p) for p in docs).values(), key=lambda p: (order.get(p.id, len(order)), p.id))
        modules = self._module_order or _default_module_order()
        return generation_messages(task, shown, examples, self._template, modules)

    def _program(self, task: Task, messages: list[dict[str, str]], answer: Completion | LLMError) -> Program:
        if isinstance(answer, LLMError):
            program = Program(
                task_id=task.id, code=None, status=PROMPT_TOO_LONG if isinstance(answer, PromptTooLongError) else "llm_error",
                raw=f"LLM error: {answer}",
                messages=tuple(messages), usage={"calls": 1, "prompt_tokens": 0, "completion_tokens": 0,
                                                  "seconds": 0.0, "cached": 0},
            )
        else:
            name, _ = expected_function(task)
            program = extract_program(answer.text, task.id, name, answer.finish_reason, self.extraction)
            usage = answer.usage()
            usage["truncated"] = int(answer.finish_reason == "length")
            program = replace(program, messages=tuple(messages), usage=usage, prompt_digest=answer.key)
        with self._lock:
            self._statuses[program.status] += 1
        return program

    # -- Generator protocol -------------------------------------------------------------------
    def generate(self, task: Task, docs: Sequence[Primitive]) -> Program:
        """Ask the model for the program of ``task`` given the documentation ``docs``.

        Returns
        -------
        Program with status ``ok``, ``truncated``, ``no_program`` or ``llm_error`` (the request
        failed after its retries; the run goes on).

        Raises
        ------
        LLMFatalError, QuotaExceededError, EndpointUnreachableError : the endpoint refuses
            every request (bad key, unknown model, no quota) or cannot be reached; the run must
            stop.
        """
        messages = self.messages(task, docs)
        try:
            answer: Completion | LLMError = self._client.complete(messages)
        except LLMError as exc:
            answer = exc
        return self._program(task, messages, answer)

    def generate_many(self, items: Items) -> list[Program]:
        """Programs for many ``(task, docs)`` pairs, at most ``concurrency`` requests in flight.

        Returns
        -------
        One Program per item, in input order.

        Raises
        ------
        LLMFatalError, QuotaExceededError : as :meth:`generate`; raised on the first such
            answer, unsent requests are cancelled.
        """
        prompts = [self.messages(task, docs) for task, docs in items]
        answers = self._client.complete_many(prompts)
        return [self._program(task, msgs, ans) for (task, _), msgs, ans in zip(items, prompts, answers)]

    def conversation(self, task: Task, docs: Sequence[Primitive],
                     turns: Sequence[tuple[Program, str]] = ()) -> list[dict[str, str]]:
        """The messages of a round: :meth:`messages` for ``task`` and ``docs``, then, for each
        earlier round ``(program, feedback)``, the program's answer (``program.raw``) and the
        feedback turn (:func:`primsel.generation.prompts.reflection_turn`)."""
        messages = self.messages(task, docs)
        for program, feedback in turns:
            messages += reflection_turn(task, program.raw, feedback, self._reflect)
        return messages

    def revise_many(self, items: Sequence[tuple[Task, Sequence[Primitive], Sequence[tuple[Program, str]]]]
                    ) -> list[Program]:
        """The next round's programs: for each ``(task, docs, turns)``, the answer to
        :meth:`conversation`, at most ``concurrency`` requests in flight.

        Returns
        -------
        One Program per item, in input order (statuses as :meth:`generate`).

        Raises
        ------
        LLMFatalError, QuotaExceededError : as :meth:`generate_many`.
        """
        if self.protocol == "aspera":
            raise ValueError("ASPERA's protocol has no reflection rounds: set rounds = 1 or protocol = \"primsel\"")
        prompts = [self.conversation(task, docs, turns) for task, docs, turns in items]
        answers = self._client.complete_many(prompts)
        return [self._program(task, msgs, ans) for (task, _, _), msgs, ans in zip(items, prompts, answers)]

    def usage_summary(self) -> dict[str, float]:
        """Client counters (``calls``, ``requests``, ``cache_hits``, ``retries``, ``errors``,
        ``truncated``, ``prompt_tokens``, ``completion_tokens``, ``seconds``) plus
        ``programs_<status>`` counts."""
        summary = self._client.usage_summary()
        with self._lock:
            summary.update({f"programs_{status}": n for status, n in sorted(self._statuses.items())})
        return summary


#: Program status of a task whose prompt does not fit the model's context (not retried; the task
#: is an ``error`` of type ``PromptTooLong``).
PROMPT_TOO_LONG = "prompt_too_long"


#: The local generator's answer limit under primsel's protocol (tokens), when ``max_tokens`` is not set.
LOCAL_MAX_TOKENS = 512


@register("local", kind="generator")
class LocalGenerator(OpenAIGenerator):
    """Program generation by a GGUF model that llama.cpp serves on this machine for the run.

    The :class:`OpenAIGenerator` with the endpoint replaced by a server the run starts: the
    first request that is not answered from the cache starts llama.cpp's server
    (:func:`primsel.llm.local.shared_server`: a child process on a free port of
    127.0.0.1, with ``threads`` threads), and the run stops it when it ends. Components naming
    the same model and server settings share one server. No API key, no network. The model
    name in the answer-cache key is the file's stem and sha256 prefix, so a resumed run finds
    its answers without starting the server.

    Requests go one at a time (one server slot, whose prompt cache holds the last prompt), in
    :func:`prefix_order`, so each prompt recomputes only what it does not share with the one
    before; with ``example_selection = "fixed"`` (the default here) the instructions, rules
    and worked example are the same for every task of a fold.

    Parameters
    ----------
    gguf : a GGUF file; None: the packaged Qwen2.5-Coder-1.5B-Instruct (Q4_K_M), assembled into
        the cache on first use (:func:`primsel.llm.local.prepare`).
    threads : server threads (None: every core this process may use).
    n_ctx : context window in tokens; a prompt that does not fit makes its task an ``error``
        of type ``PromptTooLong`` and the run goes on.
    n_cache_reuse : llama.cpp's chunk reuse (tokens; 0: off).
    examples, template, example_selection, extraction, reflect_template, protocol, agent : as
        :class:`OpenAIGenerator`.
    temperature, seed, max_tokens, timeout_s, max_retries : endpoint settings
        (:class:`primsel.llm.endpoint.Endpoint`); ``timeout_s`` is per request, prompt
        processing included (minutes for a long prompt on a loaded CPU). ``max_tokens`` None:
        :data:`LOCAL_MAX_TOKENS`, or ASPERA's 4096 under ``protocol = "aspera"``.

    Raises
    ------
    ValueError : a setting out of range (checked at construction).
    LLMFatalError : (on the first request) the model cannot be prepared or the server does
        not start; EndpointUnreachableError when the server dies during the run (the message
        says so, with the server's last output).
    """

    def __init__(self, gguf: str | None = None, threads: int | None = None, n_ctx: int = 16384,
                 n_cache_reuse: int = 256, examples: int = 1, template: str = "ps",
                 example_selection: str = "fixed", extraction: str | None = None, reflect_template: str = "reflect",
                 protocol: str = "primsel", agent: str | None = None, temperature: float | None = 0.0,
                 seed: int | None = None, max_tokens: int | None = None, timeout_s: float = 3600.0,
                 max_retries: int = 1) -> None:
        self.gguf = os.fspath(gguf) if gguf is not None else None
        self.server = ServerSettings(threads=threads, n_ctx=n_ctx, n_cache_reuse=n_cache_reuse)
        self._endpoint = {"temperature": temperature, "seed": seed, "max_tokens": max_tokens,
                          "timeout_s": timeout_s, "max_retries": max_retries, "concurrency": 1}
        if protocol == "aspera":
            self._endpoint = aspera_endpoint(self._endpoint)
        elif max_tokens is None:
            self._endpoint["max_tokens"] = LOCAL_MAX_TOKENS
        super().__init__(examples=examples, template=template, example_selection=example_selection,
                         extraction=extraction, reflect_template=reflect_template, protocol=protocol, agent=agent,
                         model="local", **self._endpoint)
        self._chat: LocalChat | None = None

    def get_params(self) -> dict[str, Any]:
        """The constructor parameters (JSON-serialisable)."""
        own = {"gguf": self.gguf, "threads": self.server.threads, "n_ctx": self.server.n_ctx,
               "n_cache_reuse": self.server.n_cache_reuse, "examples": self.examples, "template": self.template,
               "example_selection": self.example_selection, "extraction": self.extraction,
               "reflect_template": self.reflect_template, "protocol": self.protocol, "agent": self.agent}
        return {**own, **{k: v for k, v in self._endpoint.items() if k != "concurrency"}}

    def _bind(self) -> None:
        """Point the client at the model: its name now, the server when a request is sent."""
        if self._chat is None:
            self._chat = LocalChat(self.gguf, self.server, aspera_body=self.protocol == "aspera", **self._endpoint)
            self._client = self._chat.client

    def _stopped(self, exc: EndpointUnreachableError) -> Exception:
        """``exc``, or, when the server this generator was sent to has exited, the error that says so."""
        return self._chat.explain(exc) if self._chat is not None else exc

    def generate(self, task: Task, docs: Sequence[Primitive]) -> Program:
        """As :meth:`OpenAIGenerator.generate`, from the local model."""
        self._bind()
        try:
            return super().generate(task, docs)
        except EndpointUnreachableError as exc:
            raise self._stopped(exc) from None

    def generate_many(self, items: Items) -> list[Program]:
        """As :meth:`OpenAIGenerator.generate_many`, from the local model."""
        self._bind()
        try:
            return super().generate_many(items)
        except EndpointUnreachableError as exc:
            raise self._stopped(exc) from None

    def revise_many(self, items: Sequence[tuple[Task, Sequence[Primitive], Sequence[tuple[Program, str]]]]
                    ) -> list[Program]:
        """As :meth:`OpenAIGenerator.revise_many`, from the local model."""
        self._bind()
        try:
            return super().revise_many(items)
        except EndpointUnreachableError as exc:
            raise self._stopped(exc) from None


#: The request protocols of the chat generators: primsel's prompts, or ASPERA's agents' requests.
PROTOCOLS = ("primsel", "aspera")
#: What a request is under ASPERA's protocol: the complete-codebase-knowledge agent's (``"cck"``), the
#: primitive-selection agent's generation request from its own selection (``"ps"``, the documentation in the order
#: its selection gave), or the PS agent's generation request from another retriever's selection
#: (``"ps_generation"``, the selection ordered as ASPERA orders symbols).
AGENTS = ("cck", "ps", "ps_generation")
def _check_protocol(protocol: object, agent: object) -> tuple[str, str | None]:
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {', '.join(repr(p) for p in PROTOCOLS)}, got {protocol!r}")
    if protocol == "primsel":
        if agent is not None:
            raise ValueError("agent is a setting of ASPERA's protocol: set protocol = \"aspera\" or leave agent out")
        return "primsel", None
    if agent is None:
        return "aspera", "ps_generation"
    if agent not in AGENTS:
        raise ValueError(f"agent must be one of {', '.join(repr(a) for a in AGENTS)}, got {agent!r}")
    return "aspera", str(agent)


def _check_extraction(mode: object, protocol: str = "primsel") -> str:
    if mode is None:
        return "aspera" if protocol == "aspera" else "primsel"
    if mode not in MODES:
        raise ValueError(f"extraction must be one of {', '.join(repr(m) for m in MODES)}, got {mode!r}")
    if protocol == "aspera" and mode != "aspera":
        raise ValueError("ASPERA's protocol processes answers as ASPERA does: leave extraction out or set \"aspera\"")
    return str(mode)


@register("reference", kind="generator")
class ReferenceGenerator:
    """Returns the task's reference program (AEP) whatever the selection: an upper bound of
    generation, and the check that the pipeline and the simulator agree (every task passes)."""

    def fit(self, library: Mapping[str, Primitive], train_tasks: Sequence[Task] = ()) -> ReferenceGenerator:
        """Nothing to learn. Returns ``self``."""
        return self

    def generate(self, task: Task, docs: Sequence[Primitive]) -> Program:
        """The reference program; status ``no_program`` when the task has none."""
        if not task.program.strip():
            return Program(task_id=task.id, code=None, status="no_program")
        return Program(task_id=task.id, code=task.program, status="ok", entry_point=task.entry_point)

    def generate_many(self, items: Items) -> list[Program]:
        """:meth:`generate` of every ``(task, docs)`` pair, in order."""
        return [self.generate(task, docs) for task, docs in items]

    def usage_summary(self) -> dict[str, float]:
        """Empty: no model is called."""
        return {}


@register("replay", kind="generator")
class ReplayGenerator:
    """Programs read from a JSONL file, one ``{"task_id": "17", "program": "..."}`` per line
    (the input format of ``primsel verify``), e.g. programs written by another system.

    With ``extraction = "primsel"`` (the default), a text containing a fenced code block is
    treated as a raw model answer and goes through
    :func:`primsel.generation.extract.extract_program`; otherwise the text is the program, less
    its module-level statements other than imports, definitions and constant assignments
    (:func:`primsel.generation.extract.keep_definitions`). With ``extraction = "aspera"`` every
    text is a raw answer processed by ASPERA's rules. Tasks absent from the file get status
    ``no_program``.

    Parameters
    ----------
    programs : path of the JSONL file. Relative paths are relative to the working directory;
        in an experiment file, ``primsel run`` resolves them against the file's directory
        (like ``data``).
    extraction : ``"primsel"`` or ``"aspera"``.

    Raises
    ------
    ValueError : no path given, or an unknown extraction mode.
    """

    def __init__(self, programs: str | os.PathLike[str] | None = None, extraction: str = "primsel") -> None:
        if not programs:
            raise ValueError("the replay generator needs `programs`, the path of a JSONL file")
        self.programs = os.fspath(programs)
        self.extraction = _check_extraction(extraction)
        self._table: dict[str, str] | None = None

    def fit(self, library: Mapping[str, Primitive], train_tasks: Sequence[Task] = ()) -> ReplayGenerator:
        """Read the file now (so a bad file fails before any task runs). Returns ``self``."""
        self._load()
        return self

    def _load(self) -> dict[str, str]:
        if self._table is None:
            path = Path(self.programs).expanduser()
            try:
                rows = list(read_jsonl(path))
            except OSError as exc:
                raise ValueError(f"replay: cannot read {path}: {exc.strerror or exc}") from None
            except ValueError as exc:
                raise ValueError(f"replay: {exc}") from None
            table: dict[str, str] = {}
            for n, row in rows:
                if not isinstance(row, dict) or "task_id" not in row or not isinstance(row.get("program"), str):
                    raise ValueError(f"replay: {path}:{n}: expected an object with 'task_id' and a 'program' string")
                task_id = str(row["task_id"])
                if task_id in table:
                    raise ValueError(f"replay: {path}:{n}: task {task_id} appears twice")
                table[task_id] = row["program"]
            self._table = table
        return self._table

    def generate(self, task: Task, docs: Sequence[Primitive]) -> Program:
        """The file's program for ``task`` (``no_program`` when absent or empty)."""
        text = self._load().get(task.id)
        if text is None or not text.strip():
            return Program(task_id=task.id, code=None, status="no_program", raw=text or "")
        name = task.entry_point
        if self.extraction == "aspera" or any(line.lstrip().startswith(("```", "~~~")) for line in text.splitlines()):
            return extract_program(text, task.id, name, mode=self.extraction)
        found = program_extraction(text, name)
        return Program(task_id=task.id, code=found.program, status="ok", raw=text, entry_point=found.entry_point,
                       extraction=found.details())

    def generate_many(self, items: Items) -> list[Program]:
        """:meth:`generate` of every ``(task, docs)`` pair, in order."""
        return [self.generate(task, docs) for task, docs in items]

    def usage_summary(self) -> dict[str, float]:
        """Number of programs in the file."""
        return {"programs": len(self._load())}
