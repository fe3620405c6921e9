"""The body of ASPERA's requests on the wire, and the generator's settings under ASPERA's protocol."""

from __future__ import annotations

import pytest

from primsel.generation.generators import LocalGenerator, OpenAIGenerator
from primsel.llm.client import ASPERA_BODY_KEYS, ChatClient
from primsel.testing.fake_server import FakeOpenAIServer, Reply


def test_aspera_body_has_asperas_keys_in_its_order_with_n_and_a_null_stop():
    with FakeOpenAIServer(responder=lambda body: Reply(content="ok")) as server:
        client = ChatClient(model="gpt-4o-2024-05-13", base_url=server.base_url, api_key="x", seed=2,
                            max_tokens=4096, temperature=0.0, aspera_body=True, cache=False)
        client.complete([{"role": "system", "content": "é"}])
        body = server.requests[0]
    assert tuple(body) == ASPERA_BODY_KEYS
    assert body == {"messages": [{"role": "system", "content": "é"}], "model": "gpt-4o-2024-05-13",
                    "max_tokens": 4096, "n": 1, "seed": 2, "stop": None, "temperature": 0.0}


def test_primsel_body_is_unchanged():
    with FakeOpenAIServer(responder=lambda body: Reply(content="ok")) as server:
        client = ChatClient(model="m", base_url=server.base_url, api_key="x", cache=False)
        client.complete([{"role": "user", "content": "hi"}])
        assert server.requests[0] == {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                      "temperature": 0.0}


def test_under_aspera_s_protocol_the_generator_sends_asperas_defaults_and_extraction():
    generator = OpenAIGenerator(model="gpt-4o-2024-05-13", protocol="aspera")
    params = generator.get_params()
    assert (params["max_tokens"], params["seed"], params["temperature"]) == (4096, 0, 0.0)
    assert (params["extraction"], params["agent"]) == ("aspera", "ps_generation")
    assert OpenAIGenerator(model="m", protocol="aspera", seed=2, max_tokens=100).get_params()["seed"] == 2
    assert OpenAIGenerator(model="m").get_params()["extraction"] == "primsel"


def test_the_local_generator_answers_up_to_4096_tokens_under_aspera_s_protocol():
    assert LocalGenerator(protocol="aspera", agent="cck").get_params()["max_tokens"] == 4096
    assert LocalGenerator().get_params()["max_tokens"] == 512


@pytest.mark.parametrize("settings, problem", [
    ({"protocol": "aspera", "extraction": "primsel"}, "processes answers as ASPERA does"),
    ({"agent": "cck"}, "agent is a setting of ASPERA's protocol"),
    ({"protocol": "aspera", "agent": "both"}, "agent must be one of 'cck', 'ps', 'ps_generation', got 'both'"),
    ({"protocol": "apple"}, "protocol must be one of 'primsel', 'aspera', got 'apple'"),
])
def test_bad_protocol_settings_are_refused(settings, problem):
    with pytest.raises(ValueError, match=problem):
        OpenAIGenerator(model="m", **settings)
