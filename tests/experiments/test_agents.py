"""What ``protocol = "aspera"`` makes of a cell's settings (primsel.experiments.agents)."""

from __future__ import annotations

import pytest

from primsel.experiments.agents import resolve_protocol
from primsel.experiments.config import ConfigError, parse_config
from primsel.experiments.settings import SettingError

GENERATOR = {"type": "openai", "protocol": "aspera", "model": "gpt-4o-2024-05-13", "base_url": "http://h/v1",
             "seed": 1, "max_tokens": 100, "extraction": "aspera", "concurrency": 4}


def test_settings_without_the_protocol_are_unchanged():
    settings = {"retriever": "llm_selector", "generator": {"type": "openai", "model": "m"}}
    assert resolve_protocol(settings) == settings


def test_the_whole_library_is_the_cck_agent():
    out = resolve_protocol({"retriever": "all", "generator": GENERATOR})
    assert out["generator"] == {**GENERATOR, "agent": "cck"} and out["retriever"] == "all"


def test_a_retriever_at_k_is_the_ps_generation_request():
    out = resolve_protocol({"retriever": "bm25", "k": 15, "generator": GENERATOR})
    assert out["generator"]["agent"] == "ps_generation" and out["retriever"] == "bm25" and "selector" not in out


def test_llm_selector_becomes_aspera_s_selection_with_the_generator_s_endpoint():
    out = resolve_protocol({"retriever": {"type": "llm_selector"}, "generator": GENERATOR}, library="aspera")
    # the endpoint keys the selector takes, and nothing of the generator's own (extraction, protocol)
    assert out["retriever"] == {"type": "aspera_selector", "model": "gpt-4o-2024-05-13", "base_url": "http://h/v1",
                                "seed": 1, "max_tokens": 100, "concurrency": 4}
    assert out["selector"] == "positive" and out["generator"]["agent"] == "ps"


def test_with_the_local_generator_the_selection_shares_its_model_settings():
    local = {"type": "local", "protocol": "aspera", "n_ctx": 20000, "threads": 2, "seed": 0, "examples": 1}
    out = resolve_protocol({"retriever": "llm_selector", "generator": local}, library="aspera")
    assert out["retriever"] == {"type": "aspera_local_selector", "n_ctx": 20000, "threads": 2, "seed": 0}


def test_llm_selector_with_keys_of_its_own_is_refused():
    with pytest.raises(SettingError, match="remove model, temperature"):
        resolve_protocol({"retriever": {"type": "llm_selector", "model": "x", "temperature": 0.5},
                          "generator": GENERATOR}, library="aspera")


def test_the_ps_agent_needs_aspera_s_library():
    with pytest.raises(SettingError, match='set library = "aspera"'):
        resolve_protocol({"retriever": "llm_selector", "generator": GENERATOR})


def test_an_agent_that_contradicts_the_retriever_is_refused():
    with pytest.raises(SettingError, match="generator.agent: is 'ps', but retriever 'all' makes it 'cck'"):
        resolve_protocol({"retriever": "all", "generator": {**GENERATOR, "agent": "ps"}})


def test_an_experiment_names_the_key_of_the_problem():
    raw = {"name": "x", "retriever": "llm_selector", "generator": GENERATOR}
    with pytest.raises(ConfigError, match=r"<config>: retriever: ASPERA's PS agent selects from all twelve"):
        parse_config(raw)
    with pytest.raises(ConfigError, match="library: expected one of primsel, aspera, got 'apple'"):
        parse_config({**raw, "library": "apple"})


def test_cells_under_the_protocol_have_the_resolved_settings_and_distinct_ids():
    raw = {"name": "x", "library": "aspera", "k": 15, "generator": GENERATOR,
           "grid": {"retriever": ["all", "llm_selector", "oracle"]}}
    config = parse_config(raw)
    agents = [(s.retriever if isinstance(s.retriever, str) else s.retriever["type"], s.generator["agent"], s.selector)
              for _, s in config.cells]
    assert agents == [("all", "cck", None), ("aspera_selector", "ps", "positive"), ("oracle", "ps_generation", None)]
    assert config.library == "aspera" and config.uses_aspera
