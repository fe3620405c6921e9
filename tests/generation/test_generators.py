"""The registered generators: openai (against the loopback fake server), reference, replay."""

from __future__ import annotations

import json

import pytest

from primsel import registry
from primsel.llm.client import QuotaExceededError
from primsel.testing.fake_server import FakeOpenAIServer, Reply, last_user_message
from primsel.generation.generators import OpenAIGenerator, ReferenceGenerator, ReplayGenerator, prefix_order
from primsel.types import Generator


def fenced(code: str) -> str:
    return f"Here is the program:\n```python\n{code}```\n"


def answer_with_reference(tasks):
    """A responder that answers each request with the reference program of the task it asks about."""
    by_query = {t.query: t for t in tasks}

    def responder(request):
        user = last_user_message(request)
        task = next(t for q, t in by_query.items() if q in user)
        return Reply(content=fenced(task.program))

    return responder


@pytest.fixture()
def fast():
    return {"api_key": "test", "backoff_s": 0.01, "timeout_s": 5.0}


def test_generators_are_registered_and_follow_the_protocol():
    assert {"openai", "reference", "replay"} <= set(registry.available("generator"))
    gen = registry.build({"type": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}, kind="generator")
    assert isinstance(gen, OpenAIGenerator) and isinstance(gen, Generator)
    assert isinstance(registry.build("reference", kind="generator"), ReferenceGenerator)


def test_openai_generator_passes_its_cache_namespace_to_the_cache_key(toy_library, toy_tasks, fast):
    with FakeOpenAIServer(responder=answer_with_reference(toy_tasks)) as srv:
        for namespace in ("a", "b", "a"):
            gen = OpenAIGenerator(model="m", base_url=srv.base_url, examples=0, cache_namespace=namespace, **fast)
            gen.fit(toy_library).generate(toy_tasks[1], [])
        requests = srv.request_count
    assert requests == 2  # the second "a" is answered from the cache
    assert gen.get_params()["cache_namespace"] == "a"


def test_openai_generator_needs_a_model():
    with pytest.raises(ValueError, match="model"):
        OpenAIGenerator()


def test_openai_generator_rejects_a_bad_template():
    with pytest.raises(ValueError, match="template"):
        OpenAIGenerator(model="m", template="no_such_template")


def test_openai_program_from_a_fenced_answer(toy_library, toy_tasks, fast):
    task = toy_tasks[1]
    with FakeOpenAIServer(responder=answer_with_reference(toy_tasks)) as srv:
        gen = OpenAIGenerator(model="m", base_url=srv.base_url, examples=0, **fast).fit(toy_library)
        program = gen.generate(task, [toy_library["work_calendar.find_events"]])
    assert (program.status, program.code, program.entry_point) == ("ok", task.program, "count_meetings")
    assert program.messages[-1]["content"].startswith("Request: How many meetings")
    assert program.usage["calls"] == 1 and program.usage["cached"] == 0
    assert program.usage["prompt_tokens"] == 10 and program.usage["completion_tokens"] == 5
    assert srv.request_count == 1


def test_stubs_follow_library_order_whatever_the_rank_order(toy_library, toy_tasks, fast):
    docs = [toy_library["work_calendar.find_events"], toy_library["time_utils.now_"], toy_library["work_calendar.Event"]]
    gen = OpenAIGenerator(model="m", base_url="http://127.0.0.1:9/v1", examples=0, **fast).fit(toy_library)
    a = gen.messages(toy_tasks[0], docs)
    b = gen.messages(toy_tasks[0], list(reversed(docs)))
    assert a == b
    system = a[0]["content"]
    assert system.index("def now_") < system.index("class Event") < system.index("def find_events")


def test_examples_come_from_the_training_pool_only(toy_library, toy_tasks, fast):
    test_task, train = toy_tasks[2], [toy_tasks[1], toy_tasks[3]]
    gen = OpenAIGenerator(model="m", base_url="http://127.0.0.1:9/v1", examples=1, **fast).fit(toy_library, train)
    system = gen.messages(test_task, [])[0]["content"]
    # task 1 would be the most similar, but it is not in the training pool
    assert "Book lunch with Ana" not in system
    # neither training query shares a word with it: the tie goes to the lower id, task 2
    assert "How many meetings" in system and "Book a room" not in system


