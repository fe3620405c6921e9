"""ASPERA's protocol (issue 30, items 1, 2, 3 and 7): primsel's requests against those of ASPERA's own agents.

The expected requests are rendered by ASPERA's code, from its checkout, in a subprocess (``aspera_side.py``):
``CompleteCodebaseKnowledgeAgent._make_messages_and_imports`` and ``PrimitivesSelectionAgent`` configured from
ASPERA's YAML files, its completer replaced by the scripted model of ``scripted.py``, whose answer depends only
on the messages. primsel's requests come from :func:`primsel.aspera.aspera_protocol` (fed the same scripted
answers) and, on the wire, from ``run_experiment`` against the fake OpenAI server. Messages are compared byte
for byte (their JSON, key order included); a difference is reported with the task, the request, the message,
the first differing byte offset and the text around it.

The scripted selection answers vary per task and module and exercise what a reimplementation of ASPERA's
selection would get wrong (see ``scripted.py``); :func:`test_the_scripted_answers_exercise_the_quirks` checks
that they do.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from primsel.aspera import aspera_protocol
from primsel.datasets import load_tasks
from primsel.experiments.config import parse_config
from primsel.experiments.runner import run_experiment
from primsel.testing.fake_server import FakeOpenAIServer, Reply
from primsel.types import Task
from tests.aspera import scripted
from tests.aspera.conftest import extract_plans, given_names, library_names, write_plans

#: ASPERA's agents rendered in a subprocess and whole experiments against the fake server: end to end.
pytestmark = pytest.mark.slow

MODEL = "gpt-4o-2024-05-13"
#: ASPERA's request body: its keys in the order openai-python sends them (ASPERA_PROTOCOL.md, section 2).
BODY_KEYS = ["messages", "model", "max_tokens", "n", "seed", "stop", "temperature"]
#: The modules ASPERA's PS agent asks about, in its order (all twelve of aspera.apps: the deny list names none).
SELECTION_MODULES = ("ai_assistant", "company_directory", "contacts", "exceptions", "files", "messaging",
                     "navigation", "reminder", "room_booking", "time_utils", "user_device_settings", "work_calendar")
Messages = list[dict[str, str]]


# -- comparing ----------------------------------------------------------------------------------------------------
def _context(data: bytes, offset: int) -> str:
    return repr(data[max(0, offset - 40):offset + 40].decode("utf-8", "replace"))


def first_difference(expected: Sequence[Mapping[str, Any]], got: Any) -> str | None:
    """None when ``got`` is ``expected`` byte for byte (as JSON, key order included); else where they first
    differ: the message, the byte offset in its content and the text around it on both sides."""
    as_json = json.dumps(expected, ensure_ascii=False)
    if isinstance(got, list) and json.dumps(got, ensure_ascii=False) == as_json:
        return None
    if not isinstance(got, list) or len(got) != len(expected):
        shape = [m.get("role") for m in got] if isinstance(got, list) else type(got).__name__
        return f"{len(expected)} messages {[m['role'] for m in expected]} expected, got {shape}"
    for index, (want, have) in enumerate(zip(expected, got)):
        if list(have) != list(want):
            return f"message {index}: keys {list(want)} expected, got {list(have)}"
        if have["role"] != want["role"]:
            return f"message {index}: role {want['role']!r} expected, got {have['role']!r}"
        a, b = want["content"].encode("utf-8"), have["content"].encode("utf-8")
        if a != b:
            offset = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            return (f"message {index} ({want['role']}, {len(a)} bytes expected, {len(b)} got): first difference at "
                    f"byte {offset}: ASPERA {_context(a, offset)} / primsel {_context(b, offset)}")
    return "same text, different JSON"


def primsel_requests(task: Task) -> dict[str, Any]:
    """primsel's rendering of ASPERA's requests for ``task``, the selections answered by the scripted model."""
    protocol = aspera_protocol()
    selections = protocol.selection_messages(task.query)
    answers = [scripted.answer(messages) for messages in selections]
    parsed = protocol.parse_selection(answers)
    return {"cck": protocol.cck_messages(task), "selections": selections, "ps_names": list(parsed["names"]),
            "ps_generation": protocol.generation_messages(task, parsed["names"], agent_order=True)}


def compare_task(expected: Mapping[str, Any], got: Mapping[str, Any]) -> list[str]:
    """The differences between ASPERA's requests for a task and primsel's, one line each."""
    out = []
    found = first_difference(expected["cck"], got["cck"])
    if found:
        out.append(f"CCK request: {found}")
    if len(got["selections"]) != len(expected["selections"]):
        out.append(f"PS: {len(expected['selections'])} selection requests expected, got {len(got['selections'])}")
    for module, want, have in zip(SELECTION_MODULES, expected["selections"], got["selections"]):
        found = first_difference(want, have)
        if found:
            out.append(f"PS selection request ({module}): {found}")
    if got["ps_names"] != expected["ps_names"]:
        missing = [n for n in expected["ps_names"] if n not in got["ps_names"]]
        extra = [n for n in got["ps_names"] if n not in expected["ps_names"]]
        out.append(f"PS selected symbols: ASPERA {expected['ps_names']}, primsel {got['ps_names']} "
                   f"(missing {missing}, extra {extra})")
    found = first_difference(expected["ps_generation"], got["ps_generation"])
    if found:
        out.append(f"PS generation request: {found}")
    return out


def report(differences: Mapping[str, list[str]], shown: int = 60) -> str:
    """The differences, one line each (the first ``shown`` of them)."""
    lines = [f"  {task_id}: {line}" for task_id, found in differences.items() for line in found]
    more = [f"  ... and {len(lines) - shown} more"] if len(lines) > shown else []
    return "\n".join([f"{len(differences)} task(s) differ:", *lines[:shown], *more])


def check_rendering(tasks: Sequence[Task], run) -> int:
    """Compare every task's requests; primsel's side is rendered while ASPERA's runs. Returns the number of
    requests compared (CCK 1 + PS 13 per task)."""
    ours = {task.id: primsel_requests(task) for task in tasks}
    theirs = run.rows()
    assert sorted(theirs) == sorted(ours)
    differences = {}
    for task in tasks:
        found = compare_task(theirs[task.id], ours[task.id])
        if found:
            differences[task.id] = found
    assert not differences, report(differences)
    return 14 * len(tasks)


# -- 1. rendering parity ------------------------------------------------------------------------------------------
def test_builtin_tasks_render_as_aspera_s_agents_render_them(aspera_env, builtin_tasks, builtin_aspera):
    assert len(builtin_tasks) == 32
    assert check_rendering(builtin_tasks, builtin_aspera) == 32 * 14


@pytest.mark.asper
def test_all_asper_bench_tasks_render_as_aspera_s_agents_render_them(aspera_env, asper_path, aspera_runs, tmp_path):
    tasks = load_tasks(asper_path)
    assert len(tasks) == 250
    plans = extract_plans(asper_path, tmp_path / "plans")
    run = aspera_runs(aspera_env, plans, [{"id": t.id, "query": t.query} for t in tasks], ("cck", "ps"), tmp_path)
    assert check_rendering(tasks, run) == 250 * 14


def test_generation_request_for_given_symbols_renders_as_aspera_s_agent(aspera_env, builtin_tasks, builtin_aspera):
    """A retriever's selection (16 names of the library, in an order of their own) under ASPERA's generation
    prompt: the request ASPERA's PS agent sends had it selected exactly these symbols (item 3)."""
    names = library_names(aspera_env)
    rows = builtin_aspera.rows()
    protocol = aspera_protocol()
    differences = {}
    for task in builtin_tasks:
        chosen = given_names(task.id, names)
        assert rows[task.id]["given_found"] == sorted(chosen)
        found = first_difference(rows[task.id]["given_generation"], protocol.generation_messages(task, chosen))
        if found:
            differences[task.id] = [f"generation request for {chosen}: {found}"]
    assert not differences, report(differences)


