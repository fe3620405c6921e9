"""A chat-completions client over the ``openai`` package: cache, retries, bounded concurrency.

:class:`ChatClient` sends ``messages`` to any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama,
llama.cpp server, ...) and returns a :class:`Completion`. It

* always uses a finite timeout (``timeout_s``);
* retries 408, 409, 429, 5xx answers, timeouts and connection errors up to ``max_retries`` times
  with exponential backoff (``backoff_s * 2**attempt``, capped at ``max_backoff_s``), waiting
  instead as long as a ``Retry-After`` header says (seconds or an HTTP date; ``retry-after-ms``
  too), capped at ``max_retry_after_s``;
* stops the run on errors that every further request would repeat: a 429 whose error code or
  type is ``insufficient_quota`` (:class:`QuotaExceededError`, raised after that one request,
  without retries), 401, 403 and 404 (:class:`LLMFatalError`), and a request whose every
  attempt failed to connect (:class:`EndpointUnreachableError`: nothing listens at the URL, the
  host is unknown, ...; a timeout is not a connection failure). After a fatal error the client
  refuses every later call without sending it;
* bounds the requests in flight to ``concurrency`` across all threads (the client is
  thread-safe; :meth:`ChatClient.complete_many` runs a thread pool of that size);
* caches completions on disk under ``llm/`` of the cache directory
  (:func:`primsel.files.cache_dir`: ``$PRIMSEL_CACHE_DIR``, default ``~/.cache/primsel``),
  one JSON file per request, keyed by the sha256 of the canonical JSON of
  ``{"model", "messages", "params": {"temperature", "seed", "max_tokens"}}``, plus
  ``"namespace"`` when ``cache_namespace`` is set. The endpoint URL is not part of the key: two
  endpoints serving the same model name share answers, unless they are given different
  ``cache_namespace`` values.
  A cached request sends nothing; files are written atomically (:func:`primsel.files.write_atomic`),
  so a run killed midway leaves only complete entries. Errors are never cached; truncated
  completions (``finish_reason == "length"``) are, since the same request truncates again.

The ``openai`` package is imported on the first request, never at import time.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import random
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from primsel.checks import check_number
from primsel.files import cache_dir, digest, write_atomic
from primsel.llm.endpoint import Endpoint, takes_endpoint

__all__ = [
    "ChatClient",
    "Completion",
    "EndpointUnreachableError",
    "LLMError",
    "LLMFatalError",
    "QuotaExceededError",
    "cache_key",
    "parse_retry_after",
]

log = logging.getLogger(__name__)

#: HTTP statuses retried with backoff (besides timeouts and connection errors).
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
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
    """

    text: str
    finish_reason: str | None = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cached: bool = False
    retries: int = 0

    def usage(self) -> dict[str, float]:
        """``prompt_tokens``, ``completion_tokens``, ``seconds``, ``cached`` (0/1), ``calls`` (1)."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
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
    completion_tokens: int = 0
    seconds: float = 0.0
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
                "completion_tokens": self.completion_tokens,
                "seconds": round(self.seconds, 6),
            }


@takes_endpoint
class ChatClient:
    """Thread-safe chat-completions client with cache, retries and a concurrency bound.

    Parameters
    ----------
    cache : read and write the on-disk cache.
    max_backoff_s : cap of one backoff wait in seconds, >= 0.
    max_retry_after_s : cap of one ``Retry-After`` wait in seconds, >= 0.
    **endpoint : the :class:`primsel.llm.endpoint.Endpoint` settings (``model``, ``base_url``,
        ``api_key_env``, ``api_key``, ``timeout_s``, ``max_retries``, ``temperature``,
        ``seed``, ``max_tokens``, ``concurrency``, ``backoff_s``, ``cache_namespace``). Without
        a key a custom ``base_url`` gets the placeholder ``"unused"`` (local servers ignore
        it); OpenAI's own endpoint needs one.

    Raises
    ------
    ValueError : empty model, an out-of-range numeric setting or a non-string namespace.
    """

    def __init__(self, cache: bool = True, max_backoff_s: float = 60.0, max_retry_after_s: float = 300.0,
                 **endpoint: Any) -> None:
        self.endpoint = Endpoint(**endpoint)
        check_number("max_backoff_s", max_backoff_s, minimum=0)
        check_number("max_retry_after_s", max_retry_after_s, minimum=0)
        #: the URL requests go to: ``base_url``, else ``$OPENAI_BASE_URL``, else None (OpenAI's)
        self.base_url = self.endpoint.base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.cache = cache
        self.max_backoff_s = float(max_backoff_s)
        self.max_retry_after_s = float(max_retry_after_s)
        self._slots = threading.BoundedSemaphore(self.endpoint.concurrency)
        self._counters = _Counters()
        self._client: Any = None
        self._client_lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self._key_locks_lock = threading.Lock()
        self._fatal: LLMFatalError | None = None
        self._sleep = time.sleep  # replaceable in tests to observe waits
        self._jitter = random.Random()  # private: never disturbs the global random state

    # -- public -------------------------------------------------------------------------------
    @property
    def params(self) -> dict[str, Any]:
        """The sampling parameters of every request (the ``params`` part of the cache key)."""
        e = self.endpoint
        return {"temperature": e.temperature, "seed": e.seed, "max_tokens": e.max_tokens}

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
        """
        messages = [{"role": str(m["role"]), "content": _utf8(str(m["content"]))} for m in messages]
        start = time.perf_counter()
        with self._counters.lock:
            self._counters.calls += 1
        key = cache_key(self.endpoint.model, messages, self.params, self.endpoint.cache_namespace)
        with self._lock_for(key):
            if self.cache:
                hit = self._cache_read(key)
                if hit is not None:
                    seconds = time.perf_counter() - start
                    completion = Completion(
                        text=hit.get("text", ""),
                        finish_reason=hit.get("finish_reason"),
                        prompt_tokens=int(hit.get("prompt_tokens", 0)),
                        completion_tokens=int(hit.get("completion_tokens", 0)),
                        seconds=seconds,
                        cached=True,
                    )
                    self._count(completion, cache_hit=True)
                    return completion
            completion = self._request_with_retries(messages, start)
            if self.cache:
                self._cache_write(key, messages, completion)
        self._count(completion, cache_hit=False)
        return completion

    def complete_many(self, requests: Sequence[Messages]) -> list[Completion | LLMError]:
        """Answer many chat requests with at most ``concurrency`` in flight.

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
            request hits it; requests not yet started are cancelled.
        """
        if not requests:
            return []
        results: list[Completion | LLMError | None] = [None] * len(requests)

        def run(i: int) -> None:
            try:
                results[i] = self.complete(requests[i])
            except LLMError as exc:
                results[i] = exc

        pool = ThreadPoolExecutor(max_workers=min(self.endpoint.concurrency, len(requests)),
                                  thread_name_prefix="primsel-llm")
        try:
            futures = [pool.submit(run, i) for i in range(len(requests))]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for future in done:
                exc = future.exception()
                if exc is not None:
                    raise exc
        except BaseException:
            # a fatal answer or an interrupt: drop the queued requests, do not wait for the others
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return [r if r is not None else LLMError("request was not run") for r in results]

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

    # -- internals ----------------------------------------------------------------------------
    def _lock_for(self, key: str) -> threading.Lock:
        with self._key_locks_lock:
            lock = self._key_locks.get(key)
            if lock is None:
                lock = self._key_locks[key] = threading.Lock()
            return lock

    def _count(self, completion: Completion, cache_hit: bool) -> None:
        with self._counters.lock:
            c = self._counters
            c.cache_hits += int(cache_hit)
            c.truncated += int(completion.finish_reason == "length")
            c.prompt_tokens += completion.prompt_tokens
            c.completion_tokens += completion.completion_tokens
            c.seconds += completion.seconds

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

                self._client = openai.OpenAI(
                    api_key=self._resolve_api_key(),
                    base_url=self.base_url,
                    timeout=self.endpoint.timeout_s,
                    max_retries=0,
                )
            return self._client

    def _request_with_retries(self, messages: list[dict[str, str]], start: float) -> Completion:
        import openai

        client = self._openai()
        body: dict[str, Any] = {"model": self.endpoint.model, "messages": messages}
        body.update((name, value) for name, value in self.params.items() if value is not None)
        retries = 0
        connection_failures = 0
        while True:
            if self._fatal is not None:
                raise self._fatal
            retry_after: float | None = None
            try:
                with self._slots:
                    with self._counters.lock:
                        self._counters.requests += 1
                    # the SDK's documented custom-request call: the body is sent as built here and
                    # the JSON answer comes back as plain data, skipping the per-request parameter
                    # transformation and response models of chat.completions.create
                    response = client.post(
                        "/chat/completions", cast_to=object, body=body, options={"timeout": self.endpoint.timeout_s}
                    )
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
                if status not in RETRY_STATUSES:
                    self._fail(f"rejected with HTTP {status}: {_short(exc)}")
                reason = f"HTTP {status}"
                retry_after = parse_retry_after(getattr(exc.response, "headers", None))
            except openai.APITimeoutError:
                reason = f"timeout after {self.endpoint.timeout_s:g} s"
            except openai.APIConnectionError as exc:  # after APITimeoutError, its subclass
                reason = f"connection error: {_cause(exc)}"
                connection_failures += 1
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
            self._sleep(delay)

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
                "seconds": completion.seconds,
            },
        }
        try:
            # ASCII escapes: any str (lone surrogates too) round-trips
            write_atomic(path, json.dumps(entry), durable=False)
        except OSError as exc:
            log.warning("could not write the LLM cache entry %s: %s", path, exc)


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
    text = (message.get("content") if isinstance(message, Mapping) else None) or ""
    usage = response.get("usage")
    usage = usage if isinstance(usage, Mapping) else {}
    return Completion(
        text=text,
        finish_reason=choice.get("finish_reason"),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        seconds=seconds,
        cached=False,
        retries=retries,
    )