def test_generate_many_keeps_order_and_bounds_concurrency(toy_library, toy_tasks, fast):
    with FakeOpenAIServer(responder=answer_with_reference(toy_tasks), latency_s=0.1) as srv:
        gen = OpenAIGenerator(model="m", base_url=srv.base_url, examples=0, concurrency=2, **fast).fit(toy_library)
        programs = gen.generate_many([(t, list(toy_library.values())) for t in toy_tasks])
    assert [p.task_id for p in programs] == [t.id for t in toy_tasks]
    assert [p.code for p in programs] == [t.program for t in toy_tasks]
    assert srv.max_in_flight <= 2
    summary = gen.usage_summary()
    assert summary["requests"] == 4 and summary["programs_ok"] == 4


def test_second_run_is_answered_from_the_cache(toy_library, toy_tasks, fast):
    with FakeOpenAIServer(responder=answer_with_reference(toy_tasks)) as srv:
        first = OpenAIGenerator(model="m", base_url=srv.base_url, examples=0, **fast).fit(toy_library)
        first.generate_many([(t, []) for t in toy_tasks])
        again = OpenAIGenerator(model="m", base_url=srv.base_url, examples=0, **fast).fit(toy_library)
        programs = again.generate_many([(t, []) for t in toy_tasks])
    assert srv.request_count == len(toy_tasks)
    assert all(p.usage["cached"] == 1 and p.status == "ok" for p in programs)
    assert again.usage_summary()["cache_hits"] == len(toy_tasks)


def test_cut_off_answers_are_truncated(toy_library, toy_tasks, fast):
    def responder(request):
        return Reply(content="```python\ndef plan():\n    events = find_events(", finish_reason="length")

    with FakeOpenAIServer(responder=responder) as srv:
        gen = OpenAIGenerator(model="m", base_url=srv.base_url, examples=0, **fast).fit(toy_library)
        programs = gen.generate_many([(t, []) for t in toy_tasks])
    assert {p.status for p in programs} == {"truncated"}
    assert all(p.usage["truncated"] == 1 for p in programs)
    assert gen.usage_summary()["programs_truncated"] == len(toy_tasks)


def test_failed_request_gives_llm_error_and_the_run_goes_on(toy_library, toy_tasks, fast):
    with FakeOpenAIServer(responder=answer_with_reference(toy_tasks)) as srv:
        srv.push(Reply(status=400))
        gen = OpenAIGenerator(model="m", base_url=srv.base_url, examples=0, concurrency=1, **fast).fit(toy_library)
        items = [(t, []) for t in toy_tasks]
        programs = gen.generate_many(items)
    # requests go in prefix order: the scripted 400 answers the first request sent
    first = prefix_order([gen.messages(t, docs) for t, docs in items])[0]
    assert [p.status for p in programs] == ["llm_error" if i == first else "ok" for i in range(len(toy_tasks))]
    assert programs[first].code is None and "400" in programs[first].raw


def test_quota_error_stops_generate_many(toy_library, toy_tasks, fast):
    with FakeOpenAIServer(responder=answer_with_reference(toy_tasks)) as srv:
        srv.push(Reply(status=429, error_code="insufficient_quota"))
        gen = OpenAIGenerator(model="m", base_url=srv.base_url, examples=0, concurrency=1, **fast).fit(toy_library)
        with pytest.raises(QuotaExceededError):
            gen.generate_many([(t, []) for t in toy_tasks])
    assert srv.request_count == 1


def test_answer_without_code_is_no_program(toy_library, toy_tasks, fast):
    with FakeOpenAIServer(responder=lambda request: Reply(content="I need more details.")) as srv:
        gen = OpenAIGenerator(model="m", base_url=srv.base_url, examples=0, **fast).fit(toy_library)
        program = gen.generate(toy_tasks[0], [])
    assert (program.status, program.code, program.raw) == ("no_program", None, "I need more details.")


def test_reference_generator_returns_the_reference_program(toy_tasks):
    gen = ReferenceGenerator().fit({}, [])
    programs = gen.generate_many([(t, []) for t in toy_tasks])
    assert [(p.code, p.status) for p in programs] == [(t.program, "ok") for t in toy_tasks]
    assert programs[1].entry_point == "count_meetings"


