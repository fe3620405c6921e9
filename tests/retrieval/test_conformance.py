"""Every registered retriever honours the Retriever protocol (docs/architecture.md, "Rankings").

Parametrised over ``primsel.registry.available()``, so a newly registered retriever is checked
without editing this file. Parameters below only keep the test offline and fast (no sentence
model): dense features are replaced by a deterministic fake encoder, and retrievers that call an
LLM (``llm_selector``) talk to a scripted server on 127.0.0.1 started by the test
(:class:`primsel.testing.fake_server.FakeOpenAIServer`), which picks the module's primitives
whose documentation shares a word with the request.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import primsel.retrieval
from primsel.registry import available, build, resolve
from primsel.testing.fake_server import FakeOpenAIServer, Reply, last_user_message
from primsel.types import LearnsFromTasks, ReportsUsage, Retriever, SeesGold

#: The repository's root (the documentation is read from there).
ROOT = Path(__file__).resolve().parents[2]
#: Parameters that avoid loading a sentence model.
OFFLINE_PARAMS = {
    "classifier": {"features": "tfidf"},
    "knn": {"features": "tfidf"},
    "hybrid": {"members": ["bm25", "prior"], "method": "rrf"},
    "cooccurrence": {"base": "prior"},
    "tuned": {"base": "bm25", "grid": {"k1": [0.9, 1.5]}, "inner_folds": 2},
}
#: Retrievers that train a transformer: a tiny training keeps them fast (the base model is loaded
#: from the offline package; they are skipped without sentence-transformers).
TRAINED = {
    "finetuned": {"epochs": 1, "frozen_layers": 5, "max_seq_length": 16},
    "rerank": {"first_stage": "bm25", "top_n": 3, "epochs": 1, "frozen_layers": 5, "max_seq_length": 32},
}
OFFLINE_PARAMS.update(TRAINED)


def fake_encoder(texts):
    rows = []
    for t in texts:
        digest = hashlib.sha256(t.encode()).digest()
        rows.append([b - 128 for b in digest[:8]])
    return np.array(rows, dtype=np.float32)


_STUB = re.compile(r"^(?:def|class) (\w+)[^\n]*\n\s*\"\"\"\n\s*(.*)$", re.MULTILINE)
_REQUEST = re.compile(r"^Request: (.*)$", re.MULTILINE)


def picking_responder(request):
    """Answers a selection prompt with the shown primitives whose documentation shares a word
    (4 letters or more) with the request, as a JSON list; deterministic."""
    system = request["messages"][0]["content"]
    match = _REQUEST.search(last_user_message(request))
    words = {w for w in re.findall(r"[a-z]{4,}", (match.group(1) if match else "").lower())}
    picked = [name for name, doc in _STUB.findall(system) if words & set(re.findall(r"[a-z]{4,}", doc.lower()))]
    return Reply(content=json.dumps(picked), prompt_tokens=30, completion_tokens=len(picked) + 2)


@pytest.fixture(scope="module")
def llm_server():
    with FakeOpenAIServer(responder=picking_responder) as server:
        yield server


def _spec(name):
    return {"type": name, **OFFLINE_PARAMS.get(name, {})}


def _fitted(name, library, tasks, train=None):
    """The retriever ``name`` with its offline parameters, fitted on ``train`` (default the
    first six ``tasks``), handed the gold sets of ``tasks`` if it sees gold."""
    retriever = build(_spec(name))
    assert isinstance(retriever, Retriever)
    if hasattr(retriever, "set_encoder"):
        retriever.set_encoder(fake_encoder)
    retriever.fit(library, tasks[:6] if train is None else train)
    if isinstance(retriever, SeesGold):
        retriever.set_gold({t.id: t.gold for t in tasks})
    return retriever


def server_params(server):
    """Parameters of an LLM retriever talking to the scripted server."""
    return {"model": "m", "base_url": server.base_url, "api_key": "test"}


@pytest.fixture(params=available("retriever"))
def name(request, monkeypatch):
    if request.param in TRAINED:
        pytest.importorskip("sentence_transformers")
    if request.param.startswith("aspera_"):  # ASPERA's selection: its requests are rendered by its own code
        request.getfixturevalue("aspera_src")
    if request.param == "aspera_local_selector":
        request.getfixturevalue("stand_in_local_server")
    if "base_url" in inspect.signature(resolve(request.param)).parameters:  # it calls an LLM
        monkeypatch.setitem(OFFLINE_PARAMS, request.param, server_params(request.getfixturevalue("llm_server")))
    if request.param == "local_selector":
        request.getfixturevalue("stand_in_local_server")
    return request.param


@pytest.fixture()
def stand_in_local_server(llm_server, monkeypatch):
    """The local model's server replaced by the scripted one."""
    from types import SimpleNamespace

    from primsel.llm import local

    monkeypatch.setattr(local, "resolve_gguf", lambda gguf=None, **kw: local.PreparedModel(
        gguf=Path("stand-in.gguf"), name="stand-in", digest="0" * 64))
    monkeypatch.setattr(local, "shared_server",
                        lambda model, settings, echo=None: SimpleNamespace(base_url=llm_server.base_url))