def test_the_scripted_answers_exercise_the_quirks(builtin_aspera):
    """The selection answers cover every variant, and ASPERA's selections show the quirks a reimplementation
    would miss: a one-line import's last name not selected, prefix matches, names outside the module."""
    rows = builtin_aspera.rows()
    variants = Counter()
    last_name_missed = prefix_found = 0
    for row in rows.values():
        selected = set(row["ps_names"])
        assert len(row["selections"]) == 12
        for messages in row["selections"]:
            content = messages[0]["content"]
            variant = scripted.variant_of(content)
            variants[variant] += 1
            answer = scripted.selection_answer(content)
            line = answer.split("\n")[1] if variant == "one_line" else ""
            if "," in line and len(line) <= 80:
                last_name_missed += line.rsplit(", ", 1)[1] not in selected
        prefix_found += "Address" in selected or "reminder" in selected
    assert set(variants) == set(scripted.VARIANTS), variants
    assert min(variants.values()) >= 10, variants
    assert last_name_missed >= 5
    assert prefix_found >= 5
    # every task's selection differs, so the generation requests test the merging, not one fixed list
    assert len({tuple(row["ps_names"]) for row in rows.values()}) == 32


# -- 2. wire parity -----------------------------------------------------------------------------------------------
def scripted_reply(body: dict[str, Any]) -> Reply:
    return Reply(content=scripted.answer(body["messages"]))


