"""The LLM selector: an LLM reads each module's documentation and names the primitives a request needs.

This is the primitive-selection step of ASPERA's PS agent (Coca et al., 2025, "ASPERA: A
Simulated Environment to Evaluate Planning for Complex Action Execution"): for every task and
every library module (five for the standard library), one chat request shows the module's stubs
(``Primitive.text("full")``) and the query (:func:`selection_messages`, template ``select`` of
:mod:`primsel.llm.templates`) and asks for a JSON list of symbol names. The union of the
answers, in module order, is the selection.

Ranking: the selected primitives score 1, every other primitive 0; ties are broken by primitive
id (as every retriever does), so the whole library is ranked and a selector with a threshold in
(0, 1] keeps exactly the LLM's choice. Names that are not symbols of the module shown (invented
names, or names of another module) are dropped and counted in ``usage()[task]["unknown_names"]``.

Answer parsing (:func:`parse_names`): the first JSON list in the answer (fenced or not); failing
that, each line that holds a single identifier (bullets, numbering, quotes, backticks and a
trailing ``()`` removed) is a name; other lines contribute the module's names they mention as
whole words. ``module.name`` counts as ``name``.

All ``5 x len(queries)`` requests of one ``search`` go through one thread pool of
``concurrency`` workers, and answers are cached on disk like every LLM request
(:mod:`primsel.llm.client`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from primsel.llm.client import ChatClient, LLMError
from primsel.llm.endpoint import takes_endpoint
from primsel.llm.local import LocalChat, ServerSettings
from primsel.llm.templates import PromptTemplate, as_template, load_template
from primsel.registry import register
from primsel.retrieval.base import BaseRetriever
from primsel.types import Primitive, Task

__all__ = ["LLMSelector", "parse_names", "selection_messages"]

_IDENT = re.compile(r"^[A-Za-z_][\w.]*$")
_WORD = re.compile(r"[A-Za-z_]\w*")
_FENCE_LINE = re.compile(r"^\s*(`{3,}|~{3,})")
_BULLET = re.compile(r"^\s*(?:[-*+\u2022]|\d+[.)])\s*")


def _clean(token: str) -> str:
    token = token.strip().strip("`'\",;").strip()
    if token.endswith("()"):
        token = token[:-2]
    return token.rsplit(".", 1)[-1]


def selection_messages(
    query: str,
    module: str,
    docs: Sequence[Primitive],
    template: str | os.PathLike[str] | PromptTemplate = "select",
) -> list[dict[str, str]]:
    """Chat messages asking which primitives of one module a request needs.

    Parameters
    ----------
    query : the user's request.
    module : the module's short name (``"work_calendar"``).
    docs : the module's primitives, in library order.
    template : packaged name, path or parsed template.

    Raises
    ------
    ValueError : empty ``docs``; unknown template or placeholder.
    """
    if not docs:
        raise ValueError(f"module {module!r} has no primitives to show")
    stubs = "\n\n".join(p.text("full") for p in docs)
    example = next((p.name for p in docs if p.kind == "function"), docs[0].name)
    values = {
        "module": module,
        "primitives": f"```python\n{stubs}\n```",
        "names": ", ".join(p.name for p in docs),
        "example_name": example,
        "query": query.strip(),
    }
    return as_template(template).render(values)


def parse_names(  # noqa: C901 (the answer formats the docstring lists, tried in their order)
    text: str, known: Sequence[str]
) -> tuple[list[str], list[str]]:
    """Names in a selection answer.

    Parameters
    ----------
    text : the model's answer.
    known : the names the answer may contain (the module's primitive names).

    Returns
    -------
    (known names in answer order, unknown names in answer order), both without repeats.
    """
    allowed = set(known)
    picked: list[str] = []
    unknown: list[str] = []

    def add(name: str, count_unknown: bool = True) -> None:
        if not name:
            return
        if name in allowed:
            if name not in picked:
                picked.append(name)
        elif count_unknown and name not in unknown:
            unknown.append(name)

    start, end = text.find("["), text.rfind("]")
    if 0 <= start < end:
        try:
            items = json.loads(text[start:end + 1])
        except json.JSONDecodeError:
            items = None
        if isinstance(items, list) and all(isinstance(i, str) for i in items):
            for item in items:
                add(_clean(item))
            return picked, unknown
    for line in text.splitlines():
        if _FENCE_LINE.match(line) or not line.strip():
            continue
        body = _BULLET.sub("", line).strip().rstrip(",")
        tokens = [t for t in (_clean(part) for part in body.split(",")) if t]
        if tokens and all(_IDENT.match(t) for t in tokens):
            for t in tokens:
                add(t)
        else:
            for word in _WORD.findall(line):
                add(word, count_unknown=False)
    return picked, unknown


@register("llm_selector")
@takes_endpoint
class LLMSelector(BaseRetriever):
    """Primitive selection by an LLM, one request per library module (ASPERA's PS agent).

    Parameters
    ----------
    template : packaged template name (``"select"``) or a template file path.
    **endpoint : the :class:`primsel.llm.endpoint.Endpoint` settings (``model``, required;
        ``base_url``, ``api_key_env``, ``api_key``, ``timeout_s``, ``max_retries``,
        ``temperature``, ``seed``, ``max_tokens``, ``concurrency`` (most requests in flight,
        across tasks and modules), ``backoff_s``, ``cache_namespace``).

    Raises
    ------
    ValueError : missing model, out-of-range number or unknown template.

    Notes
    -----
    A module request that fails after its retries selects nothing from that module and is
    counted in ``usage()[task]["errors"]``; a fatal endpoint error (no quota, bad key, unknown
    model, an endpoint that cannot be reached) is raised (:class:`primsel.llm.client.LLMFatalError`).
    """

    def __init__(self, template: str = "select", **endpoint: Any) -> None:
        self._client = ChatClient(prefix_ordered=True, **endpoint)  # checks the settings; sends nothing until asked
        self._template = load_template(template)  # parsed once; fails early on a bad name or path
        self.template = template
        self._usage: dict[str, dict[str, float]] = {}
        self._unknown: dict[str, list[str]] = {}

    def get_params(self) -> dict[str, Any]:
        """The constructor parameters (JSON-serialisable); the API key is never included."""
        return {"template": self.template, **self._client.endpoint.params()}

    def fit(self, library: Mapping[str, Primitive], train_tasks: Sequence[Task] = ()) -> LLMSelector:
        """Group the library by module (in library order). Returns ``self``; learns nothing."""
        super().fit(library, train_tasks)
        modules: dict[str, list[Primitive]] = {}
        for p in library.values():
            modules.setdefault(p.module, []).append(p)
        self.modules = modules
        return self

    def score(self, queries: Mapping[str, str]) -> dict[str, Mapping[str, float]]:
        """Ask the model, per query and module, which primitives are needed.

        Returns
        -------
        ``{query_id: {primitive_id: 1.0}}`` for the selected primitives (the rest score 0).

        Raises
        ------
        LLMFatalError, QuotaExceededError : the endpoint refuses every request.
        """
        jobs: list[tuple[str, str]] = [(q, m) for q in queries for m in self.modules]
        prompts = [selection_messages(queries[q], m, self.modules[m], self._template) for q, m in jobs]
        answers = self._client.complete_many(prompts)
        scores: dict[str, dict[str, float]] = {q: {} for q in queries}
        for q in queries:
            self._usage[q] = {"prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0, "calls": 0,
                              "cached": 0, "errors": 0, "unknown_names": 0}
            self._unknown[q] = []
        for (q, module), answer in zip(jobs, answers):
            usage = self._usage[q]
            usage["calls"] += 1
            if isinstance(answer, LLMError):
                usage["errors"] += 1
                continue
            usage["prompt_tokens"] += answer.prompt_tokens
            usage["completion_tokens"] += answer.completion_tokens
            usage["seconds"] += answer.seconds
            usage["cached"] += int(answer.cached)
            docs = self.modules[module]
            picked, unknown = parse_names(answer.text, [p.name for p in docs])
            by_name = {p.name: p.id for p in docs}
            for name in picked:
                scores[q][by_name[name]] = 1.0
            usage["unknown_names"] += len(unknown)
            self._unknown[q].extend(f"{module}:{name}" for name in unknown)
        return scores

    def usage(self) -> dict[str, dict[str, float]]:
        """Per task id: ``prompt_tokens``, ``completion_tokens``, ``seconds`` (sum over its
        module requests; they overlap in time), ``calls``, ``cached`` (calls answered from the
        cache), ``errors`` (failed module requests) and ``unknown_names``."""
        return {q: dict(u) for q, u in self._usage.items()}

    def unknown_names(self) -> dict[str, list[str]]:
        """Per task id, the dropped names as ``"module:name"``."""
        return {q: list(v) for q, v in self._unknown.items()}

    def usage_summary(self) -> dict[str, float]:
        """Aggregate client counters (see :meth:`primsel.llm.client.ChatClient.usage_summary`)."""
        return self._client.usage_summary()


@register("local_selector")
class LocalLLMSelector(LLMSelector):
    """ASPERA's PS agent (:class:`LLMSelector`) with a GGUF model that llama.cpp serves on this
    machine for the run, the same way as the ``local`` generator
    (:class:`primsel.generation.generators.LocalGenerator`): the first request not answered
    from the cache starts the server (:func:`primsel.llm.local.shared_server`, shared with a
    ``local`` generator of the same model and settings), the run stops it. Module requests go
    one at a time, in :func:`primsel.llm.client.prefix_order`, so the server's prompt cache
    keeps the module documentation a request shares with the one before.

    Parameters
    ----------
    gguf : a GGUF file; None: the packaged Qwen2.5-Coder-1.5B-Instruct (Q4_K_M).
    threads, n_ctx, n_cache_reuse : server settings (:class:`primsel.llm.local.ServerSettings`).
    template : packaged template name (``"select"``) or a template file path.
    temperature, seed, max_tokens, timeout_s, max_retries : endpoint settings.

    Raises
    ------
    ValueError : a setting out of range.
    LLMFatalError : (on the first request) the model cannot be prepared or its server does not
        start, or it dies during the run.
    """

    def __init__(self, gguf: str | None = None, threads: int | None = None, n_ctx: int = 16384,
                 n_cache_reuse: int = 256, template: str = "select", temperature: float | None = 0.0,
                 seed: int | None = None, max_tokens: int | None = 256, timeout_s: float = 1800.0,
                 max_retries: int = 1) -> None:
        self.gguf = os.fspath(gguf) if gguf is not None else None
        self.server = ServerSettings(threads=threads, n_ctx=n_ctx, n_cache_reuse=n_cache_reuse)
        self._endpoint = {"temperature": temperature, "seed": seed, "max_tokens": max_tokens,
                          "timeout_s": timeout_s, "max_retries": max_retries, "concurrency": 1}
        super().__init__(template=template, model="local", **self._endpoint)
        self._chat: LocalChat | None = None

    def get_params(self) -> dict[str, Any]:
        """The constructor parameters (JSON-serialisable)."""
        return {"gguf": self.gguf, "threads": self.server.threads, "n_ctx": self.server.n_ctx,
                "n_cache_reuse": self.server.n_cache_reuse, "template": self.template,
                **{k: v for k, v in self._endpoint.items() if k != "concurrency"}}

    def score(self, queries: Mapping[str, str]) -> dict[str, Mapping[str, float]]:
        """As :meth:`LLMSelector.score`, from the local model."""
        if self._chat is None:
            self._chat = LocalChat(self.gguf, self.server, **self._endpoint)
            self._client = self._chat.client
        return super().score(queries)
