"""The settings of an OpenAI-compatible chat endpoint, shared by every component that talks to one.

:class:`Endpoint` holds them (model, URL, key, timeout, retries, sampling parameters,
concurrency, backoff, cache namespace) and checks them once. The components that own an
endpoint (:class:`primsel.llm.client.ChatClient`, the ``openai`` generator, the
``llm_selector`` retriever) take these settings as keyword parameters, declared once here by
:func:`takes_endpoint`: a configuration table gives them flat (``model = "gpt-4o"``,
``timeout_s = 30``), and ``inspect.signature`` of each owner lists them, so configuration
checks and ``get_params`` round trips see them.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from primsel.checks import check_number

T = TypeVar("T", bound=type)


@dataclass(frozen=True)
class Endpoint:
    """Where and how chat requests are sent.

    Parameters
    ----------
    model : model name at the endpoint (required).
    base_url : endpoint URL ending in ``/v1``; None: ``$OPENAI_BASE_URL``, else OpenAI's.
    api_key_env : environment variable holding the key (default ``OPENAI_API_KEY``).
    api_key : the key itself (overrides ``api_key_env``; keep keys out of configuration
        files). Never part of :meth:`params`.
    timeout_s : the total deadline of one attempt in seconds (connecting, sending and receiving
        the whole answer), finite and > 0.
    max_retries : retries after the first attempt on the transient statuses of
        :data:`primsel.llm.client.RETRY_STATUSES` (408, 409, 429, 500, 502-504, 520-524, 529),
        timeouts, connection errors and malformed answers, >= 0.
    temperature, seed, max_tokens : sampling parameters (None: not sent); part of the
        answer-cache key. temperature finite and >= 0, seed a 64-bit integer, max_tokens >= 1.
    concurrency : most requests in flight at once, >= 1.
    backoff_s : first retry wait in seconds when the endpoint gives no ``Retry-After``
        (doubles per retry, times a random factor in [0.8, 1.0]; see
        :attr:`primsel.llm.client.ChatClient.max_request_seconds`), >= 0.
    cache_namespace : label added to the answer-cache key (e.g. the endpoint's name), keeping
        apart the answers of endpoints that serve the same model name; None: model, messages
        and sampling parameters only.

    Raises
    ------
    ValueError : no model, a number out of range, or a namespace that is not a string.
    """

    model: str | None = None
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 60.0
    max_retries: int = 3
    temperature: float | None = 0.0
    seed: int | None = None
    max_tokens: int | None = None
    concurrency: int = 8
    backoff_s: float = 1.0
    cache_namespace: str | None = None

    def __post_init__(self) -> None:
        if not self.model or not isinstance(self.model, str):
            raise ValueError("`model` is required: the model name at your endpoint "
                             "(e.g. generator.model = \"gpt-4o\")")
        check_number("timeout_s", self.timeout_s, above=0)
        check_number("max_retries", self.max_retries, minimum=0, integer=True)
        check_number("concurrency", self.concurrency, minimum=1, integer=True)
        check_number("backoff_s", self.backoff_s, minimum=0)
        # the sampling parameters are sent with every request: a bad one would fail every request
        if self.temperature is not None:
            check_number("temperature", self.temperature, minimum=0)
        if self.seed is not None:
            check_number("seed", self.seed, minimum=-(2**63), maximum=2**63 - 1, integer=True)
        if self.max_tokens is not None:
            check_number("max_tokens", self.max_tokens, minimum=1, integer=True)
        if self.cache_namespace is not None and not isinstance(self.cache_namespace, str):
            raise ValueError(f"cache_namespace must be a string, got {self.cache_namespace!r}")

    def params(self) -> dict[str, Any]:
        """The settings as constructor parameters, without ``api_key`` (JSON-serialisable)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "api_key"}


def _signature_with_endpoint(init: Callable[..., None]) -> inspect.Signature:
    own = [p for p in inspect.signature(init).parameters.values() if p.kind is not p.VAR_KEYWORD]
    hints = typing.get_type_hints(Endpoint)
    extra = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=hints[f.name])
             for f in dataclasses.fields(Endpoint)]
    return inspect.signature(init).replace(parameters=own + extra)


def takes_endpoint(cls: T) -> T:
    """Class decorator: the constructor ``__init__(self, <own parameters>, **endpoint)`` receives
    the :class:`Endpoint` fields in ``endpoint``, and its signature lists them as keyword-only
    parameters after its own (so ``inspect.signature(cls)`` and
    :func:`primsel.registry.build` see every parameter)."""
    cls.__init__.__signature__ = _signature_with_endpoint(cls.__init__)  # type: ignore[misc]
    return cls
