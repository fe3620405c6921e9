"""ASPERA's primitive selection, as ASPERA's PS agent performs it: one request per module of ``aspera.apps``.

For every task the selector sends ASPERA's 12 selection requests (:meth:`primsel.aspera.AsperaProtocol.selection_messages`:
one ``system`` message showing a module's whole documentation file and the query, asking for import statements),
parses the answers with ASPERA's parser and finds the symbols they name by ASPERA's substring rule
(:meth:`primsel.aspera.AsperaProtocol.parse_selection`; Coca et al., ACL 2025, and apple/ml-aspera's
``src/aspera/agent/primitives_selection_agent.py``). An experiment with ``[generator] protocol = "aspera"`` uses
it for ``retriever = { type = "llm_selector" }``, with the generator's endpoint, model and sampling (ASPERA's agent
has one completer), and keeps every selected symbol (selector ``positive``).

Ranking: the selected symbols that are primitives of the library come first, in the agent's order (the score of
the i-th of n is ``(n - i) / n``), the rest score 0 (ties by id). The agent's order is kept because the PS
generation request depends on it (:meth:`primsel.aspera.AsperaProtocol.generation_messages`). Names the answers
match that are not library primitives (ASPERA's rule also finds ``datetime``, ``Enum``, module names) are not
ranked; each is recorded in the task's usage as ``outside:<name>`` = 1, for ASPERA's selection figures.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from primsel.aspera import aspera_endpoint, aspera_protocol
from primsel.llm.client import ChatClient, LLMError
from primsel.llm.endpoint import takes_endpoint
from primsel.llm.local import LocalChat, ServerSettings
from primsel.registry import register
from primsel.retrieval.base import BaseRetriever
from primsel.types import Primitive, Task

__all__ = ["AsperaSelector", "LocalAsperaSelector", "OUTSIDE_PREFIX"]

#: Usage key prefix of a selected name that is not a library primitive.
OUTSIDE_PREFIX = "outside:"


@register("aspera_selector")
@takes_endpoint
class AsperaSelector(BaseRetriever):
    """ASPERA's PS agent's selection step: 12 requests per task, ASPERA's parser and symbol rule.

    Parameters
    ----------
    **endpoint : the :class:`primsel.llm.endpoint.Endpoint` settings (``model``, required; ``base_url``,
        ``api_key_env``, ``api_key``, ``timeout_s``, ``max_retries``, ``temperature``, ``seed``, ``max_tokens``,
        ``concurrency``, ``backoff_s``, ``cache_namespace``). ``max_tokens``, ``seed`` and ``temperature`` default
        to ASPERA's (4096, 0, 0.0); the body is ASPERA's.

    Raises
    ------
    ValueError : missing model or an out-of-range setting.
    primsel.aspera.AsperaSourceError : (in ``fit``) no usable checkout of ASPERA.

    Notes
    -----
    A request that fails after its retries selects nothing from its module and is counted in
    ``usage()[task]["errors"]`` (the cell is then incomplete and a re-run sends it again); a fatal endpoint error is
    raised (:class:`primsel.llm.client.LLMFatalError`).
    """

    def __init__(self, **endpoint: Any) -> None:
        # checks the settings; sends nothing until asked
        self._client = ChatClient(prefix_ordered=True, aspera_body=True, **aspera_endpoint(endpoint))
        self._usage: dict[str, dict[str, float]] = {}

    def get_params(self) -> dict[str, Any]:
        """The constructor parameters (JSON-serialisable); the API key is never included."""
        return self._client.endpoint.params()

    def fit(self, library: Mapping[str, Primitive], train_tasks: Sequence[Task] = ()) -> AsperaSelector:
        """Load ASPERA's protocol and map symbol names to the library's ids. Returns ``self``; learns nothing."""
        super().fit(library, train_tasks)
        self._protocol = aspera_protocol()
        self._ids = {p.name: p.id for p in library.values()}
        return self

    def score(self, queries: Mapping[str, str]) -> dict[str, Mapping[str, float]]:
        """Ask the model about every module for every query.

        Returns
        -------
        ``{query_id: {primitive_id: score}}`` for the selected primitives, in the agent's order (see the module).

        Raises
        ------
        LLMFatalError, QuotaExceededError : the endpoint refuses every request.
        """
        per_query = {q: self._protocol.selection_messages(text) for q, text in queries.items()}
        prompts = [messages for q in queries for messages in per_query[q]]
        answers = iter(self._client.complete_many(prompts))
        scores: dict[str, dict[str, float]] = {}
        for q in queries:
            usage = {"prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0, "calls": 0, "cached": 0,
                     "errors": 0, "unparsed": 0}
            texts: list[str | None] = []
            for _ in per_query[q]:
                answer = next(answers)
                usage["calls"] += 1
                if isinstance(answer, LLMError):
                    usage["errors"] += 1
                    texts.append(None)
                    continue
                usage["prompt_tokens"] += answer.prompt_tokens
                usage["completion_tokens"] += answer.completion_tokens
                usage["seconds"] += answer.seconds
                usage["cached"] += int(answer.cached)
                texts.append(answer.text)
            parsed = self._protocol.parse_selection(texts)
            usage["unparsed"] = parsed["unparsed"]
            ranked = [self._ids[name] for name in parsed["names"] if name in self._ids]
            for name in parsed["names"]:
                if name not in self._ids:
                    usage[OUTSIDE_PREFIX + name] = 1.0
            scores[q] = {pid: (len(ranked) - i) / len(ranked) for i, pid in enumerate(ranked)}
            self._usage[q] = usage
        return scores

    def usage(self) -> dict[str, dict[str, float]]:
        """Per task id: ``prompt_tokens``, ``completion_tokens``, ``seconds`` (summed over its 12 requests),
        ``calls``, ``cached`` (answered from the cache), ``errors`` (failed requests), ``unparsed`` (answers
        ASPERA's parser rejects: they select nothing, as in ASPERA) and ``outside:<name>`` (see the module)."""
        return {q: dict(u) for q, u in self._usage.items()}

    def usage_summary(self) -> dict[str, float]:
        """Aggregate client counters (see :meth:`primsel.llm.client.ChatClient.usage_summary`)."""
        return self._client.usage_summary()


@register("aspera_local_selector")
class LocalAsperaSelector(AsperaSelector):
    """:class:`AsperaSelector` with a GGUF model llama.cpp serves on this machine for the run, the server shared
    with a ``local`` generator of the same model and settings (:func:`primsel.llm.local.shared_server`). Requests
    go one at a time in :func:`primsel.llm.client.prefix_order`: all tasks' requests about one module follow each
    other, so the server's prompt cache keeps the module's documentation and computes only the query.

    Parameters
    ----------
    gguf : a GGUF file; None: the packaged Qwen2.5-Coder-1.5B-Instruct (Q4_K_M).
    threads, n_ctx, n_cache_reuse : server settings (:class:`primsel.llm.local.ServerSettings`).
    temperature, seed, max_tokens, timeout_s, max_retries : endpoint settings (ASPERA's defaults as
        :class:`AsperaSelector`).

    Raises
    ------
    ValueError : a setting out of range.
    LLMFatalError : (on the first request) the model cannot be prepared or its server does not start.
    """

    def __init__(self, gguf: str | None = None, threads: int | None = None, n_ctx: int = 16384,
                 n_cache_reuse: int = 256, temperature: float | None = 0.0, seed: int | None = None,
                 max_tokens: int | None = None, timeout_s: float = 3600.0, max_retries: int = 1) -> None:
        self.gguf = os.fspath(gguf) if gguf is not None else None
        self.server = ServerSettings(threads=threads, n_ctx=n_ctx, n_cache_reuse=n_cache_reuse)
        self._endpoint = aspera_endpoint({"temperature": temperature, "seed": seed, "max_tokens": max_tokens,
                                          "timeout_s": timeout_s, "max_retries": max_retries, "concurrency": 1})
        super().__init__(model="local", **self._endpoint)
        self._chat: LocalChat | None = None

    def get_params(self) -> dict[str, Any]:
        """The constructor parameters (JSON-serialisable)."""
        return {"gguf": self.gguf, "threads": self.server.threads, "n_ctx": self.server.n_ctx,
                "n_cache_reuse": self.server.n_cache_reuse,
                **{k: v for k, v in self._endpoint.items() if k != "concurrency"}}

    def score(self, queries: Mapping[str, str]) -> dict[str, Mapping[str, float]]:
        """As :meth:`AsperaSelector.score`, from the local model."""
        if self._chat is None:
            self._chat = LocalChat(self.gguf, self.server, aspera_body=True, **self._endpoint)
            self._client = self._chat.client
        return super().score(queries)