def run_cell(tmp_path: Path, name: str, retriever: Any, seed: int, task_ids: Sequence[str] | None = None,
             generator: Mapping[str, Any] | None = None, **cell: Any) -> tuple[list[dict[str, Any]], Path]:
    """One cell run by ``run_experiment`` on the built-in tasks (``task_ids``: some of them) against the fake
    server: the request bodies it received, in arrival order, and the cell's folder."""
    with FakeOpenAIServer(responder=scripted_reply) as server:
        raw = {"name": name, "library": "aspera", "retriever": retriever, **cell,
               "generator": {"type": "openai", "protocol": "aspera", "model": MODEL, "base_url": server.base_url,
                             "api_key": "not-used", "seed": seed, **(generator or {})}}
        config = parse_config(raw, name=name)
        result = run_experiment(config, tmp_path / "runs", progress=False, workers=1, task_ids=task_ids)
        assert len(result.computed) == 1
        requests = list(server.requests)
    return requests, result.directory / result.computed[0]


def body_problems(body: Mapping[str, Any], seed: int, max_tokens: int = 4096) -> list[str]:
    """How a request body differs from ASPERA's (everything but the messages)."""
    problems = []
    if list(body) != BODY_KEYS:
        problems.append(f"keys {list(body)}, ASPERA sends {BODY_KEYS}")
    expected = {"model": MODEL, "max_tokens": max_tokens, "n": 1, "seed": seed, "stop": None, "temperature": 0.0}
    for key, value in expected.items():
        if key not in body or body[key] != value or type(body[key]) is not type(value):
            problems.append(f"{key}={body.get(key, '<absent>')!r}, ASPERA sends {value!r}")
    return problems


def check_wire(requests: Sequence[dict[str, Any]], expected: Mapping[str, list[Messages]], seed: int) -> None:
    """Every request's body is ASPERA's, and the requests are exactly ASPERA's, task by task: each of its requests
    sent once, the generation request after the 12 selection requests (the order of a task's selection requests
    is not compared: ASPERA sends them one at a time in module order, primsel several at once)."""
    problems = Counter()
    for body in requests:
        for problem in body_problems(body, seed):
            problems[problem] += 1
    assert not problems, f"request bodies differ from ASPERA's: {dict(problems)}"
    owner = {json.dumps(m, ensure_ascii=False): task_id for task_id, ms in expected.items() for m in ms}
    sent: dict[str, list[Messages]] = {task_id: [] for task_id in expected}
    unknown = []
    for body in requests:
        task_id = owner.get(json.dumps(body["messages"], ensure_ascii=False))
        if task_id is None:
            unknown.append(body["messages"])
        else:
            sent[task_id].append(body["messages"])
    differences: dict[str, list[str]] = {}
    by_key = {_request_key(m): (task_id, m) for task_id, ms in expected.items() for m in ms}
    for messages in unknown:
        task_id, want = by_key.get(_request_key(messages), ("?", None))
        if want is None:
            differences.setdefault(task_id, []).append(f"a request of no task: {json.dumps(messages)[:300]}")
        else:
            differences.setdefault(task_id, []).append(f"a request not ASPERA's: {first_difference(want, messages)}")
    for task_id, want in expected.items():
        have = sent[task_id]
        wanted = Counter(json.dumps(m, ensure_ascii=False) for m in want)
        got = Counter(json.dumps(m, ensure_ascii=False) for m in have)
        if got != wanted:
            twice = sum((got - wanted).values())
            unsent = sum((wanted - got).values())
            differences.setdefault(task_id, []).append(
                f"{len(want)} requests expected: {unsent} of them not sent as ASPERA sends them, {twice} sent again")
        elif len(want) > 1 and json.dumps(have[-1], ensure_ascii=False) != json.dumps(want[-1], ensure_ascii=False):
            differences.setdefault(task_id, []).append("the generation request sent before a selection request")
    assert not differences, report(differences)
    assert len(requests) == sum(len(ms) for ms in expected.values())