def _registered_names_in_the_user_guide():
    """The names in backticks of the user guide's "Registered names" paragraph."""
    text = (ROOT / "docs" / "user-guide.md").read_text(encoding="utf-8")
    start = text.index("Registered names")
    return set(re.findall(r"`([^`]+)`", text[start:text.index("\n\n", start)]))


def test_every_registered_retriever_is_a_class_of_the_retrieval_package():
    # classes other test modules register are unregistered after their tests
    for registered in available("retriever"):
        cls = resolve(registered)
        assert inspect.isclass(cls) and cls.__module__.startswith("primsel.retrieval."), (registered, cls)


def test_every_registered_retriever_is_named_in_the_user_guide():
    listed = _registered_names_in_the_user_guide()
    assert {"bm25", "oracle", "random"} <= listed  # the paragraph is found
    assert [n for n in available("retriever") if n not in listed] == []


def test_importing_the_package_loads_no_retriever_and_building_one_loads_its_module_only():
    code = ("import sys, primsel.retrieval, primsel.registry\n"
            "names = primsel.registry.available()\n"
            "def loaded(): return sorted(m for m in ('bm25', 'dense', 'learned', 'finetune', 'tfidf', 'hybrid') "
            "if 'primsel.retrieval.' + m in sys.modules)\n"
            "print(loaded(), 'bm25' in names and 'finetuned' in names)\n"
            "primsel.registry.build('bm25')\n"
            "print(loaded())\n"
            "print(sorted(m for m in ('torch', 'faiss', 'sentence_transformers', 'transformers', 'openai') "
            "if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[] True\n['bm25']\n[]\n"


def _registered_in_the_folder() -> dict[str, dict[str, str]]:
    """Kind -> name -> module, read from the ``@register(...)`` decorators of the package's modules."""
    found: dict[str, dict[str, str]] = {"retriever": {}, "selector": {}}
    for module in sorted(m.name for m in pkgutil.iter_modules(primsel.retrieval.__path__)):
        tree = ast.parse((Path(primsel.retrieval.__path__[0]) / f"{module}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for decorator in node.decorator_list:
                    if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == "register":
                        args = [a.value for a in decorator.args]
                        kind = args[1] if len(args) > 1 else "retriever"
                        for keyword in decorator.keywords:
                            if keyword.arg == "kind":
                                kind = keyword.value.value
                        found[kind][args[0]] = module
    return found


def test_the_table_of_modules_names_every_registered_class_of_the_folder():
    assert primsel.retrieval.COMPONENT_MODULES == _registered_in_the_folder()
    assert primsel.retrieval.COMPONENT_MODULES["retriever"]["knn"] == "learned"  # the scan finds the decorators


def test_constructor_parameters_are_json(name):
    retriever = build(_spec(name))
    params = retriever.get_params() if hasattr(retriever, "get_params") else {}
    assert json.loads(json.dumps(params)) == params


def test_parameters_round_trip_through_a_specification(name):
    retriever = build(_spec(name))
    again = build({"type": name, **retriever.get_params()})
    assert type(again) is type(retriever) and again.get_params() == retriever.get_params()
    assert set(retriever.get_params()) <= set(inspect.signature(type(retriever)).parameters)


def test_a_retriever_that_does_not_declare_learning_ignores_its_training_tasks(name, small_library, small_tasks):
    # a retriever that is not LearnsFromTasks is fitted once on every task (not cross-validated):
    # its scores must not depend on the tasks it is fitted on
    if isinstance(build(_spec(name)), LearnsFromTasks):
        pytest.skip("declares learns_from_tasks: cross-validated, so it may use its training tasks")
    queries = {t.id: t.query for t in small_tasks}
    first = _fitted(name, small_library, small_tasks, train=small_tasks[:6]).search(queries, 100)
    other = _fitted(name, small_library, small_tasks, train=small_tasks[6:]).search(queries, 100)
    assert first == other


def test_a_hybrid_learns_when_a_member_does(small_library, small_tasks):
    assert isinstance(build({"type": "hybrid", "members": ["bm25", "prior"]}), LearnsFromTasks)
    lexical = {"type": "hybrid", "members": ["bm25", "tfidf"]}
    assert not isinstance(build(lexical), LearnsFromTasks)
    queries = {t.id: t.query for t in small_tasks}
    runs = [build(lexical).fit(small_library, train).search(queries, 100) for train in (small_tasks[:6], small_tasks[6:])]
    assert runs[0] == runs[1]


def test_k_above_library_size_ranks_the_whole_library(name, small_library, small_tasks):
    queries = {t.id: t.query for t in small_tasks[6:]}
    run = _fitted(name, small_library, small_tasks).search(queries, len(small_library) + 7)
    assert list(run) == list(queries)
    for scores in run.values():
        assert sorted(scores) == sorted(small_library)  # exactly the library, no duplicates


def test_scores_descend_with_ties_broken_by_id(name, small_library, small_tasks):
    run = _fitted(name, small_library, small_tasks).search({t.id: t.query for t in small_tasks}, 100)
    for scores in run.values():
        items = list(scores.items())
        assert items == sorted(items, key=lambda item: (-item[1], item[0]))


def test_k_cuts_the_full_ranking(name, small_library, small_tasks):
    retriever = _fitted(name, small_library, small_tasks)
    queries = {"7": small_tasks[6].query}
    full = retriever.search(queries, 100)["7"]
    top = retriever.search(queries, 3)["7"]
    assert list(top) == list(full)[:3]


def test_empty_query_ranks_by_id_with_zero_scores(name, small_library, small_tasks):
    run = _fitted(name, small_library, small_tasks).search({"7": ""}, 100)
    assert list(run["7"]) == sorted(small_library)
    assert set(run["7"].values()) == {0.0}


@pytest.mark.parametrize("k", [0, -3])
def test_non_positive_k_is_an_error(name, small_library, small_tasks, k):
    with pytest.raises(ValueError, match="k must be"):
        _fitted(name, small_library, small_tasks).search({"1": "book a room"}, k)


def test_search_is_deterministic(name, small_library, small_tasks):
    queries = {t.id: t.query for t in small_tasks}
    a = _fitted(name, small_library, small_tasks).search(queries, 4)
    b = _fitted(name, small_library, small_tasks).search(dict(reversed(queries.items())), 4)
    assert a == b


def test_llm_selector_against_the_scripted_server_reports_usage_for_every_query(llm_server, monkeypatch,
                                                                              small_library, small_tasks):
    monkeypatch.setitem(OFFLINE_PARAMS, "llm_selector", server_params(llm_server))
    retriever = _fitted("llm_selector", small_library, small_tasks)
    assert isinstance(retriever, ReportsUsage)
    queries = {t.id: t.query for t in small_tasks}
    run = retriever.search(queries, 3)
    # "book a meeting room for tomorrow": the scripted model picks the three rooms primitives
    # (their documentation says "meeting room"), none of the calendar's
    assert run["1"] == {"rooms.Room": 1.0, "rooms.Slot": 1.0, "rooms.book_room": 1.0}
    usage = retriever.usage()
    assert set(usage) == set(queries)
    # one request per module of the library (two here), 30 prompt tokens each
    assert all(u["calls"] == 2 and u["prompt_tokens"] == 60 for u in usage.values())


def test_a_lone_surrogate_in_a_query_is_read_as_its_escape(name, small_library, small_tasks):
    """UTF-8 cannot encode a lone surrogate (an encoder's digest of the text, a tokenizer and an
    HTTP request fail on it): every retriever ranks the query as the text of its escape."""
    retriever = _fitted(name, small_library, small_tasks)
    query = small_tasks[6].query
    assert retriever.search({"7": f"{query} \udc00"}, 5) == retriever.search({"7": f"{query} \\udc00"}, 5)


@pytest.mark.parametrize("trained", sorted(TRAINED))
def test_a_lone_surrogate_in_a_training_query_is_read_as_its_escape(trained, small_library, small_tasks):
    """The retrievers that train a transformer on the training tasks' queries take one too."""
    pytest.importorskip("sentence_transformers")
    from dataclasses import replace

    train = [replace(t, query=f"{t.query} \udc00") if i == 0 else t for i, t in enumerate(small_tasks[:6])]
    escaped = [replace(t, query=f"{t.query} \\udc00") if i == 0 else t for i, t in enumerate(small_tasks[:6])]
    queries = {"7": small_tasks[6].query}
    run = _fitted(trained, small_library, small_tasks, train=train).search(queries, 5)
    assert run == _fitted(trained, small_library, small_tasks, train=escaped).search(queries, 5)
