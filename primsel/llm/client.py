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
  the same request truncates again. Inside :func:`primsel.files.caches_disabled` (``primsel
  run --no-cache``) the cache is neither read nor written.

Requests are sent by ``openai.AsyncOpenAI`` on one asyncio event loop, in a daemon thread shared
by every client of the process; :meth:`ChatClient.complete` and
:meth:`ChatClient.complete_many` block the calling thread until their answers are in. Deadlines
and interrupts cancel the request's task, which closes its connection. The ``openai`` package is
imported on the first request, never at import time.
"""

from __future__ import annotations

import asyncio
import email.utils
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
from primsel.files import cache_dir, caches_enabled, digest, write_atomic
from primsel.llm.endpoint import Endpoint, takes_endpoint

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

#: HTTP statuses retried with backoff (besides timeouts, connection errors and malformed answers):
#: 408 Request Timeout, 409 Conflict, 429 Too Many Requests, 500 Internal Server Error, 502 Bad
#: Gateway, 503 Service Unavailable, 504 Gateway Timeout, the proxy codes 520-524 (unknown
#: error, web server down, connection timed out, origin unreachable, timeout: Cloudflare and
#: others) and 529 (overloaded). Other statuses are not retried.
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529})
#: HTTP statuses that stop the run: every later request would fail the same way.
FATAL_STATUSES = frozenset({401, 403, 404})

Messages = Sequence[Mapping[str, str]]


class LLMError(Exception):
    """One request failed for good (retries exhausted or a non-retryable answer).

    The task it served gets the status ``llm_error``; the run goes on.
    """


class LLMFatalError(RuntimeError):
    """An error that every further request would repeat (bad key, unknown model, no quota).

    Raised out of generators and selectors so that a run stops instead of recording hundreds of
    identical failures.
    """


class PromptTooLongError(LLMError):
    """The endpoint refused the request because the prompt does not fit the model's context
    (HTTP 400 naming the context size). Not retried: the same prompt fails again."""


class QuotaExceededError(LLMFatalError):
    """The endpoint answered 429 with code ``insufficient_quota``: the account has no credit."""


class EndpointUnreachableError(LLMFatalError):
    """Every attempt of a request failed to connect (retries included): nothing answers at the
    endpoint URL (server down, wrong host or port)."""


@dataclass(frozen=True)
class Completion:
    """The answer to one chat request.

    Parameters
    ----------
    text : the assistant message ("" when the endpoint sent no text).
    finish_reason : ``"stop"``, ``"length"`` (cut by ``max_tokens``), ... or None.
    prompt_tokens, completion_tokens : token counts reported by the endpoint (0 if not reported).
    seconds : wall time of the call, retries and waits included (about 0 for a cache hit).
    cached : the answer came from the on-disk cache; no request was sent.
    retries : requests repeated after a retryable failure.
    prompt_tokens_cached : prompt tokens the server did not compute because its prompt cache
        held them (``usage.prompt_tokens_details.cached_tokens``; 0 if not reported).
    server_seconds : the server's own time for the answer (llama.cpp's ``timings``: prompt
        and generation, in seconds; 0 if not reported).
    """

    text: str
    finish_reason: str | None = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cached: bool = False
    retries: int = 0
    prompt_tokens_cached: int = 0
    server_seconds: float = 0.0

    def usage(self) -> dict[str, float]:
        """``prompt_tokens``, ``prompt_tokens_cached``, ``completion_tokens``, ``seconds``,
        ``server_seconds``, ``cached`` (0/1), ``calls`` (1), ``retries``."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "prompt_tokens_cached": self.prompt_tokens_cached,
            "completion_tokens": self.completion_tokens,
            "server_seconds": self.server_seconds,
            "seconds": self.seconds,
            "cached": int(self.cached),
            "calls": 1,
            "retries": self.retries,
        }


