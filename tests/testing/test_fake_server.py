"""The scripted loopback server itself: routes, counters, and the pipeline responder."""

from __future__ import annotations

import dataclasses
import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from primsel.generation.extract import extract_program
from primsel.generation.prompts import generation_messages
from primsel.retrieval.llm_selector import selection_messages
from primsel.testing.fake_server import FakeOpenAIServer, Reply, pipeline_responder


def post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_only_loopback_is_allowed():
    with pytest.raises(ValueError, match="loopback"):
        FakeOpenAIServer(host="0.0.0.0")


def test_script_then_responder_and_counters():
    with FakeOpenAIServer(responder=lambda req: Reply(content="default")) as srv:
        srv.push(Reply(content="scripted", finish_reason="length"))
        url = srv.base_url + "/chat/completions"
        first = post(url, {"model": "m", "messages": []})
        second = post(url, {"model": "m", "messages": []})
        assert srv.stats() == {"requests": 2, "answered": 2, "in_flight": 0, "max_in_flight": 1}
    assert first[1]["choices"][0]["message"]["content"] == "scripted"
    assert first[1]["choices"][0]["finish_reason"] == "length"
    assert second[1]["choices"][0]["message"]["content"] == "default"


def test_an_answer_is_counted_before_it_is_sent():
    # a body far larger than the loopback socket buffers: the server is still writing it while
    # the client reads the headers, yet the answer is already counted and no longer in flight
    big = "x" * (32 * 1024 * 1024)
    with FakeOpenAIServer(responder=lambda req: Reply(content=big)) as srv:
        for n in (1, 2):
            conn = http.client.HTTPConnection("127.0.0.1", urllib.parse.urlsplit(srv.base_url).port, timeout=10)
            conn.request("POST", "/v1/chat/completions", body=json.dumps({"model": "m", "messages": []}),
                         headers={"Content-Type": "application/json"})
            response = conn.getresponse()          # status line and headers only
            assert srv.stats() == {"requests": n, "answered": n, "in_flight": 0, "max_in_flight": 1}
            body = json.loads(response.read())
            conn.close()
            assert len(body["choices"][0]["message"]["content"]) == len(big)


def test_error_replies_carry_code_and_type():
    with FakeOpenAIServer() as srv:
        srv.push(Reply(status=429, error_code="insufficient_quota"))
        status, body = post(srv.base_url + "/chat/completions", {"model": "m", "messages": []})
    assert status == 429 and body["error"]["code"] == body["error"]["type"] == "insufficient_quota"


def test_unknown_route_is_404():
    with FakeOpenAIServer() as srv:
        status, _ = post(srv.base_url + "/embeddings", {})
        assert status == 404 and srv.request_count == 0


def test_pipeline_responder_answers_selection_and_generation(toy_library, toy_tasks):
    task = dataclasses.replace(toy_tasks[0], gold=frozenset({"work_calendar.add_event", "work_calendar.Event"}))
    respond = pipeline_responder([task, *toy_tasks[1:]])
    docs = [p for p in toy_library.values() if p.module == "work_calendar"]
    picked = respond({"messages": selection_messages(task.query, "work_calendar", docs)})
    assert json.loads(picked.content) == ["Event", "add_event"]
    none = respond({"messages": selection_messages(task.query, "time_utils", docs)})
    assert json.loads(none.content) == []
    answer = respond({"messages": generation_messages(task, docs)})
    assert extract_program(answer.content, task.id, "book_lunch").code == task.program


def test_pipeline_responder_cut_mode_gives_truncated_programs(toy_tasks):
    respond = pipeline_responder(toy_tasks, mode="cut")
    for task in toy_tasks:
        reply = respond({"messages": generation_messages(task, [])})
        assert reply.finish_reason == "length"
        assert extract_program(reply.content, task.id, task.entry_point, reply.finish_reason).status == "truncated"


def test_pipeline_responder_reflect_mode_answers_wrong_then_right_once_feedback_is_present():
    from primsel.datasets import load_builtin_tasks
    from primsel.eval.faults import make_faults
    from primsel.generation.prompts import reflection_turn
    from primsel.simulator.library import build_library
    from primsel.testing.fake_server import wrong_program

    library = build_library()
    names = {p.name for p in library.values()}
    tasks = load_builtin_tasks()
    respond = pipeline_responder(tasks, mode="reflect")
    for task in tasks[:6]:
        opening = generation_messages(task, [])
        first = extract_program(respond({"messages": opening}).content, task.id, task.entry_point).code
        variants = [f.program for f in make_faults(task.id, task.program, names)]
        assert first == wrong_program(task, names) and first in variants and first != task.program
        feedback = [*opening, *reflection_turn(task, "```python\n" + first + "```", "It did not pass.")]
        second = extract_program(respond({"messages": feedback}).content, task.id, task.entry_point).code
        assert second == task.program
    empty = dataclasses.replace(tasks[0], program="")
    assert wrong_program(empty, names) == "def fulfil_request():\n    return None\n"


def test_pipeline_responder_rejects_unknown_modes(toy_tasks):
    with pytest.raises(ValueError, match="mode"):
        pipeline_responder(toy_tasks, mode="lies")


def test_command_help_is_plain_text_and_says_what_it_answers(capsys):
    from primsel.testing.fake_server import main

    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert ":func:" not in text and "``" not in text and ":data:" not in text
    flat = " ".join(text.split())
    assert "the task's gold primitives of that module" in flat
    assert "the task's reference program" in flat
    assert "every task passes (success 1.0) whatever the retriever" in flat
    assert "--data must name the run's task set" in flat
    assert "cut: answer with the program cut off mid-line and finish_reason 'length'" in flat
    assert "reflect: a wrong program first" in flat


def test_command_rejects_a_directory_as_data(tmp_path, capsys):
    from primsel.testing.fake_server import main

    with pytest.raises(SystemExit) as info:
        main(["--data", str(tmp_path)])
    assert info.value.code == 2 and "is a directory" in capsys.readouterr().err


def test_a_trickled_answer_arrives_whole_one_byte_at_a_time():
    pause = 0.002
    with FakeOpenAIServer() as srv:
        srv.push(Reply(content="slow but whole", trickle_s=pause))
        url = srv.base_url + "/chat/completions"
        begin = time.perf_counter()
        status, body = post(url, {"model": "m", "messages": []})
        elapsed = time.perf_counter() - begin
    assert status == 200 and body["choices"][0]["message"]["content"] == "slow but whole"
    # the server waits `pause` between any two of the answer's bytes (status line and headers too)
    size = len(json.dumps(body)) + len("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
    assert elapsed >= (size - 1) * pause
