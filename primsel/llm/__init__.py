"""Talking to LLM endpoints: the endpoint settings, the chat client (cache, retries, bounded
concurrency) and the prompt templates. Shared by the ``openai`` generator
(:mod:`primsel.generation`) and the ``llm_selector`` retriever (:mod:`primsel.retrieval`); the
``openai`` package itself is imported only when the first request is sent."""

from primsel.llm.client import (
    ChatClient,
    Completion,
    EndpointUnreachableError,
    LLMError,
    LLMFatalError,
    QuotaExceededError,
)
from primsel.llm.endpoint import Endpoint, takes_endpoint
from primsel.llm.templates import PromptTemplate, load_template, packaged_templates

__all__ = [
    "ChatClient",
    "Completion",
    "Endpoint",
    "EndpointUnreachableError",
    "LLMError",
    "LLMFatalError",
    "PromptTemplate",
    "QuotaExceededError",
    "load_template",
    "packaged_templates",
    "takes_endpoint",
]
