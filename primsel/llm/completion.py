"""What a chat request gives back: the answer, the errors, and how a response body is read.

:class:`Completion` is one answer with its token counts; :class:`LLMError` and its subclasses
are the per-request failures a run records, :class:`LLMFatalError` and its subclasses those
that stop the run. The functions read the JSON of a chat-completions response
(:func:`read_completion`), classify an error (:func:`is_context_error`,
:func:`is_quota_error`) and word what went wrong; :mod:`primsel.llm.client` sends the requests.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from primsel.files import digest, encodable_text

__all__ = [
    "CONTEXT_PHRASES",
    "CONTEXT_STATUSES",
    "FATAL_STATUSES",
    "RETRY_STATUSES",
    "Completion",
    "EndpointUnreachableError",
    "LLMError",
    "LLMFatalError",
    "Messages",
    "PromptTooLongError",
    "QuotaExceededError",
    "cache_key",
    "content_text",
    "encodable_text",
    "error_with_cause",
    "is_context_error",
    "is_quota_error",
    "malformed_body",
    "parse_retry_after",
    "preview",
    "read_completion",
    "short_error",
]

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
    (HTTP 400 or 500 saying so, :func:`is_context_error`). Not retried: the same prompt fails
    again."""


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
    key : the request's answer-cache key (:func:`cache_key`: the sha256 of the model, the
        messages and the sampling parameters), the prompt's digest that exported answers are
        filed under; "" when not known.
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
    key: str = ""

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


#: HTTP statuses a refusal of a prompt longer than the context comes with: 400, and 500 from
#: llama.cpp ("Context size has been exceeded.") and xinference.
CONTEXT_STATUSES = frozenset({400, 500})
#: What servers say of a prompt longer than the context (lower case): llama.cpp's
#: ``exceed_context_size_error``, "exceeds the available context" and "Context size has been
#: exceeded.", OpenAI's ``context_length_exceeded``, vLLM's "maximum context length" and (V1,
#: and xinference that serves it) "... is longer than the maximum model length".
CONTEXT_PHRASES = ("exceed_context_size", "context_length_exceeded", "maximum context length",
                   "exceeds the available context", "context size has been exceeded",
                   "longer than the maximum model length")


def is_context_error(exc: Any) -> bool:
    """An error whose code, type, text or body says the prompt exceeds the model's context (one
    of :data:`CONTEXT_PHRASES`); the client treats it so when its status is one of
    :data:`CONTEXT_STATUSES`."""
    text = f"{getattr(exc, 'code', '')} {getattr(exc, 'type', '')} {exc} {getattr(exc, 'body', '')}".lower()
    return any(phrase in text for phrase in CONTEXT_PHRASES)


def is_quota_error(exc: Any) -> bool:
    """A refusal that says the account's quota is spent (code or type ``insufficient_quota``, at
    the top of the error or in its body): every later request would be refused too."""
    if getattr(exc, "code", None) == "insufficient_quota" or getattr(exc, "type", None) == "insufficient_quota":
        return True
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            return "insufficient_quota" in (inner.get("code"), inner.get("type"))
    return False


def error_with_cause(exc: BaseException) -> str:
    """The exception's text, followed by that of its innermost cause (the SDK's "Connection
    error." says nothing about refused connections or unknown hosts)."""
    inner = exc
    while inner.__cause__ is not None and inner.__cause__ is not inner:
        inner = inner.__cause__
    text = str(exc)
    return text if inner is exc or not str(inner) else f"{text} ({short_error(inner, 200)})"


def short_error(exc: BaseException, limit: int = 300) -> str:
    """The exception's text, cut to ``limit`` characters (then ``...`` appended)."""
    text = str(exc)
    return text if len(text) <= limit else text[:limit] + "..."


def read_completion(response: Any, seconds: float, retries: int) -> Completion | None:
    """The first choice of a chat-completions answer (JSON data), or None if it has none."""
    choices = response.get("choices") if isinstance(response, Mapping) else None
    if not choices or not isinstance(choices[0], Mapping):
        return None
    choice = choices[0]
    message = choice.get("message")
    text = content_text(message.get("content") if isinstance(message, Mapping) else None)
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


def content_text(content: Any) -> str:
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


def malformed_body(exc: json.JSONDecodeError | UnicodeDecodeError) -> str:
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
    return short_error(exc)


def preview(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters (then ``...`` appended), for messages."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
