"""ChatClient against a real HTTP server on 127.0.0.1 (primsel.testing.fake_server)."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from email.utils import format_datetime
from datetime import datetime, timezone

import pytest

from primsel.llm.client import (
    ChatClient,
    EndpointUnreachableError,
    LLMError,
    LLMFatalError,
    QuotaExceededError,
    cache_key,
    parse_retry_after,
)
from primsel.files import cache_dir
from primsel.testing.fake_server import FakeOpenAIServer, Reply

#: Seconds an upper time bound allows beyond what it bounds: what a busy machine (load 15 on two
#: cores) adds to a few scheduling waits, and still far below what the bound tells apart.
LOADED_MARGIN_S = 5.0
#: How much later than the first the other quota answers come (far above LOADED_MARGIN_S).
LATER_ANSWERS_S = 8.0

HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture()
def server():
    with FakeOpenAIServer() as srv:
        yield srv


def make_client(server: FakeOpenAIServer, **kwargs) -> tuple[ChatClient, list[float]]:
    """A client of the fake server whose waits are recorded instead of slept."""
    params = {"model": "m", "base_url": server.base_url, "api_key": "test", "backoff_s": 0.01, "timeout_s": 5.0}
    params.update(kwargs)
    client = ChatClient(**params)
    waits: list[float] = []
    client._sleep = waits.append
    return client, waits


def test_answer_text_tokens_and_finish_reason(server):
    server.push(Reply(content="hi there", prompt_tokens=7, completion_tokens=3))
    client, _ = make_client(server)
    answer = client.complete(HELLO)
    assert (answer.text, answer.finish_reason, answer.prompt_tokens, answer.completion_tokens) == ("hi there", "stop", 7, 3)
    assert answer.cached is False and answer.retries == 0
    assert server.requests[0]["model"] == "m"
    assert server.requests[0]["messages"] == HELLO


def test_sampling_parameters_are_sent(server):
    client, _ = make_client(server, temperature=0.5, seed=7, max_tokens=99)
    client.complete(HELLO)
    sent = server.requests[0]
    assert (sent["temperature"], sent["seed"], sent["max_tokens"]) == (0.5, 7, 99)


def test_unset_parameters_are_not_sent(server):
    client, _ = make_client(server, temperature=None)
    client.complete(HELLO)
    assert not {"temperature", "seed", "max_tokens"} & set(server.requests[0])


def test_latency_is_included_in_seconds():
    with FakeOpenAIServer(latency_s=0.3) as srv:
        client, _ = make_client(srv)
        answer = client.complete(HELLO)
    # the server holds the answer 0.3 s, so the call cannot take less
    assert answer.seconds >= 0.3
    assert client.usage_summary()["seconds"] >= 0.3


def test_429_waits_as_long_as_retry_after_says(server):
    server.push(Reply(status=429, error_code="rate_limit_exceeded", headers={"Retry-After": "2"}), Reply(content="ok"))
    client, waits = make_client(server, backoff_s=30.0)
    answer = client.complete(HELLO)
    assert answer.text == "ok" and answer.retries == 1
    assert waits == [2.0]
    assert server.request_count == 2
    assert client.usage_summary()["retries"] == 1


def test_retry_after_http_date_is_honoured(server):
    later = datetime.now(timezone.utc).timestamp() + 120
    date = format_datetime(datetime.fromtimestamp(later, timezone.utc), usegmt=True)
    server.push(Reply(status=429, headers={"Retry-After": date}), Reply(content="ok"))
    client, waits = make_client(server)
    assert client.complete(HELLO).text == "ok"
    assert len(waits) == 1 and 100 <= waits[0] <= 120


def test_parse_retry_after_forms():
    now = 1_000_000.0
    date = format_datetime(datetime.fromtimestamp(now + 30, timezone.utc), usegmt=True)
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after": "0.5"}) == 0.5
    assert parse_retry_after({"Retry-After": date}, now=now) == 30.0
    assert parse_retry_after({"retry-after-ms": "1500", "Retry-After": "9"}) == 1.5
    assert parse_retry_after({"Retry-After": "-4"}) == 0.0
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None


def test_insufficient_quota_stops_after_one_request(server):
    server.push(Reply(status=429, error_code="insufficient_quota", headers={"Retry-After": "1"}))
    client, waits = make_client(server)
    with pytest.raises(QuotaExceededError, match="insufficient quota"):
        client.complete(HELLO)
    assert server.request_count == 1 and waits == []
    # the client refuses later calls without sending them
    with pytest.raises(QuotaExceededError):
        client.complete([{"role": "user", "content": "another"}])
    assert server.request_count == 1


def test_insufficient_quota_stops_complete_many(server):
    server.push(Reply(status=429, error_code="insufficient_quota"))
    client, _ = make_client(server, concurrency=1)
    batch = [[{"role": "user", "content": f"q{i}"}] for i in range(5)]
    with pytest.raises(QuotaExceededError):
        client.complete_many(batch)
    assert server.request_count == 1


def test_server_errors_are_retried_with_doubling_backoff(server):
    server.push(Reply(status=500), Reply(status=503), Reply(content="finally"))
    client, waits = make_client(server, backoff_s=0.1)
    answer = client.complete(HELLO)
    assert answer.text == "finally" and answer.retries == 2
    assert server.request_count == 3
    # backoff_s * 2**attempt, with jitter in [0.8, 1.0]
    assert 0.08 <= waits[0] <= 0.1 and 0.16 <= waits[1] <= 0.2


def test_retries_exhausted_is_an_llm_error(server):
    server.push(*[Reply(status=502)] * 3)
    client, waits = make_client(server, max_retries=2)
    with pytest.raises(LLMError, match="3 attempts"):
        client.complete(HELLO)
    assert server.request_count == 3 and len(waits) == 2
    assert client.usage_summary()["errors"] == 1


def test_bad_request_is_not_retried(server):
    server.push(Reply(status=400, error_code="context_length_exceeded"))
    client, waits = make_client(server)
    with pytest.raises(LLMError, match="400"):
        client.complete(HELLO)
    assert server.request_count == 1 and waits == []


@pytest.mark.parametrize("status", [401, 403, 404])
def test_auth_and_unknown_model_are_fatal(server, status):
    server.push(Reply(status=status))
    client, _ = make_client(server)
    with pytest.raises(LLMFatalError, match=str(status)):
        client.complete(HELLO)
    assert server.request_count == 1


def test_truncated_completion_reports_length(server):
    server.push(Reply(content="```python\ndef f():\n    x = (", finish_reason="length"))
    client, _ = make_client(server)
    answer = client.complete(HELLO)
    assert answer.finish_reason == "length"
    assert client.usage_summary()["truncated"] == 1


def test_request_that_never_answers_times_out_then_fails(server):
    server.push(Reply(hang=True), Reply(hang=True))
    client, waits = make_client(server, timeout_s=0.3, max_retries=1)
    with pytest.raises(LLMError, match="timeout"):
        client.complete(HELLO)
    assert server.request_count == 2 and len(waits) == 1


def test_timeout_then_success(server):
    server.push(Reply(hang=True), Reply(content="late but fine"))
    client, _ = make_client(server, timeout_s=0.3)
    assert client.complete(HELLO).text == "late but fine"
    assert server.request_count == 2


def test_cache_hit_makes_no_request(server):
    server.push(Reply(content="first"), Reply(content="second"))
    client, _ = make_client(server)
    assert client.complete(HELLO).text == "first"
    again, _ = make_client(server)  # a new client (a new run) with the same cache directory
    answer = again.complete(HELLO)
    assert answer.text == "first" and answer.cached is True
    assert server.request_count == 1
    assert again.usage_summary()["cache_hits"] == 1 and again.usage_summary()["requests"] == 0


def test_cache_key_includes_model_messages_and_parameters(server):
    client, _ = make_client(server, seed=1)
    other_seed, _ = make_client(server, seed=2)
    client.complete(HELLO)
    other_seed.complete(HELLO)
    client.complete([{"role": "user", "content": "hello!"}])
    assert server.request_count == 3
    assert cache_key("m", HELLO, {"seed": 1}) != cache_key("n", HELLO, {"seed": 1})
    assert cache_key("m", HELLO, {"a": 1, "b": 2}) == cache_key("m", HELLO, {"b": 2, "a": 1})


def test_cache_entries_are_whole_json_files(server):
    server.push(Reply(content="stored"))
    client, _ = make_client(server)
    client.complete(HELLO)
    files = list((cache_dir() / "llm").rglob("*"))
    entries = [f for f in files if f.is_file()]
    assert len(entries) == 1 and not entries[0].name.startswith(".tmp")
    entry = json.loads(entries[0].read_text())
    assert entry["response"]["text"] == "stored"
    assert entry["key"] == entries[0].stem == cache_key("m", HELLO, client.params)


def test_errors_are_not_cached(server):
    server.push(Reply(status=400), Reply(content="ok now"))
    client, _ = make_client(server)
    with pytest.raises(LLMError):
        client.complete(HELLO)
    assert client.complete(HELLO).text == "ok now"
    assert server.request_count == 2


def test_cache_can_be_disabled(server):
    client, _ = make_client(server, cache=False)
    client.complete(HELLO)
    client.complete(HELLO)
    assert server.request_count == 2


def test_complete_many_respects_concurrency_and_order():
    with FakeOpenAIServer(latency_s=0.2, responder=lambda req: Reply(content=req["messages"][0]["content"].upper())) as srv:
        client, _ = make_client(srv, concurrency=3)
        batch = [[{"role": "user", "content": f"q{i}"}] for i in range(12)]
        answers = client.complete_many(batch)
    assert [a.text for a in answers] == [f"Q{i}" for i in range(12)]
    assert srv.request_count == 12
    assert 2 <= srv.max_in_flight <= 3


def test_bound_holds_when_many_threads_share_one_client():
    with FakeOpenAIServer(latency_s=0.1) as srv:
        client, _ = make_client(srv, concurrency=2)
        threads = [
            threading.Thread(target=client.complete, args=([{"role": "user", "content": f"t{i}"}],))
            for i in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert srv.request_count == 8
    assert srv.max_in_flight <= 2


def test_complete_many_returns_per_request_errors(server):
    server.push(Reply(status=400))
    client, _ = make_client(server, concurrency=1)
    answers = client.complete_many([[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]])
    assert isinstance(answers[0], LLMError) and answers[1].text == ""


def test_missing_key_for_the_openai_endpoint_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("PRIMSEL_TEST_KEY", raising=False)
    client = ChatClient(model="m", api_key_env="PRIMSEL_TEST_KEY")
    with pytest.raises(LLMFatalError, match="PRIMSEL_TEST_KEY"):
        client.complete(HELLO)


def test_key_is_read_from_the_named_variable(monkeypatch):
    seen = []

    def responder(request):
        return Reply(content="ok")

    with FakeOpenAIServer(responder=responder) as srv:
        monkeypatch.setenv("MY_KEY", "sekret")
        client = ChatClient(model="m", base_url=srv.base_url, api_key_env="MY_KEY")
        client.complete(HELLO)
        seen.append(client._openai().api_key)
    assert seen == ["sekret"]


def test_base_url_defaults_to_the_environment(monkeypatch, server):
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    client = ChatClient(model="m", api_key="x")
    client.complete(HELLO)
    assert server.request_count == 1


@pytest.mark.parametrize(
    "kwargs",
    [{"model": ""}, {"timeout_s": 0}, {"timeout_s": float("nan")}, {"max_retries": -1}, {"concurrency": 0}],
)
def test_bad_settings_are_rejected(kwargs):
    params = {"model": "m", "base_url": "http://127.0.0.1:9/v1"}
    params.update(kwargs)
    with pytest.raises(ValueError):
        ChatClient(**params)


def test_answer_without_choices_is_an_llm_error(server):
    server.push(Reply(body={"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}))
    client, _ = make_client(server)
    with pytest.raises(LLMError, match="without choices"):
        client.complete(HELLO)
    assert client.usage_summary()["errors"] == 1


def _closed_port_url() -> str:
    """A loopback URL where nothing listens (a port bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_an_endpoint_that_cannot_be_reached_is_fatal_after_the_retries():
    url = _closed_port_url()
    client = ChatClient(model="m", base_url=url, api_key="test", max_retries=2, backoff_s=0.01)
    waits: list[float] = []
    client._sleep = waits.append
    with pytest.raises(EndpointUnreachableError, match="cannot connect to the LLM endpoint at " + url) as info:
        client.complete(HELLO)
    assert isinstance(info.value, LLMFatalError) and "3 attempts" in str(info.value)
    assert len(waits) == 2 and client.usage_summary()["requests"] == 3
    # every later call fails at once, without a request
    with pytest.raises(EndpointUnreachableError):
        client.complete([{"role": "user", "content": "another"}])
    assert client.usage_summary()["requests"] == 3


def test_an_unreachable_endpoint_stops_complete_many():
    client = ChatClient(model="m", base_url=_closed_port_url(), api_key="test", max_retries=0, concurrency=2)
    with pytest.raises(EndpointUnreachableError):
        client.complete_many([[{"role": "user", "content": str(i)}] for i in range(20)])
    assert client.usage_summary()["requests"] < 20


def test_a_connection_failure_then_an_answer_is_not_fatal():
    url = _closed_port_url()
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    client = ChatClient(model="m", base_url=url, api_key="test", max_retries=1, backoff_s=0.01)
    servers = []
    client._sleep = lambda delay: servers.append(FakeOpenAIServer(port=port).__enter__())  # the server comes up
    try:
        assert client.complete(HELLO).retries == 1
    finally:
        for srv in servers:
            srv.__exit__(None, None, None)
    assert len(servers) == 1 and servers[0].request_count == 1


def test_timeouts_are_not_connection_failures(server):
    server.push(Reply(hang=True), Reply(hang=True))
    client, _ = make_client(server, timeout_s=0.2, max_retries=1)
    with pytest.raises(LLMError) as info:
        client.complete(HELLO)
    assert not isinstance(info.value, LLMFatalError)


def test_cache_namespace_keeps_endpoints_apart(server):
    server.push(Reply(content="from a"), Reply(content="from b"))
    a, _ = make_client(server, cache_namespace="host-a")
    b, _ = make_client(server, cache_namespace="host-b")
    a_again, _ = make_client(server, cache_namespace="host-a")
    assert a.complete(HELLO).text == "from a"
    assert b.complete(HELLO).text == "from b"
    assert a_again.complete(HELLO).text == "from a" and server.request_count == 2
    # without a namespace the key is the one of earlier versions: model, messages, parameters
    payload = {"model": "m", "messages": HELLO, "params": {"seed": 1}}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert cache_key("m", HELLO, {"seed": 1}) == hashlib.sha256(text.encode()).hexdigest()
    assert cache_key("m", HELLO, {"seed": 1}, "x") != cache_key("m", HELLO, {"seed": 1})
    with pytest.raises(ValueError, match="cache_namespace"):
        ChatClient(model="m", cache_namespace=3)


def test_lone_surrogates_in_requests_and_answers_are_cached(server):
    odd = [{"role": "user", "content": "x" + chr(0xD800)}]
    server.push(Reply(content="y" + chr(0xDC00)))
    client, _ = make_client(server)
    assert client.complete(odd).text == "y" + chr(0xDC00)
    # UTF-8 cannot carry a lone surrogate: it is sent as the text of its escape
    assert server.requests[0]["messages"][0]["content"] == "x\\ud800"
    again, _ = make_client(server)
    answer = again.complete(odd)
    assert answer.cached is True and answer.text == "y" + chr(0xDC00)


# -- deadlines, backoff bound, no dispatch after a fatal answer (wall times measured on a 2-core
# machine shared with other jobs, load average 8-14; the bounds leave room for that) -------------

def _timed_client(server: FakeOpenAIServer, **kwargs) -> tuple[ChatClient, list[float]]:
    """A client whose backoff waits are really slept and also recorded, warmed up by one answered
    request (the SDK client and the connection are set up before anything is timed)."""
    params = {"model": "m", "base_url": server.base_url, "api_key": "test", "cache": False}
    params.update(kwargs)
    client = ChatClient(**params)
    waits: list[float] = []

    def sleep(delay: float) -> None:
        waits.append(delay)
        time.sleep(delay)

    client._sleep = sleep
    server.push(Reply(content="warm"))
    assert client.complete([{"role": "user", "content": "warm up"}]).text == "warm"
    return client, waits


def test_a_trickling_answer_is_cut_at_the_deadline_of_the_attempt(server):
    # the whole answer (about 400 bytes) comes one byte every 0.5 s: 200 s in all. With timeout_s
    # per read (before), the request took all of it (measured 202 s); now the attempt ends at its
    # 1 s deadline (measured 1.002-1.015 s over 5 runs)
    client, _ = _timed_client(server, timeout_s=1.0, max_retries=0)
    server.push(Reply(content="x" * 40, trickle_s=0.5))
    begin = time.perf_counter()
    with pytest.raises(LLMError, match="timeout: no complete answer within the deadline of 1 s"):
        client.complete(HELLO)
    elapsed = time.perf_counter() - begin
    assert 1.0 <= elapsed <= 1.5
    assert server.request_count == 2


def test_a_trickling_answer_with_a_retry_ends_within_the_deadlines_plus_the_backoff(server):
    # two attempts of 1 s and one backoff wait in [0.4, 0.5] s (measured 2.43-2.57 s in all, at most
    # 0.08 s more than the attempts and the wait)
    client, waits = _timed_client(server, timeout_s=1.0, max_retries=1, backoff_s=0.5)
    server.push(Reply(content="x" * 40, trickle_s=0.5), Reply(content="x" * 40, trickle_s=0.5))
    begin = time.perf_counter()
    with pytest.raises(LLMError, match="gave up after 2 attempts"):
        client.complete(HELLO)
    elapsed = time.perf_counter() - begin
    assert len(waits) == 1 and 0.4 <= waits[0] <= 0.5
    assert client.max_request_seconds == 2 * 1.0 + 0.5
    # each trickled answer would take 20 s uncut; the upper margin holds on a machine at load 15
    assert 2.0 + waits[0] <= elapsed <= 2.0 + waits[0] + LOADED_MARGIN_S


def test_retries_of_a_silent_server_stay_within_the_documented_bound(server):
    # timeout 1 s, 2 retries, backoff 1 s: waits of 1 and 2 s times [0.8, 1.0], so at most
    # (2 + 1) x 1 + (1 + 2) = 6 s (measured 5.55-5.93 s over 5 runs, depending on the drawn waits;
    # at most 0.05 s more than the three deadlines and the waits)
    client, waits = _timed_client(server, timeout_s=1.0, max_retries=2, backoff_s=1.0)
    server.push(Reply(hang=True), Reply(hang=True), Reply(hang=True))
    begin = time.perf_counter()
    with pytest.raises(LLMError, match="gave up after 3 attempts"):
        client.complete(HELLO)
    elapsed = time.perf_counter() - begin
    assert client.max_request_seconds == 6.0
    assert len(waits) == 2 and 0.8 <= waits[0] <= 1.0 and 1.6 <= waits[1] <= 2.0
    # a silent server would hold each attempt forever; the upper margin holds on a machine at load 15
    assert 3.0 + sum(waits) <= elapsed <= 3.0 + sum(waits) + LOADED_MARGIN_S


def _quota_after_all_arrived(srv_box: list, expected: int):
    """A responder holding every answer until ``expected`` requests have arrived; then the first
    answer is ``insufficient_quota`` at once and the others the same :data:`LATER_ANSWERS_S` later."""
    lock = threading.Lock()
    first = []

    def respond(request):
        deadline = time.monotonic() + 10
        while srv_box[0].request_count < expected and time.monotonic() < deadline:
            time.sleep(0.005)
        with lock:
            delay = LATER_ANSWERS_S if first else 0.0
            first.append(1)
        return Reply(status=429, error_code="insufficient_quota", delay_s=delay)

    return respond


def test_complete_many_sends_nothing_after_the_first_insufficient_quota():
    box: list = []
    with FakeOpenAIServer(responder=_quota_after_all_arrived(box, 8)) as srv:
        box.append(srv)
        client = ChatClient(model="m", base_url=srv.base_url, api_key="t", concurrency=8)
        begin = time.perf_counter()
        with pytest.raises(QuotaExceededError):
            client.complete_many([[{"role": "user", "content": f"q{i}"}] for i in range(40)])
        raised = time.perf_counter() - begin
        time.sleep(1.0)
        # the 8 requests in flight when the first answer came, and none after it
        assert srv.request_count == 8
    # raised on the first answer, without waiting for the others (measured 0.07-0.23 s from the call,
    # the 8 requests' arrival included, on an idle machine)
    assert raised < LATER_ANSWERS_S - 1.0


def test_threads_waiting_for_a_slot_send_nothing_after_the_first_insufficient_quota():
    # 16 threads share a client with 8 slots: 8 requests go out, 8 threads wait for a slot. Before,
    # a waiting thread had checked for a fatal answer before it waited, and sent its request
    # once a slot was free (16 requests in all)
    box: list = []
    errors = []

    def call(i: int) -> None:
        try:
            client.complete([{"role": "user", "content": f"t{i}"}])
        except QuotaExceededError as exc:
            errors.append(exc)

    with FakeOpenAIServer(responder=_quota_after_all_arrived(box, 8)) as srv:
        box.append(srv)
        client = ChatClient(model="m", base_url=srv.base_url, api_key="t", concurrency=8)
        threads = [threading.Thread(target=call, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        time.sleep(0.5)
        assert srv.request_count == 8
    assert len(errors) == 16


def test_caches_disabled_neither_reads_nor_writes_answers(server):
    from primsel.files import caches_disabled

    server.push(Reply(content="first"), Reply(content="second"), Reply(content="third"))
    client, _ = make_client(server)
    assert client.complete(HELLO).text == "first"
    with caches_disabled():
        assert client.complete(HELLO).text == "second"          # the cached answer is not read
        assert client.complete([{"role": "user", "content": "new"}]).text == "third"
    assert client.complete(HELLO).text == "first"              # nor replaced
    assert server.request_count == 3
    assert len([f for f in (cache_dir() / "llm").rglob("*.json")]) == 1


# -- malformed answers and transient statuses --------------------------------------------------

MALFORMED = [
    (b"", "the body is empty"),
    (b"  \n", "the body is only white space"),
    (b'{"choices": [{"message": {"content": "hi', "cut off after 40 characters"),
    (b'{"choices": [}', "not valid JSON: Expecting value: line 1 column 14"),
    (b'{"choices": [{"message": {"content": "caf\xe9"}}]}', r"not UTF-8 \(byte 0xe9 at offset 41\)"),
]


@pytest.mark.parametrize("raw, problem", MALFORMED)
def test_a_malformed_answer_is_retried_then_answered(server, raw, problem):
    server.push(Reply(raw=raw), Reply(content="ok"))
    client, waits = make_client(server)
    answer = client.complete(HELLO)
    assert answer.text == "ok" and answer.retries == 1
    assert server.request_count == 2 and len(waits) == 1


@pytest.mark.parametrize("raw, problem", MALFORMED)
def test_a_malformed_answer_after_the_retries_is_an_llm_error_naming_the_problem(server, raw, problem):
    server.push(*[Reply(raw=raw)] * 2)
    client, _ = make_client(server, max_retries=1)
    with pytest.raises(LLMError, match=f"gave up after 2 attempts; last: malformed answer: .*{problem}"):
        client.complete(HELLO)
    assert client.usage_summary()["errors"] == 1


def test_malformed_answers_are_per_request_errors_of_complete_many(server):
    # the answers come in sending order (concurrency 1): requests 1 and 3 get broken bodies
    server.push(Reply(content="a"), Reply(raw=b""), Reply(content="c"), Reply(raw=b"\xff"))
    client, _ = make_client(server, max_retries=0, concurrency=1)
    out = client.complete_many([[{"role": "user", "content": str(i)}] for i in range(4)])
    assert [o.text if not isinstance(o, LLMError) else "error" for o in out] == ["a", "error", "c", "error"]
    assert "the body is empty" in str(out[1]) and "not UTF-8 (byte 0xff at offset 0)" in str(out[3])


def test_a_json_body_that_is_not_an_object_is_malformed(server):
    server.push(Reply(body=["not", "an", "object"]))
    client, _ = make_client(server, max_retries=0)
    with pytest.raises(LLMError, match="malformed answer: the body is not a JSON object"):
        client.complete(HELLO)


def test_content_given_as_a_list_of_parts_is_joined(server):
    parts = [{"type": "text", "text": "def f():\n"}, {"type": "image_url", "image_url": {"url": "x"}},
             {"type": "text", "text": "    return 1\n"}]
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": parts}, "finish_reason": "stop"}]}
    server.push(Reply(body=body))
    client, _ = make_client(server)
    answer = client.complete(HELLO)
    assert answer.text == "def f():\n    return 1\n"
    assert isinstance(answer.text, str)


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529])
def test_each_transient_status_is_retried(server, status):
    server.push(Reply(status=status), Reply(content="ok"))
    client, waits = make_client(server)
    assert client.complete(HELLO).text == "ok"
    assert server.request_count == 2 and len(waits) == 1


@pytest.mark.parametrize("status", [400, 422, 501, 505, 511, 525, 526])
def test_a_status_that_every_attempt_would_repeat_is_not_retried(server, status):
    server.push(Reply(status=status), Reply(content="ok"))
    client, waits = make_client(server)
    with pytest.raises(LLMError, match=f"rejected with HTTP {status}"):
        client.complete(HELLO)
    assert server.request_count == 1 and waits == []


@pytest.mark.parametrize(("status", "body"), [
    # llama.cpp, when the context fills
    (500, {"error": {"code": 500, "message": "Context size has been exceeded.", "type": "server_error"}}),
    # xinference serving vLLM
    (500, {"detail": "[address=0.0.0.0:41237, pid=7] The decoder prompt (length 9000) is longer than the maximum "
                     "model length of 8192. Make sure that `max_model_len` is no smaller than the number of text "
                     "tokens."}),
    # vLLM V1
    (400, {"object": "error", "message": "Prompt length of 9000 is longer than the maximum model length of 8192.",
           "type": "BadRequestError", "param": None, "code": 400}),
])
def test_context_overflow_in_other_servers_words_is_not_retried(server, status, body):
    """Each is a prompt longer than the context: the same request fails again, so it is sent once and
    ends as the context-overflow error (a task's PromptTooLong), not as an LLM error after retries."""
    from primsel.llm.completion import PromptTooLongError

    server.push(*[Reply(status=status, body=body)] * 3)
    client, waits = make_client(server, max_retries=2)
    with pytest.raises(PromptTooLongError, match="the prompt is longer than the model's context"):
        client.complete(HELLO)
    assert server.request_count == 1 and waits == []
    assert client.usage_summary()["errors"] == 1


def test_an_answer_cut_by_a_full_context_is_served_only_under_the_same_window(server):
    """4000 prompt tokens and 96 answer tokens fill a 4096-token window before max_tokens (512): the
    cut answer is cached with its window; a client of a larger window asks again, one of the same
    window gets it from the cache. The key is the one without a window."""
    server.push(Reply(content="def f():\n    return (", finish_reason="length", prompt_tokens=4000,
                      completion_tokens=96),
                Reply(content="def f():\n    return 1\n", prompt_tokens=4000, completion_tokens=9))
    small, _ = make_client(server, max_tokens=512, context_tokens=4096)
    cut = small.complete(HELLO)
    assert (cut.finish_reason, cut.cached, server.request_count) == ("length", False, 1)
    assert cut.key == cache_key("m", HELLO, make_client(server, max_tokens=512)[0].params)  # no window in it
    entry = json.loads((cache_dir() / "llm" / cut.key[:2] / f"{cut.key}.json").read_text())
    assert entry["response"]["n_ctx"] == 4096
    again = make_client(server, max_tokens=512, context_tokens=4096)[0].complete(HELLO)
    assert (again.text, again.cached, server.request_count) == (cut.text, True, 1)
    larger, _ = make_client(server, max_tokens=512, context_tokens=8192)
    whole = larger.complete(HELLO)
    assert (whole.text, whole.finish_reason, whole.cached, server.request_count) == (
        "def f():\n    return 1\n", "stop", False, 2)
    # the whole answer replaced the cut one, and is served to every window
    assert small.complete(HELLO).text == whole.text and server.request_count == 2


def test_a_cut_answer_cached_without_its_window_is_served_when_it_filled_this_one(server):
    """Entries written before windows were recorded: a cut answer whose prompt and answer fill the
    client's window was cut by it; under a larger window it is asked again."""
    server.push(Reply(content="whole", prompt_tokens=4000, completion_tokens=5))
    key = cache_key("m", HELLO, make_client(server, max_tokens=512)[0].params)
    path = cache_dir() / "llm" / key[:2] / f"{key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": key, "response": {"text": "cut", "finish_reason": "length",
                                                         "prompt_tokens": 4000, "completion_tokens": 95}}))
    assert make_client(server, max_tokens=512, context_tokens=4096)[0].complete(HELLO).text == "cut"
    assert make_client(server, max_tokens=512)[0].complete(HELLO).text == "cut"  # window not known
    assert server.request_count == 0
    assert make_client(server, max_tokens=512, context_tokens=8192)[0].complete(HELLO).text == "whole"
    assert server.request_count == 1


def test_an_answer_cut_by_max_tokens_is_served_under_any_window(server):
    server.push(Reply(content="cut at max_tokens", finish_reason="length", prompt_tokens=100, completion_tokens=64))
    make_client(server, max_tokens=64, context_tokens=4096)[0].complete(HELLO)
    answer = make_client(server, max_tokens=64, context_tokens=8192)[0].complete(HELLO)
    assert (answer.text, answer.cached, server.request_count) == ("cut at max_tokens", True, 1)
