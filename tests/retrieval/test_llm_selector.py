"""The LLM selector against the loopback fake server: 5 calls per task, parsing, ranking, usage."""

from __future__ import annotations

import re

import pytest

from primsel import registry
from primsel.llm.client import QuotaExceededError
from primsel.testing.fake_server import FakeOpenAIServer, Reply, last_user_message
from primsel.library import Library
from primsel.retrieval.llm_selector import LLMSelector, parse_names
from primsel.types import Primitive, ReportsUsage, Retriever


@pytest.fixture()
def library() -> Library:
    def prim(module: str, name: str, kind: str = "function") -> Primitive:
        return Primitive(id=f"{module}.{name}", name=name, module=module, kind=kind,
                         signature=f"def {name}()", doc=f"The {name} symbol.")

    return Library([
        prim("exceptions", "RequiresUserInput", "exception"),
        prim("time_utils", "now_"), prim("time_utils", "combine"),
        prim("company_directory", "find_employee"), prim("company_directory", "get_current_user"),
        prim("room_booking", "search_conference_room"),
        prim("work_calendar", "add_event"), prim("work_calendar", "find_events"), prim("work_calendar", "Event", "class"),
    ])


ANSWERS = {
    "exceptions": "[]",
    "time_utils": '```json\n["now_", "tomorrow_at"]\n```',  # one invented name
    "company_directory": '["find_employee"]',
    "room_booking": "None of these are needed: []",
    "work_calendar": '["add_event", "Event", "find_employee"]',  # a name of another module
}


def responder(request):
    user = last_user_message(request)
    module = re.search(r"module `(\w+)`", user).group(1)
    return Reply(content=ANSWERS[module], prompt_tokens=20, completion_tokens=4)


def make(server, **kwargs) -> LLMSelector:
    params = {"model": "m", "base_url": server.base_url, "api_key": "test", "backoff_s": 0.01}
    params.update(kwargs)
    return LLMSelector(**params)


def test_registered_with_the_protocols():
    sel = registry.build({"type": "llm_selector", "model": "m", "base_url": "http://127.0.0.1:9/v1"})
    assert isinstance(sel, LLMSelector) and isinstance(sel, Retriever) and isinstance(sel, ReportsUsage)
    assert "api_key" not in sel.get_params()


def test_cache_namespace_is_a_parameter_of_the_cache_key(library):
    with FakeOpenAIServer(responder=responder) as srv:
        for namespace in ("a", "b", "a"):
            make(srv, cache_namespace=namespace).fit(library).search({"1": "add a meeting"}, k=3)
        requests = srv.request_count
    assert requests == 2 * 5  # one call per module; the second "a" is answered from the cache
    assert make(srv, cache_namespace="a").get_params()["cache_namespace"] == "a"


def test_needs_a_model():
    with pytest.raises(ValueError, match="model"):
        LLMSelector()


def test_union_of_module_answers_ranks_first_then_the_rest(library):
    with FakeOpenAIServer(responder=responder) as srv:
        run = make(srv).fit(library).search({"q1": "Book a meeting with Ana now"}, k=len(library))
    ranking = list(run["q1"].items())
    selected = ["company_directory.find_employee", "time_utils.now_", "work_calendar.Event", "work_calendar.add_event"]
    rest = sorted(set(library) - set(selected))
    assert ranking == [(pid, 1.0) for pid in selected] + [(pid, 0.0) for pid in rest]


def test_five_calls_per_task_with_usage_and_unknown_names(library):
    with FakeOpenAIServer(responder=responder) as srv:
        sel = make(srv).fit(library)
        sel.search({"a": "first request", "b": "second request"}, k=3)
        assert srv.request_count == 10
    usage = sel.usage()
    assert set(usage) == {"a", "b"}
    assert usage["a"]["calls"] == 5 and usage["a"]["prompt_tokens"] == 100 and usage["a"]["completion_tokens"] == 20
    assert usage["a"]["unknown_names"] == 2 and usage["a"]["errors"] == 0
    assert sel.unknown_names()["a"] == ["time_utils:tomorrow_at", "work_calendar:find_employee"]


def test_each_prompt_shows_only_its_module(library):
    with FakeOpenAIServer(responder=responder) as srv:
        make(srv).fit(library).search({"a": "anything"}, k=1)
        systems = {re.search(r"module `(\w+)`", last_user_message(r)).group(1): r["messages"][0]["content"]
                   for r in srv.requests}
    assert "def add_event()" in systems["work_calendar"] and "def add_event()" not in systems["time_utils"]


def test_requests_run_concurrently_across_tasks(library):
    with FakeOpenAIServer(responder=responder, latency_s=0.1) as srv:
        make(srv, concurrency=4).fit(library).search({str(i): f"request {i}" for i in range(4)}, k=1)
    assert srv.request_count == 20
    assert 2 <= srv.max_in_flight <= 4


def test_cached_second_search_sends_nothing(library):
    with FakeOpenAIServer(responder=responder) as srv:
        make(srv).fit(library).search({"a": "same request"}, k=2)
        again = make(srv).fit(library)
        run = again.search({"a": "same request"}, k=2)
        assert srv.request_count == 5
    assert again.usage()["a"]["cached"] == 5
    assert list(run["a"]) == ["company_directory.find_employee", "time_utils.now_"]


def test_failed_module_request_selects_nothing_from_it(library):
    with FakeOpenAIServer(responder=responder) as srv:
        # one worker sends the requests in module order: exceptions, then time_utils (fails)
        srv.push(Reply(content="[]"), Reply(status=400))
        sel = make(srv, concurrency=1).fit(library)
        sel._client.prefix_ordered = False  # in module order (the default sends in prefix order)
        run = sel.search({"a": "x"}, k=len(library))
    assert sel.usage()["a"]["errors"] == 1
    assert [pid for pid, score in run["a"].items() if score > 0] == [
        "company_directory.find_employee", "work_calendar.Event", "work_calendar.add_event"]


def test_quota_error_stops_the_search(library):
    with FakeOpenAIServer(responder=responder) as srv:
        srv.push(Reply(status=429, error_code="insufficient_quota"))
        with pytest.raises(QuotaExceededError):
            make(srv, concurrency=1).fit(library).search({"a": "x", "b": "y"}, k=1)
        assert srv.request_count == 1


@pytest.mark.parametrize(
    ("text", "picked", "unknown"),
    [
        ('["add_event", "Event"]', ["add_event", "Event"], []),
        ('```json\n["work_calendar.add_event", "add_event()"]\n```', ["add_event"], []),
        ("[]", [], []),
        ("- add_event\n- `Event`\n- make_meeting", ["add_event", "Event"], ["make_meeting"]),
        ("1. add_event, find_events", ["add_event", "find_events"], []),
        ("You need add_event to create the Event.", ["add_event", "Event"], []),
        ("Nothing here.", [], []),
    ],
)
def test_parse_names(text, picked, unknown):
    assert parse_names(text, ["add_event", "find_events", "Event"]) == (picked, unknown)