def cache_key(model: str, messages: Messages, params: Mapping[str, Any], namespace: str | None = None) -> str:
    """sha256 (hex) of the canonical JSON of ``{"model", "messages", "params"}``, with
    ``"namespace"`` added when ``namespace`` is given (None keeps the key of earlier versions);
    see :func:`primsel.files.digest`.
    """
    payload: dict[str, Any] = {"model": model, "messages": [dict(m) for m in messages], "params": dict(params)}
    if namespace is not None:
        payload["namespace"] = namespace
    return digest(payload)


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds to wait according to ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date).

    Parameters
    ----------
    headers : response headers (case-insensitive mapping, or a dict with any key case).
    now : current POSIX time for HTTP dates (default: ``time.time()``).

    Returns
    -------
    Non-negative seconds, or None when no usable header is present.
    """
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    value = lowered.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


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
                 connect: Callable[[], str] | None = None, prefix_ordered: bool = False, **endpoint: Any) -> None:
        self.endpoint = Endpoint(**endpoint)
        check_number("max_backoff_s", max_backoff_s, minimum=0)
        check_number("max_retry_after_s", max_retry_after_s, minimum=0)
        #: the URL requests go to: ``base_url``, else ``$OPENAI_BASE_URL``, else None (OpenAI's)
        self.base_url = self.endpoint.base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.cache = cache
        self._connect = connect
        self.prefix_ordered = prefix_ordered
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
        if not self.prefix_ordered:
            return _run(self._answer_many(cleaned))
        order = prefix_order(cleaned)
        answers = _run(self._answer_many([cleaned[i] for i in order]))
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
            return await self._answer(messages)
        except LLMError as exc:
            return exc

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
            if hit is not None:
                completion = Completion(
                    text=hit.get("text", ""),
                    finish_reason=hit.get("finish_reason"),
                    prompt_tokens=int(hit.get("prompt_tokens", 0)),
                    completion_tokens=int(hit.get("completion_tokens", 0)),
                    prompt_tokens_cached=int(hit.get("prompt_tokens_cached", 0)),
                    seconds=time.perf_counter() - start,
                    cached=True,
                )
                self._count(completion, cache_hit=True)
                return completion
            completion = await self._send(messages, start)
            if cache:
                # written by a worker thread: on the loop, the file system calls of every answer
                # would queue behind each other (and before the next requests' sends)
                await asyncio.to_thread(self._cache_write, key, messages, completion)
        self._count(completion, cache_hit=False)
        return completion

    async def _send(self, messages: list[dict[str, str]], start: float) -> Completion:
        import openai

        client = self._openai()
        body: dict[str, Any] = {"model": self.endpoint.model, "messages": messages}
        body.update((name, value) for name, value in self.params.items() if value is not None)
        timeout = self.endpoint.timeout_s
        retries = 0
        connection_failures = 0
        while True:
            retry_after: float | None = None
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
                    reason = f"timeout: no complete answer within the deadline of {timeout:g} s"
                except openai.APIStatusError as exc:
                    status = exc.status_code
                    if status == 429 and _is_quota_error(exc):
                        self._fail_fatal(QuotaExceededError(
                            f"the endpoint reports insufficient quota (429 insufficient_quota) for model "
                            f"{self.endpoint.model!r}: add credit or use another key; stopping the run"
                        ))
                    if status in FATAL_STATUSES:
                        self._fail_fatal(LLMFatalError(
                            f"the endpoint answered {status} for model {self.endpoint.model!r} at "
                            f"{self.base_url or 'the OpenAI default URL'}: {_short(exc)}; stopping the run"
                        ))
                    if status == 400 and _is_context_error(exc):
                        with self._counters.lock:
                            self._counters.errors += 1
                        raise PromptTooLongError(f"the prompt is longer than the model's context: {_short(exc)}")
                    if status not in RETRY_STATUSES:
                        self._fail(f"rejected with HTTP {status}: {_short(exc)}")
                    reason = f"HTTP {status}"
                    retry_after = parse_retry_after(getattr(exc.response, "headers", None))
                except openai.APITimeoutError:
                    reason = f"timeout after {timeout:g} s"
                except openai.APIConnectionError as exc:  # after APITimeoutError, its subclass
                    reason = f"connection error: {_cause(exc)}"
                    connection_failures += 1
                except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # a 200 with a broken body
                    reason = f"malformed answer: {_malformed(exc)}"
                else:
                    if not isinstance(response, Mapping):
                        reason = f"malformed answer: the body is not a JSON object ({_preview(response)})"
                    else:
                        completion = _completion(response, time.perf_counter() - start, retries)
                        if completion is None:
                            self._fail("the endpoint answered without choices")
                        return completion
            if retries >= self.endpoint.max_retries:
                if connection_failures == retries + 1:
                    self._fail_fatal(EndpointUnreachableError(
                        f"cannot connect to the LLM endpoint at {self.url} ({retries + 1} attempts; last: "
                        f"{reason}): is the server running, and is base_url / OPENAI_BASE_URL right?"
                    ))
                self._fail(f"gave up after {retries + 1} attempts; last: {reason}")
            if retry_after is not None:
                delay = min(retry_after, self.max_retry_after_s)
            else:
                delay = min(self.endpoint.backoff_s * (2**retries), self.max_backoff_s) * self._jitter.uniform(0.8, 1.0)
            log.warning("LLM request failed (%s); retry %d/%d in %.2f s", reason, retries + 1,
                        self.endpoint.max_retries, delay)
            retries += 1
            with self._counters.lock:
                self._counters.retries += 1
            if self._sleep is not None:
                self._sleep(delay)
            else:
                await asyncio.sleep(delay)

    # -- internals ----------------------------------------------------------------------------
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
        return cache_dir() / "llm" / key[:2] / f"{key}.json"

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
        try:
            # ASCII escapes: any str (lone surrogates too) round-trips
            write_atomic(path, json.dumps(entry), durable=False)
        except OSError as exc:
            log.warning("could not write the LLM cache entry %s: %s", path, exc)


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
    return [{"role": str(m["role"]), "content": _utf8(str(m["content"]))} for m in messages]


def _is_context_error(exc: Any) -> bool:
    """An HTTP 400 that says the prompt exceeds the context (llama.cpp's
    ``exceed_context_size_error``, OpenAI's ``context_length_exceeded``, vLLM's "maximum context
    length")."""
    text = f"{getattr(exc, 'code', '')} {getattr(exc, 'type', '')} {exc} {getattr(exc, 'body', '')}".lower()
    return any(s in text for s in ("exceed_context_size", "context_length_exceeded", "maximum context length",
                                   "exceeds the available context"))


def _is_quota_error(exc: Any) -> bool:
    if getattr(exc, "code", None) == "insufficient_quota" or getattr(exc, "type", None) == "insufficient_quota":
        return True
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            return "insufficient_quota" in (inner.get("code"), inner.get("type"))
    return False


def _utf8(text: str) -> str:
    """``text``, with each lone surrogate (which UTF-8 cannot encode, so no request can carry it)
    replaced by the text of its ``\\udXXXX`` escape."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="backslashreplace").decode("utf-8")
    return text


def _cause(exc: BaseException) -> str:
    """The exception's text, followed by that of its innermost cause (the SDK's "Connection
    error." says nothing about refused connections or unknown hosts)."""
    inner = exc
    while inner.__cause__ is not None and inner.__cause__ is not inner:
        inner = inner.__cause__
    text = str(exc)
    return text if inner is exc or not str(inner) else f"{text} ({_short(inner, 200)})"


def _short(exc: BaseException, limit: int = 300) -> str:
    text = str(exc)
    return text if len(text) <= limit else text[:limit] + "..."


def _completion(response: Any, seconds: float, retries: int) -> Completion | None:
    """The first choice of a chat-completions answer (JSON data), or None if it has none."""
    choices = response.get("choices") if isinstance(response, Mapping) else None
    if not choices or not isinstance(choices[0], Mapping):
        return None
    choice = choices[0]
    message = choice.get("message")
    text = _text(message.get("content") if isinstance(message, Mapping) else None)
    usage = response.get("usage")
    usage = usage if isinstance(usage, Mapping) else {}
    details = usage.get("prompt_tokens_details")
    cached_tokens = details.get("cached_tokens") if isinstance(details, Mapping) else None
    timings = response.get("timings")
    server_ms = 0.0
    if isinstance(timings, Mapping):
        server_ms = sum(float(timings.get(k) or 0.0) for k in ("prompt_ms", "predicted_ms"))
    return Completion(
        text=text,
        finish_reason=choice.get("finish_reason"),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        seconds=seconds,
        cached=False,
        retries=retries,
        prompt_tokens_cached=int(cached_tokens or 0),
        server_seconds=server_ms / 1000.0,
    )


def _text(content: Any) -> str:
    """The text of a message ``content``: a string as it is; a list of parts (``[{"type":
    "text", "text": "..."}, ...]`` or strings) joined without separator, parts without text
    (images, refusals) skipped; None and anything else -> ""."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return ""


def _malformed(exc: json.JSONDecodeError | UnicodeDecodeError) -> str:
    """What is wrong with a body that did not decode: empty, white space, cut or bad JSON, not
    UTF-8."""
    if isinstance(exc, UnicodeDecodeError):
        byte = exc.object[exc.start:exc.start + 1].hex()
        return f"the body is not UTF-8 (byte 0x{byte} at offset {exc.start})"
    if isinstance(exc, json.JSONDecodeError):
        if not exc.doc.strip():
            return "the body is empty" if not exc.doc else "the body is only white space"
        if exc.pos >= len(exc.doc.rstrip()) or exc.msg.startswith("Unterminated string"):
            return f"the JSON body is cut off after {len(exc.doc)} characters"
        return f"the body is not valid JSON: {exc.msg}: line {exc.lineno} column {exc.colno}"
    return _short(exc)


def _preview(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
