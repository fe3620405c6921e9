"""One set of endpoint settings for every component that talks to an LLM."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from primsel.generation.generators import OpenAIGenerator
from primsel.llm.client import ChatClient
from primsel.llm.endpoint import Endpoint
from primsel.registry import build
from primsel.retrieval.llm_selector import LLMSelector

FIELDS = [f.name for f in dataclasses.fields(Endpoint)]
OFFLINE = {"model": "m", "base_url": "http://127.0.0.1:9/v1"}  # built, never asked


@pytest.mark.parametrize("owner", [ChatClient, OpenAIGenerator, LLMSelector])
def test_every_owner_lists_the_endpoint_settings_as_keyword_parameters(owner):
    params = inspect.signature(owner).parameters
    assert list(params)[-len(FIELDS):] == FIELDS
    assert all(params[name].kind is inspect.Parameter.KEYWORD_ONLY for name in FIELDS)
    assert params["timeout_s"].default == 60.0 and params["max_retries"].default == 3


@pytest.mark.parametrize(("settings", "message"), [
    ({"model": ""}, "`model` is required"),
    ({"timeout_s": 0}, "timeout_s must be a number > 0, got 0"),
    ({"timeout_s": float("inf")}, "timeout_s must be a finite number"),
    ({"max_retries": -1}, "max_retries must be an integer >= 0, got -1"),
    ({"concurrency": 1.5}, "concurrency must be an integer, got 1.5"),
    ({"backoff_s": -1}, "backoff_s must be a number >= 0"),
    ({"cache_namespace": 3}, "cache_namespace must be a string"),
])
def test_bad_settings_are_named(settings, message):
    with pytest.raises(ValueError, match=message):
        Endpoint(**{**OFFLINE, **settings})
    with pytest.raises(ValueError, match=message):  # the same check, whichever owner
        build({"type": "llm_selector", **OFFLINE, **settings})


def test_params_leave_the_key_out():
    endpoint = Endpoint(**OFFLINE, api_key="sekret", seed=3)
    assert "api_key" not in endpoint.params() and endpoint.params()["seed"] == 3
    assert "sekret" not in repr(endpoint)


def test_the_generator_round_trips_through_its_parameters():
    gen = build({"type": "openai", **OFFLINE, "examples": 2, "temperature": 0.5}, kind="generator")
    again = build({"type": "openai", **gen.get_params()}, kind="generator")
    assert again.get_params() == gen.get_params() and gen.get_params()["temperature"] == 0.5
    assert set(gen.get_params()) == set(inspect.signature(OpenAIGenerator).parameters) - {"api_key"}


def test_an_unknown_setting_is_refused_with_the_accepted_ones():
    with pytest.raises(TypeError, match=r"'modle'.*\(it takes: template, model, base_url"):
        build({"type": "llm_selector", "modle": "m"})