def _request_key(messages: Sequence[Mapping[str, str]]) -> tuple[Any, ...]:
    """What pairs a request with ASPERA's: the number of messages, the query, and a selection's module."""
    text = messages[-1].get("content", "") if messages else ""
    query = text.rsplit("\nQuery: ", 1)[1].split("\n", 1)[0] if "\nQuery: " in text else None
    module = None
    if len(messages) == 1 and "# aspera.apps." in text:
        module = text.split("# aspera.apps.", 1)[1].split(".py", 1)[0]
    return len(messages), query, module


@pytest.fixture()
def builtin_only(monkeypatch):
    """The experiments run on the built-in tasks, whatever the environment names."""
    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)


def test_cck_agent_sends_aspera_s_requests(aspera_env, builtin_only, builtin_aspera, tmp_path):
    requests, _ = run_cell(tmp_path, "cck", "all", seed=0)
    rows = builtin_aspera.rows()
    check_wire(requests, {task_id: [row["cck"]] for task_id, row in rows.items()}, seed=0)


def test_cck_agent_with_seed_1_changes_only_the_seed(aspera_env, builtin_only, builtin_aspera, tmp_path):
    requests, _ = run_cell(tmp_path, "cck_seed1", "all", seed=1)
    rows = builtin_aspera.rows()
    check_wire(requests, {task_id: [row["cck"]] for task_id, row in rows.items()}, seed=1)


def test_ps_agent_sends_aspera_s_13_requests_per_task(aspera_env, builtin_only, builtin_aspera, tmp_path):
    requests, _ = run_cell(tmp_path, "ps", {"type": "llm_selector"}, seed=0)
    rows = builtin_aspera.rows()
    expected = {task_id: [*row["selections"], row["ps_generation"]] for task_id, row in rows.items()}
    assert all(len(ms) == 13 for ms in expected.values())
    check_wire(requests, expected, seed=0)


def test_oracle_at_15_sends_aspera_s_generation_request_for_its_selection(aspera_env, builtin_only, builtin_tasks,
                                                                          aspera_runs, tmp_path):
    requests, cell = run_cell(tmp_path, "oracle", "oracle", seed=0, k=15)
    records = [json.loads(line) for line in (cell / "tasks.jsonl").read_text(encoding="utf-8").splitlines()]
    selected = {r["task_id"]: [pid.split(".", 1)[1] for pid in r["selection"]] for r in records}
    assert sorted(selected) == sorted(t.id for t in builtin_tasks)
    for record in records:  # the oracle: the gold first, then the rest, 15 in all
        assert len(record["selection"]) == 15
        assert set(record["gold"]) <= set(record["selection"]) or set(record["selection"]) <= set(record["gold"])
    plans = write_plans(builtin_tasks, tmp_path / "plans")
    jobs = [{"id": t.id, "query": t.query, "names": selected[t.id]} for t in builtin_tasks]
    rows = aspera_runs(aspera_env, plans, jobs, ("given",), tmp_path).rows()
    for task in builtin_tasks:
        assert rows[task.id]["given_found"] == sorted(set(selected[task.id])), task.id
    check_wire(requests, {task_id: [row["given_generation"]] for task_id, row in rows.items()}, seed=0)


def test_max_tokens_set_in_the_experiment_is_sent(aspera_env, builtin_only, builtin_aspera, tmp_path):
    """``max_tokens`` is ASPERA's 4096 unless the experiment sets it; the other fields and the messages stay."""
    requests, _ = run_cell(tmp_path, "cck_max_tokens", "all", seed=0, task_ids=["builtin-05"],
                           generator={"max_tokens": 512})
    assert len(requests) == 1
    assert body_problems(requests[0], seed=0, max_tokens=512) == []
    assert first_difference(builtin_aspera.rows()["builtin-05"]["cck"], requests[0]["messages"]) is None


def test_ps_agent_on_one_task_sends_13_requests(aspera_env, builtin_only, builtin_aspera, tmp_path):
    requests, _ = run_cell(tmp_path, "ps_one", {"type": "llm_selector"}, seed=0, task_ids=["builtin-07"])
    row = builtin_aspera.rows()["builtin-07"]
    check_wire(requests, {"builtin-07": [*row["selections"], row["ps_generation"]]}, seed=0)