def test_replay_reads_jsonl(tmp_path, toy_tasks):
    path = tmp_path / "programs.jsonl"
    rows = [
        {"task_id": "1", "program": "def mine():\n    return 5\n"},
        {"task_id": 2, "program": "Sure:\n```python\ndef count_meetings() -> int:\n    return 0\n```"},
        {"task_id": "3", "program": ""},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    gen = registry.build({"type": "replay", "programs": str(path)}, kind="generator").fit({}, [])
    programs = gen.generate_many([(t, []) for t in toy_tasks])
    assert (programs[0].status, programs[0].code, programs[0].entry_point) == ("ok", rows[0]["program"], "mine")
    assert (programs[1].status, programs[1].code) == ("ok", "def count_meetings() -> int:\n    return 0\n")
    assert [p.status for p in programs[2:]] == ["no_program", "no_program"]
    assert gen.usage_summary() == {"programs": 3}


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('{"task_id": "1", "program": "x"}\nnot json\n', "invalid JSON"),
        ('{"task_id": "1"}\n', "'program' string"),
        ('{"task_id": "1", "program": "a"}\n{"task_id": "1", "program": "b"}\n', "twice"),
    ],
)
def test_replay_rejects_bad_files(tmp_path, content, problem):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(ValueError, match=problem):
        ReplayGenerator(programs=str(path)).fit({}, [])


def test_replay_needs_a_readable_file(tmp_path):
    with pytest.raises(ValueError, match="programs"):
        ReplayGenerator()
    with pytest.raises(ValueError, match="cannot read"):
        ReplayGenerator(programs=str(tmp_path / "missing.jsonl")).fit({}, [])


# -- reflection rounds -------------------------------------------------------------------------
def test_a_revision_continues_the_conversation_with_each_answer_and_its_feedback(toy_library, toy_tasks, fast,
                                                                                 tmp_path):
    from primsel.types import Revises

    task = toy_tasks[1]
    docs = [toy_library["work_calendar.find_events"]]
    answers = iter([fenced("def count_meetings() -> int:\n    return 0\n"),
                    fenced("def count_meetings() -> int:\n    return 1\n"), fenced(task.program)])
    with FakeOpenAIServer(responder=lambda request: Reply(content=next(answers))) as srv:
        gen = OpenAIGenerator(model="m", base_url=srv.base_url, examples=0, **fast).fit(toy_library)
        assert isinstance(gen, Revises)
        first = gen.generate(task, docs)
        (second,) = gen.revise_many([(task, docs, [(first, "It returned 0.")])])
        (third,) = gen.revise_many([(task, docs, [(first, "It returned 0."), (second, "It returned 1.")])])
        sent = [r["messages"] for r in srv.requests]
    opening = gen.messages(task, docs)
    ask = ("Write the corrected function `def count_meetings() -> int` that fulfils the request. Reply with the "
           "complete function in a single ```python fenced code block.")
    assert sent[1] == [*opening, {"role": "assistant", "content": first.raw},
                       {"role": "user", "content": f"It returned 0.\n\n{ask}"}]
    assert sent[2] == [*sent[1], {"role": "assistant", "content": second.raw},
                       {"role": "user", "content": f"It returned 1.\n\n{ask}"}]
    assert (second.code, third.code) == ("def count_meetings() -> int:\n    return 1\n", task.program)
    assert list(third.messages) == sent[2]


def test_a_revision_is_cached_like_any_request_and_its_template_is_a_file(toy_library, toy_tasks, fast, tmp_path):
    template = tmp_path / "mine.txt"
    template.write_text("=== user ===\nFEEDBACK ${feedback} for ${function_name}\n")
    task = toy_tasks[1]
    with FakeOpenAIServer(responder=lambda request: Reply(content=fenced(task.program))) as srv:
        gen = OpenAIGenerator(model="m", base_url=srv.base_url, examples=0, reflect_template=str(template),
                              **fast).fit(toy_library)
        first = gen.generate(task, [])
        for _ in range(2):
            (again,) = gen.revise_many([(task, [], [(first, "It failed.")])])
        assert srv.request_count == 2 and again.usage["cached"] == 1
        assert srv.requests[1]["messages"][-1] == {"role": "user", "content": "FEEDBACK It failed. for count_meetings"}
    assert gen.get_params()["reflect_template"] == str(template)
    with pytest.raises(ValueError, match="template"):
        OpenAIGenerator(model="m", reflect_template="no_such_template")
