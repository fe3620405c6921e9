"""A chat-completions client over the ``openai`` package: cache, deadlines, retries, bounded concurrency.

:class:`ChatClient` sends ``messages`` to any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama,
llama.cpp server, ...) and returns a :class:`Completion`. It

* gives every attempt a **total deadline** of ``timeout_s`` seconds: connecting, sending and
  receiving the whole answer. A server that trickles its answer (one byte every 0.5 s) is cut
  off at the deadline, not only when it pauses longer than ``timeout_s``;
* retries the transient answers in :data:`RETRY_STATUSES` (408, 409, 429, 500, 502, 503,
  504, 520, 521, 522, 523, 524, 529), timeouts, connection errors and malformed answers (an HTTP
  200 whose body is empty, white space, cut JSON, not UTF-8 or not a JSON object) up to
  ``max_retries`` times; the other 5xx (501 Not Implemented, 505, 506-511, 525-527, ...) say the
  same thing to every attempt and fail at once. **Backoff**: the wait before retry ``i`` (``i = 0, 1, ...``) is
  ``min(backoff_s * 2**i, max_backoff_s)`` seconds times a random factor in [0.8, 1.0], unless
  the answer has a ``Retry-After`` header (seconds or an HTTP date; ``retry-after-ms`` too):
  then it waits as long as that says, capped at ``max_retry_after_s``. So, without
  ``Retry-After``, one request takes at most ``(max_retries + 1) * timeout_s +
  sum(min(backoff_s * 2**i, max_backoff_s) for i < max_retries)`` seconds once it is sent
  (:attr:`ChatClient.max_request_seconds`; 6 s for ``timeout_s = 1``, ``max_retries = 2``,
  ``backoff_s = 1``; 247 s with the defaults);
* stops the run on errors that every further request would repeat: a 429 whose error code or
  type is ``insufficient_quota`` (:class:`QuotaExceededError`, raised after that one request,
  without retries), 401, 403 and 404 (:class:`LLMFatalError`), and a request whose every
  attempt failed to connect (:class:`EndpointUnreachableError`: nothing listens at the URL, the
  host is unknown, ...; a timeout is not a connection failure). **After a fatal answer the
  client sends nothing more**: requests waiting for a slot or a retry fail with the same error
  unsent, and :meth:`ChatClient.complete_many` cancels its requests still in flight;
* bounds the requests in flight to ``concurrency`` across all threads (the client is
  thread-safe; :meth:`ChatClient.complete_many` sends a batch with that many in flight);
* stops at once when interrupted: Ctrl-C (``KeyboardInterrupt``) in a thread waiting in
  :meth:`ChatClient.complete` or :meth:`ChatClient.complete_many` cancels its requests and
  closes their connections; answers received before stay cached;
* caches completions on disk under ``llm/`` of the cache directory
  (:func:`primsel.files.cache_dir`: ``$PRIMSEL_CACHE_DIR``, default ``~/.cache/primsel``),
  one JSON file per request, keyed by the sha256 of the canonical JSON of
  ``{"model", "messages", "params": {"temperature", "seed", "max_tokens"}}``, plus
  ``"namespace"`` when ``cache_namespace`` is set. The endpoint URL is not part of the key: two
  endpoints serving the same model name share answers, unless they are given different
  ``cache_namespace`` values.
  A cached request sends nothing; an answer is written as soon as it arrives, atomically
  (:func:`primsel.files.write_atomic`), so a run killed midway leaves only complete entries.
  Errors are never cached; truncated completions (``finish_reason == "length"``) are, since
  the same request truncates again; one cut because the context was full is served only under
  the same context window (``context_tokens``, a local server's ``n_ctx``). Inside :func:`primsel.files.caches_disabled` (``primsel
  run --no-cache``) the cache is neither read nor written.

Requests are sent by ``openai.AsyncOpenAI`` on one asyncio event loop, in a daemon thread shared
by every client of the process; :meth:`ChatClient.complete` and
:meth:`ChatClient.complete_many` block the calling thread until their answers are in. Deadlines
and interrupts cancel the request's task, which closes its connection. The ``openai`` package is
imported on the first request, never at import time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from primsel.checks import check_number
from primsel.files import caches_enabled, write_atomic
from primsel.llm.answers import answer_path
from primsel.llm.completion import (
    CONTEXT_STATUSES,
    FATAL_STATUSES,
    RETRY_STATUSES,
    Completion,
    EndpointUnreachableError,
    LLMError,
    LLMFatalError,
    Messages,
    PromptTooLongError,
    QuotaExceededError,
    cache_key,
    encodable_text,
    error_with_cause,
    is_context_error,
    is_quota_error,
    malformed_body,
    parse_retry_after,
    preview,
    read_completion,
    short_error,
)
from primsel.llm.endpoint import Endpoint, takes_endpoint
from primsel.progress import activity

__all__ = [
    "ChatClient",
    "Completion",
    "EndpointUnreachableError",
    "LLMError",
    "LLMFatalError",
    "PromptTooLongError",
    "prefix_order",
    "QuotaExceededError",
    "cache_key",
    "parse_retry_after",
]

log = logging.getLogger(__name__)

#: The keys of the request body ASPERA's OpenAI completer sends, in its order (``aspera_body``).
ASPERA_BODY_KEYS = ("messages", "model", "max_tokens", "n", "seed", "stop", "temperature")

@dataclass
class _Counters:
    calls: int = 0
    requests: int = 0
    cache_hits: int = 0
    retries: int = 0
    errors: int = 0
    truncated: int = 0
    prompt_tokens: int = 0
    prompt_tokens_cached: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    server_seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def snapshot(self) -> dict[str, float]:
        with self.lock:
            return {
                "calls": self.calls,
                "requests": self.requests,
                "cache_hits": self.cache_hits,
                "retries": self.retries,
                "errors": self.errors,
                "truncated": self.truncated,
                "prompt_tokens": self.prompt_tokens,
                "prompt_tokens_cached": self.prompt_tokens_cached,
                "completion_tokens": self.completion_tokens,
                "seconds": round(self.seconds, 6),
                "server_seconds": round(self.server_seconds, 6),
            }


T = TypeVar("T")

_loop_lock = threading.Lock()
_loop_state: dict[str, Any] = {"loop": None, "pid": None}


def _event_loop() -> asyncio.AbstractEventLoop:
    """The asyncio event loop every client of this process sends its requests on, running in a
    daemon thread (started on first use, and again in a forked child)."""
    with _loop_lock:
        loop = _loop_state["loop"]
        if loop is None or _loop_state["pid"] != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="primsel-llm", daemon=True).start()
            _loop_state.update(loop=loop, pid=os.getpid())
        return loop


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` on the shared loop and wait for its result in the calling thread; an
    exception in the caller (Ctrl-C's KeyboardInterrupt) cancels it."""
    future = asyncio.run_coroutine_threadsafe(coroutine, _event_loop())
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise


@dataclass(frozen=True)
class _Failed:
    """An attempt that failed in a way worth trying again.

    Attributes
    ----------
    reason : what went wrong, for the log and the final error.
    retry_after : seconds the answer's ``Retry-After`` asks to wait, or None (back off).
    connection_failed : the attempt could not connect (every attempt failing so is fatal).
    """

    reason: str
    retry_after: float | None = None
    connection_failed: bool = False


#: Tokens by which the prompt and answer of a cut answer cached without its window may miss the
#: window and still count as having filled it (servers stop within a token or two of it).
WINDOW_SLACK = 8


@takes_endpoint
class ChatClient:
    """Thread-safe chat-completions client with cache, deadlines, retries and a concurrency bound.

    Parameters
    ----------
    cache : read and write the on-disk cache (never inside
        :func:`primsel.files.caches_disabled`).
    max_backoff_s : cap of one backoff wait in seconds, >= 0.
    max_retry_after_s : cap of one ``Retry-After`` wait in seconds, >= 0.
    connect : called once, before the first request is sent (never for answers from the
        cache), returning the base URL to send to; it may start a server (a local model,
        :mod:`primsel.llm.local`). None: ``base_url`` as configured.
    prefix_ordered : :meth:`complete_many` sends its requests in :func:`prefix_order` (answers
        still come back in input order), so that a server with a prompt cache computes only what
        a prompt does not share with the one before.
    context_tokens : the model's context window in tokens (a local server's ``n_ctx``), or None
        when not known. An answer cut because the context was full (finish reason ``length``
        with fewer answer tokens than ``max_tokens``) is cached with it, and served from the
        cache only to a client of the same window (:meth:`ChatClient.serves`); the cache key
        does not change, so every other answer is shared as before.
    aspera_body : send the body ASPERA's OpenAI completer sends (:data:`ASPERA_BODY_KEYS`, in that
        order: ``messages``, ``model``, ``max_tokens``, ``n`` = 1, ``seed``, ``stop`` = null,
        ``temperature``), every key present even when None; else ``model``, ``messages`` and the
        sampling parameters that are set. The cache key is the same either way.
    **endpoint : the :class:`primsel.llm.endpoint.Endpoint` settings (``model``, ``base_url``,
        ``api_key_env``, ``api_key``, ``timeout_s`` (the total deadline of one attempt),
        ``max_retries``, ``temperature``, ``seed``, ``max_tokens``, ``concurrency``,
        ``backoff_s``, ``cache_namespace``). Without a key a custom ``base_url`` gets the
        placeholder ``"unused"`` (local servers ignore it); OpenAI's own endpoint needs one.

    Raises
    ------
    ValueError : empty model, an out-of-range numeric setting or a non-string namespace.
    """

    def __init__(self, cache: bool = True, max_backoff_s: float = 60.0, max_retry_after_s: float = 300.0,
                 connect: Callable[[], str] | None = None, prefix_ordered: bool = False, aspera_body: bool = False,
                 context_tokens: int | None = None, **endpoint: Any) -> None:
        self.endpoint = Endpoint(**endpoint)
        check_number("max_backoff_s", max_backoff_s, minimum=0)
        check_number("max_retry_after_s", max_retry_after_s, minimum=0)
        if context_tokens is not None:
            check_number("context_tokens", context_tokens, minimum=1, integer=True)
        self.context_tokens = context_tokens
        #: the URL requests go to: ``base_url``, else ``$OPENAI_BASE_URL``, else None (OpenAI's)
        self.base_url = self.endpoint.base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.cache = cache
        self._connect = connect
        self.prefix_ordered = prefix_ordered
        self.aspera_body = aspera_body
        self.max_backoff_s = float(max_backoff_s)
        self.max_retry_after_s = float(max_retry_after_s)
        # used on the event loop only (asyncio primitives bind to the loop at first use)
        self._slots = asyncio.Semaphore(self.endpoint.concurrency)
        self._key_locks: dict[str, asyncio.Lock] = {}
        self._counters = _Counters()
        self._client: Any = None
        self._client_lock = threading.Lock()
        self._fatal: LLMFatalError | None = None
        #: tests: called with each backoff delay instead of waiting it
        self._sleep: Callable[[float], object] | None = None
        self._jitter = random.Random()  # private: never disturbs the global random state
        self._progress: RequestProgress | None = None  # the answers of complete_many, counted

    # -- public -------------------------------------------------------------------------------
    @property
    def params(self) -> dict[str, Any]:
        """The sampling parameters of every request (the ``params`` part of the cache key)."""
        e = self.endpoint
        return {"temperature": e.temperature, "seed": e.seed, "max_tokens": e.max_tokens}

    @property
    def max_request_seconds(self) -> float:
        """The longest one request can take once sent, when the endpoint sends no
        ``Retry-After``: ``(max_retries + 1) * timeout_s + sum(min(backoff_s * 2**i,
        max_backoff_s) for i < max_retries)`` seconds (every attempt at its deadline, every
        backoff at its longest). A ``Retry-After`` header replaces that retry's wait, up to
        ``max_retry_after_s``. Waiting for a slot (``concurrency``) is not included."""
        e = self.endpoint
        waits = sum(min(e.backoff_s * 2**i, self.max_backoff_s) for i in range(e.max_retries))
        return (e.max_retries + 1) * e.timeout_s + waits

    def complete(self, messages: Messages) -> Completion:
        """Answer one chat request (from the cache when possible).

        Parameters
        ----------
        messages : ``[{"role": "system" | "user" | "assistant", "content": str}, ...]``.

        Returns
        -------
        Completion

        Raises
        ------
        LLMError : the request failed after the allowed retries, or was rejected (4xx).
        LLMFatalError, QuotaExceededError, EndpointUnreachableError : the run must stop (see the
            module docstring).
        KeyboardInterrupt : the caller was interrupted; the request is cancelled.
        """
        return _run(self._answer(_clean(messages)))

    def complete_many(self, requests: Sequence[Messages]) -> list[Completion | LLMError]:
        """Answer many chat requests with at most ``concurrency`` in flight, sent in input order
        (in :func:`prefix_order` when the client is ``prefix_ordered``).

        Parameters
        ----------
        requests : one message list per request.

        Returns
        -------
        One entry per request, in input order: a :class:`Completion`, or the :class:`LLMError`
        that request ended with.

        Raises
        ------
        LLMFatalError, QuotaExceededError, EndpointUnreachableError : raised as soon as one
            request hits it; no request is sent after it, and those in flight are cancelled.
        KeyboardInterrupt : the caller was interrupted; every request still queued or in
            flight is cancelled at once (answers received before stay cached).
        """
        if not requests:
            return []
        cleaned = [_clean(m) for m in requests]
        with activity(total=len(cleaned), desc="LLM requests", unit="request") as bar:
            self._progress = RequestProgress(bar)
            try:
                if not self.prefix_ordered:
                    return _run(self._answer_many(cleaned))
                order = prefix_order(cleaned)
                answers = _run(self._answer_many([cleaned[i] for i in order]))
            finally:
                self._progress = None
        out: list[Completion | LLMError] = [None] * len(cleaned)  # type: ignore[list-item]
        for i, answer in zip(order, answers):
            out[i] = answer
        return out

    def usage_summary(self) -> dict[str, float]:
        """Aggregate counters since construction.

        Returns
        -------
        ``calls`` (complete() calls), ``requests`` (HTTP requests sent, retries included),
        ``cache_hits``, ``retries``, ``errors`` (calls that ended in an error), ``truncated``
        (finish_reason ``length``), ``prompt_tokens``, ``completion_tokens``, ``seconds``
        (sum of call wall times; calls overlap, so this exceeds elapsed time).
        """
        return self._counters.snapshot()

    @property
    def url(self) -> str:
        """The endpoint URL requests go to (``base_url``, or OpenAI's default)."""
        return self.base_url or "https://api.openai.com/v1 (the OpenAI default)"

    # -- on the event loop --------------------------------------------------------------------
    async def _answer_many(self, requests: list[list[dict[str, str]]]) -> list[Completion | LLMError]:
        tasks = [asyncio.ensure_future(self._answer_or_error(m)) for m in requests]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            failed = [t.exception() for t in tasks if t.done() and not t.cancelled() and t.exception()]
            if failed:
                raise failed[0]
            return [t.result() for t in tasks]
        finally:
            for task in tasks:  # after a fatal answer or a cancellation: stop the others
                task.cancel()

    async def _answer_or_error(self, messages: list[dict[str, str]]) -> Completion | LLMError:
        try:
            answer: Completion | LLMError = await self._answer(messages)
        except LLMError as exc:
            answer = exc
        if self._progress is not None:
            self._progress.answered(answer)
        return answer

    async def _answer(self, messages: list[dict[str, str]]) -> Completion:
        start = time.perf_counter()
        with self._counters.lock:
            self._counters.calls += 1
        key = cache_key(self.endpoint.model, messages, self.params, self.endpoint.cache_namespace)
        lock = self._key_locks.get(key)
        if lock is None:
            lock = self._key_locks[key] = asyncio.Lock()
        async with lock:  # the same request twice at once: the second gets the first's answer
            cache = self.cache and caches_enabled()
            # read here, so that requests reach their slots in the order they were given
            hit = self._cache_read(key) if cache else None
            if hit is not None and self.serves(hit):
                completion = Completion(
                    text=hit.get("text", ""),
                    finish_reason=hit.get("finish_reason"),
                    prompt_tokens=int(hit.get("prompt_tokens", 0)),
                    completion_tokens=int(hit.get("completion_tokens", 0)),
                    prompt_tokens_cached=int(hit.get("prompt_tokens_cached", 0)),
                    seconds=time.perf_counter() - start,
                    cached=True,
                    key=key,
                )
                self._count(completion, cache_hit=True)
                return completion
            completion = dataclasses.replace(await self._send(messages, start), key=key)
            if cache:
                # written by a worker thread: on the loop, the file system calls of every answer
                # would queue behind each other (and before the next requests' sends)
                await asyncio.to_thread(self._cache_write, key, messages, completion)
        self._count(completion, cache_hit=False)
        return completion

    async def _send(self, messages: list[dict[str, str]], start: float) -> Completion:
        """Send one request, trying again after each transient failure up to ``max_retries`` times.

        Parameters
        ----------
        messages : the cleaned messages of the request.
        start : ``time.perf_counter()`` when the call began (the completion's ``seconds``).

        Returns
        -------
        Completion : the first answer with choices (``key`` not set).

        Raises
        ------
        LLMError, PromptTooLongError : rejected, or every attempt failed.
        LLMFatalError, QuotaExceededError, EndpointUnreachableError : the run must stop.
        """
        client = self._openai()
        body = self._body(messages)
        retries = 0
        connection_failures = 0
        while True:
            outcome = await self._attempt(client, body, start, retries)
            if isinstance(outcome, Completion):
                return outcome
            connection_failures += int(outcome.connection_failed)
            if retries >= self.endpoint.max_retries:
                self._give_up(outcome.reason, retries + 1, connection_failures)
            await self._wait_to_retry(outcome, retries)
            retries += 1

    async def _attempt(
        self, client: Any, body: dict[str, Any], start: float, retries: int
    ) -> Completion | _Failed:
        """Send the request once, in a concurrency slot and within the deadline of ``timeout_s``.

        Parameters
        ----------
        client : the ``openai.AsyncOpenAI`` client.
        body : the JSON body of the request (:meth:`_body`).
        start : ``time.perf_counter()`` when the call began.
        retries : attempts made before this one (recorded in the completion).

        Returns
        -------
        Completion | _Failed : the answer, or why this attempt failed in a way worth retrying.

        Raises
        ------
        LLMFatalError : a fatal answer was handled before (nothing more is sent), or this one is.
        LLMError : an answer that every attempt would repeat (see :meth:`_status_failure`), or
            an answer without choices.
        """
        import openai

        timeout = self.endpoint.timeout_s
        async with self._slots:
            # checked with the slot held and nothing awaited before the request starts: once
            # a fatal answer has been handled, nothing more is sent
            if self._fatal is not None:
                raise self._fatal
            with self._counters.lock:
                self._counters.requests += 1
            try:
                async with asyncio.timeout(timeout):  # the whole attempt, not each read
                    # the SDK's documented custom-request call: the body is sent as built here
                    # and the JSON answer comes back as plain data, skipping the per-request
                    # parameter transformation and response models of chat.completions.create
                    response = await client.post("/chat/completions", cast_to=object, body=body,
                                                 options={"timeout": timeout})
            except TimeoutError:
                return _Failed(f"timeout: no complete answer within the deadline of {timeout:g} s")
            except openai.APIStatusError as exc:
                return self._status_failure(exc)
            except openai.APITimeoutError:
                return _Failed(f"timeout after {timeout:g} s")
            except openai.APIConnectionError as exc:  # after APITimeoutError, its subclass
                return _Failed(f"connection error: {error_with_cause(exc)}", connection_failed=True)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # a 200 with a broken body
                return _Failed(f"malformed answer: {malformed_body(exc)}")
            else:
                return self._read_answer(response, start, retries)

    def _status_failure(self, exc: Any) -> _Failed:
        """Sort an HTTP error answer (an ``openai.APIStatusError``): raise, or say why to retry.

        Returns
        -------
        _Failed : a status in :data:`RETRY_STATUSES`, with the wait its ``Retry-After`` asks for.

        Raises
        ------
        QuotaExceededError : a 429 that says ``insufficient_quota``.
        LLMFatalError : a status in :data:`FATAL_STATUSES`.
        PromptTooLongError : the prompt does not fit the model's context.
        LLMError : any other status that is not retried.
        """
        status = exc.status_code
        if status == 429 and is_quota_error(exc):
            self._fail_fatal(QuotaExceededError(
                f"the endpoint reports insufficient quota (429 insufficient_quota) for model "
                f"{self.endpoint.model!r}: add credit or use another key; stopping the run"
            ))
        if status in FATAL_STATUSES:
            self._fail_fatal(LLMFatalError(
                f"the endpoint answered {status} for model {self.endpoint.model!r} at "
                f"{self.base_url or 'the OpenAI default URL'}: {short_error(exc)}; stopping the run"
            ))
        if status in CONTEXT_STATUSES and is_context_error(exc):
            with self._counters.lock:
                self._counters.errors += 1
            raise PromptTooLongError(
                f"the prompt is longer than the model's context: {short_error(exc)}")
        if status not in RETRY_STATUSES:
            self._fail(f"rejected with HTTP {status}: {short_error(exc)}")
        retry_after = parse_retry_after(getattr(exc.response, "headers", None))
        return _Failed(f"HTTP {status}", retry_after=retry_after)

    def _read_answer(self, response: object, start: float, retries: int) -> Completion | _Failed:
        """The completion in a successful answer's decoded body.

        Returns
        -------
        Completion | _Failed : the completion, or a malformed answer (not a JSON object) to retry.

        Raises
        ------
        LLMError : the answer has no choices.
        """
        if not isinstance(response, Mapping):
            return _Failed(f"malformed answer: the body is not a JSON object ({preview(response)})")
        completion = read_completion(response, time.perf_counter() - start, retries)
        if completion is None:
            self._fail("the endpoint answered without choices")
        return completion

    def _give_up(self, reason: str, attempts: int, connection_failures: int) -> NoReturn:
        """End a request whose every allowed attempt failed; ``reason`` is the last failure's.

        Raises
        ------
        EndpointUnreachableError : every attempt failed to connect.
        LLMError : otherwise.
        """
        if connection_failures == attempts:
            self._fail_fatal(EndpointUnreachableError(
                f"cannot connect to the LLM endpoint at {self.url} ({attempts} attempts; last: "
                f"{reason}): is the server running, and is base_url / OPENAI_BASE_URL right?"
            ))
        self._fail(f"gave up after {attempts} attempts; last: {reason}")

    def _retry_delay(self, failure: _Failed, retries: int) -> float:
        """Seconds to wait before retry number ``retries`` (from 0): the answer's ``Retry-After``
        capped at ``max_retry_after_s``, else the jittered exponential backoff."""
        if failure.retry_after is not None:
            return min(failure.retry_after, self.max_retry_after_s)
        backoff = min(self.endpoint.backoff_s * (2**retries), self.max_backoff_s)
        return backoff * self._jitter.uniform(0.8, 1.0)

    async def _wait_to_retry(self, failure: _Failed, retries: int) -> None:
        """Log the failure, count the retry and wait its delay (:meth:`_retry_delay`)."""
        delay = self._retry_delay(failure, retries)
        log.warning("LLM request failed (%s); retry %d/%d in %.2f s", failure.reason, retries + 1,
                    self.endpoint.max_retries, delay)
        with self._counters.lock:
            self._counters.retries += 1
        if self._sleep is not None:
            self._sleep(delay)
        else:
            await asyncio.sleep(delay)

    def cut_by_context(self, finish_reason: str | None, completion_tokens: int) -> bool:
        """Whether an answer was cut because the context was full: finish reason ``length``
        before ``max_tokens`` answer tokens (any ``length`` when ``max_tokens`` is not set)."""
        limit = self.endpoint.max_tokens
        return finish_reason == "length" and (limit is None or completion_tokens < limit)

    def serves(self, cached: Mapping[str, Any]) -> bool:
        """Whether the ``cached`` answer (an entry's ``response``) may be served: yes, unless it
        was cut because the context was full (:meth:`cut_by_context`) and this client knows its
        window (``context_tokens``). Then only when it was cut under the same window: the
        ``n_ctx`` the entry records, or, for an entry written without one, a prompt and answer
        that together filled this window (within :data:`WINDOW_SLACK` tokens). A cut answer
        of a smaller window is asked again once the window is larger."""
        completion_tokens = cached.get("completion_tokens", 0)
        if self.context_tokens is None or not self.cut_by_context(cached.get("finish_reason"), completion_tokens):
            return True
        if "n_ctx" in cached:
            return cached["n_ctx"] == self.context_tokens
        filled = cached.get("prompt_tokens", 0) + completion_tokens
        return abs(filled - self.context_tokens) <= WINDOW_SLACK

    # -- internals ----------------------------------------------------------------------------
    def _body(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        """The JSON body of a request (see ``aspera_body``)."""
        if self.aspera_body:
            e = self.endpoint
            return {"messages": messages, "model": e.model, "max_tokens": e.max_tokens, "n": 1, "seed": e.seed,
                    "stop": None, "temperature": e.temperature}
        body: dict[str, Any] = {"model": self.endpoint.model, "messages": messages}
        body.update((name, value) for name, value in self.params.items() if value is not None)
        return body

    def _count(self, completion: Completion, cache_hit: bool) -> None:
        with self._counters.lock:
            c = self._counters
            c.cache_hits += int(cache_hit)
            c.truncated += int(completion.finish_reason == "length")
            c.prompt_tokens += completion.prompt_tokens
            c.prompt_tokens_cached += completion.prompt_tokens_cached
            c.completion_tokens += completion.completion_tokens
            c.seconds += completion.seconds
            c.server_seconds += completion.server_seconds

    def _resolve_api_key(self) -> str:
        if self.endpoint.api_key:
            return self.endpoint.api_key
        value = os.environ.get(self.endpoint.api_key_env) if self.endpoint.api_key_env else None
        if value:
            return value
        if self.base_url:
            return "unused"
        raise LLMFatalError(
            f"no API key: set the environment variable {self.endpoint.api_key_env} (or `api_key_env` to the "
            "variable that holds it), or point `base_url` / OPENAI_BASE_URL at a server that needs none"
        )

    def _openai(self) -> Any:
        with self._client_lock:
            if self._client is None:
                import openai  # heavy: imported on first use only

                if self._connect is not None:
                    self.base_url = self._connect()

                self._client = openai.AsyncOpenAI(
                    api_key=self._resolve_api_key(),
                    base_url=self.base_url,
                    timeout=self.endpoint.timeout_s,
                    max_retries=0,
                )
            return self._client

    def _fail(self, message: str) -> NoReturn:
        with self._counters.lock:
            self._counters.errors += 1
        raise LLMError(message)

    def _fail_fatal(self, exc: LLMFatalError) -> NoReturn:
        with self._counters.lock:
            self._counters.errors += 1
            if self._fatal is None:
                self._fatal = exc
        raise exc

    def _cache_path(self, key: str) -> Path:
        return answer_path(key)

    def _cache_read(self, key: str) -> dict[str, Any] | None:
        path = self._cache_path(key)
        try:
            with open(path, encoding="utf-8") as fh:
                entry = json.load(fh)
            response = entry["response"]
            return response if isinstance(response, dict) else None
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _cache_write(self, key: str, messages: list[dict[str, str]], completion: Completion) -> None:
        path = self._cache_path(key)
        entry = {
            "key": key,
            "request": {"model": self.endpoint.model, "messages": messages, "params": self.params},
            "response": {
                "text": completion.text,
                "finish_reason": completion.finish_reason,
                "prompt_tokens": completion.prompt_tokens,
                "completion_tokens": completion.completion_tokens,
                "prompt_tokens_cached": completion.prompt_tokens_cached,
                "server_seconds": completion.server_seconds,
                "seconds": completion.seconds,
            },
        }
        if self.context_tokens is not None and self.cut_by_context(completion.finish_reason,
                                                                    completion.completion_tokens):
            entry["response"]["n_ctx"] = self.context_tokens  # served only under the same window
        try:
            # ASCII escapes: any str (lone surrogates too) round-trips
            write_atomic(path, json.dumps(entry), durable=False)
        except OSError as exc:
            log.warning("could not write the LLM cache entry %s: %s", path, exc)


class RequestProgress:
    """Counts the answers of one :meth:`ChatClient.complete_many` on its :func:`activity` bar and
    shows the rate of generation: the completion tokens of the answers the endpoint computed (not
    those from the cache) per second since the batch began."""

    def __init__(self, bar: Any) -> None:
        self.bar = bar
        self.start = time.perf_counter()
        self.tokens = 0

    def answered(self, answer: Completion | LLMError) -> None:
        """Count one answer (or error)."""
        computed = isinstance(answer, Completion) and not answer.cached
        if computed:
            self.tokens += answer.completion_tokens
        seconds = time.perf_counter() - self.start
        if self.tokens and seconds > 0:
            self.bar.set_postfix_str(f"{self.tokens / seconds:.1f} tok/s", refresh=False)
        self.bar.update(1)


def prefix_order(prompts: Sequence[Sequence[Mapping[str, str]]]) -> list[int]:
    """The order to send ``prompts`` in so that consecutive prompts share long prefixes: the
    indices sorted by the prompt's text (roles and contents joined), ties by index.

    A server with a prompt cache (llama.cpp keeps the last prompt of its slot) then computes
    only what follows the part a prompt shares with the one before. Sorting strings puts any two
    with the longest common prefix next to each other, so the sum of shared prefixes between
    neighbours is as large as any order can make it.

    Returns
    -------
    A permutation of ``range(len(prompts))``.
    """
    def text(i: int) -> str:
        return "\x00".join(f"{m['role']}\x01{m['content']}" for m in prompts[i])

    return sorted(range(len(prompts)), key=lambda i: (text(i), i))


def _clean(messages: Messages) -> list[dict[str, str]]:
    """``messages`` as plain dicts of strings, each text sendable as UTF-8 (see :func:`_utf8`)."""
    return [{"role": str(m["role"]), "content": encodable_text(str(m["content"]))} for m in messages]
