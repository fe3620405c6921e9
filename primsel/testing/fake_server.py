"""A scripted OpenAI-compatible chat-completions server on the loopback interface.

Tests and benchmarks start it in a background thread and point the real ``openai`` client at
:attr:`FakeOpenAIServer.base_url`. It needs only the standard library and never leaves
``127.0.0.1``.

The server answers ``POST /v1/chat/completions``. Each request is answered by the next scripted
:class:`Reply` (see :meth:`FakeOpenAIServer.push`), or, when the script is empty, by the
``responder`` callable given at construction (default: an empty completion). It counts requests,
keeps every parsed request body, and tracks the largest number of requests in flight at once.

Example
-------
>>> with FakeOpenAIServer(latency_s=0.2) as server:          # doctest: +SKIP
...     server.push(Reply(status=429, headers={"Retry-After": "1"}))
...     client = ChatClient(model="m", base_url=server.base_url, api_key="x")
...     client.complete([{"role": "user", "content": "hi"}])
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOpenAIServer", "Reply", "completion_body", "last_user_message", "pipeline_responder", "wrong_program"]


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    Parameters
    ----------
    content : the assistant message text (for status 200).
    status : HTTP status code.
    finish_reason : ``"stop"``, ``"length"``, ...
    headers : extra response headers (``{"Retry-After": "2"}``).
    body : a JSON body that replaces the default (completion or error body).
    raw : bytes sent as the body as they are (with ``Content-Type: application/json``), in
        place of any JSON body: ``b""``, ``b"  "``, cut JSON, a Latin-1 byte.
    error_code : for error statuses: the ``error.code`` and ``error.type`` of the body
        (``"insufficient_quota"``, ``"rate_limit_exceeded"``).
    delay_s : seconds to wait before answering (added to the server's latency).
    hang : never answer: hold the connection until the server closes.
    trickle_s : when > 0, send the whole answer (status line, headers and body) one byte at a
        time, this many seconds apart (a server that is slow but never silent for long).
    prompt_tokens, completion_tokens : the usage numbers reported.
    """

    content: str = ""
    status: int = 200
    finish_reason: str = "stop"
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Any = None
    raw: bytes | None = None
    error_code: str | None = None
    delay_s: float = 0.0
    hang: bool = False
    trickle_s: float = 0.0
    prompt_tokens: int = 10
    completion_tokens: int = 5


def completion_body(model: str, reply: Reply) -> dict[str, Any]:
    """The JSON body of a successful chat completion carrying ``reply``."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.content},
                "finish_reason": reply.finish_reason,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }


def last_user_message(request: Mapping[str, Any]) -> str:
    """Text of the last ``user`` message of a chat-completions request body ("" if none)."""
    for message in reversed(request.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content", "")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


class _Server(ThreadingHTTPServer):
    """A threading HTTP server whose listen backlog holds a burst of concurrent connections
    (the socketserver default of 5 resets connections when 16 clients connect at once)."""

    daemon_threads = True
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (a cancelled request, a deadline) is not an error of the server."""
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class FakeOpenAIServer:
    """A threaded HTTP server that plays scripted chat completions (a context manager).

    Parameters
    ----------
    responder : ``f(request_body: dict) -> Reply``, used when the script is empty; default
        answers with an empty completion.
    latency_s : seconds every answer waits before it is sent (simulated model latency).
    host : interface to bind; only loopback addresses are accepted.
    port : port to bind; 0 picks a free one.

    Attributes
    ----------
    requests : parsed JSON bodies of every chat request received, in arrival order.
    answered : number of answers (completions or errors) sent. An answer is counted, and stops
        being in flight, just before its first byte is written (so a client that has read it
        always finds it counted); a write that fails is uncounted.
    max_in_flight : the largest number of requests being handled at the same time.

    Raises
    ------
    ValueError : a non-loopback host.
    """

    def __init__(
        self,
        responder: Callable[[dict[str, Any]], Reply] | None = None,
        latency_s: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"the fake server binds loopback only, not {host!r}")
        self.responder = responder
        self.latency_s = float(latency_s)
        self.host = host
        self.port = port
        self.requests: list[dict[str, Any]] = []
        self.max_in_flight = 0
        self.answered = 0
        self._in_flight = 0
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- script -------------------------------------------------------------------------------
    def push(self, *replies: Reply) -> None:
        """Append replies to the script; each request consumes one, in order."""
        with self._lock:
            self._script.extend(replies)

    @property
    def request_count(self) -> int:
        """Number of chat requests received so far."""
        with self._lock:
            return len(self.requests)

    def reset_counters(self) -> None:
        """Forget the recorded requests, the answer count and the in-flight maximum."""
        with self._lock:
            self.requests.clear()
            self.max_in_flight = 0
            self.answered = 0

    def stats(self) -> dict[str, int]:
        """``requests`` (received), ``answered`` (sent, see the class), ``in_flight`` (received,
        not yet answered) and ``max_in_flight``."""
        with self._lock:
            return {"requests": len(self.requests), "answered": self.answered, "in_flight": self._in_flight,
                    "max_in_flight": self.max_in_flight}

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, the value for ``base_url`` / ``OPENAI_BASE_URL``."""
        if self._httpd is None:
            raise RuntimeError("the fake server is not started")
        port = self._httpd.server_address[1]
        return f"http://{self.host}:{port}/v1"

    def start(self) -> FakeOpenAIServer:
        """Bind an ephemeral port and serve in a daemon thread."""
        handler = _make_handler(self)
        self._httpd = _Server((self.host, self.port), handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Release hanging requests, stop serving and close the socket."""
        self._closing.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- request handling ---------------------------------------------------------------------
    def _next_reply(self, request: dict[str, Any]) -> Reply:
        with self._lock:
            if self._script:
                return self._script.popleft()
        if self.responder is not None:
            return self.responder(request)
        return Reply()

    def _enter(self, request: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(request)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self, answered: bool = False) -> None:
        with self._lock:
            self._in_flight -= 1
            self.answered += int(answered)


def _make_handler(  # noqa: C901 (a class of HTTP methods, which the count takes for one function)
    server: FakeOpenAIServer,
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # headers and body go out in separate writes; without TCP_NODELAY, Nagle's algorithm and
        # the client's delayed ACK would add tens of milliseconds to every answer
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence stderr
            return

        def _send_json(self, status: int, body: Any, headers: Mapping[str, str], trickle_s: float = 0.0) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
            if trickle_s > 0:
                self._trickle(status, data, headers, trickle_s)
                return
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _trickle(self, status: int, data: bytes, headers: Mapping[str, str], pause: float) -> None:
            lines = [f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}", "Content-Type: application/json",
                     f"Content-Length: {len(data)}", *(f"{k}: {v}" for k, v in headers.items())]
            raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data
            for i in range(len(raw)):
                if i and server._closing.wait(pause):
                    return
                self.wfile.write(raw[i:i + 1])
                self.wfile.flush()

        def _answer(self, status: int, body: Any, headers: Mapping[str, str], trickle_s: float = 0.0) -> None:
            # The counters change before the first byte goes out: a client that has read the
            # whole answer always sees it counted and no longer in flight. A failed write takes
            # the count back.
            server._leave(answered=True)
            try:
                self._send_json(status, body, headers, trickle_s)
            except OSError:
                with server._lock:
                    server.answered -= 1
                raise

        def do_POST(self) -> None:  # noqa: N802 - http.server naming
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}}, {})
                return
            try:
                request = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                self._send_json(400, {"error": {"message": "invalid JSON", "type": "invalid_request_error"}}, {})
                return
            server._enter(request)
            answering = False
            try:
                reply = server._next_reply(request)
                wait = server.latency_s + reply.delay_s
                if reply.hang:
                    server._closing.wait()
                    return
                if wait > 0 and server._closing.wait(wait):
                    return
                if reply.raw is not None:
                    body = reply.raw
                elif reply.body is not None:
                    body = reply.body
                elif reply.status == 200:
                    body = completion_body(str(request.get("model", "")), reply)
                else:
                    code = reply.error_code
                    body = {"error": {"message": f"scripted error {reply.status}", "type": code or "server_error", "code": code}}
                answering = True
            finally:
                if not answering:
                    server._leave()
            try:
                self._answer(reply.status, body, reply.headers, reply.trickle_s)
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler


_REQUEST_LINE = re.compile(r"^Request: (.*)$", re.MULTILINE)
_MODULE = re.compile(r"symbols of module `(\w+)`")


#: Modes of :func:`pipeline_responder`.
MODES = ("reference", "cut", "reflect")


def wrong_program(task: Any, library_names: Iterable[str]) -> str:
    """The wrong program the ``reflect`` mode of :func:`pipeline_responder` answers first: one
    faulty variant of the task's reference program (:func:`primsel.eval.faults.make_faults`,
    seed 0, one fault of each kind; the variant is picked by a hash of the task id), or, when
    no fault applies, the entry point doing nothing (``return None``). A variant may still pass
    (a fault the evaluation programs do not notice).

    Parameters
    ----------
    task : the :class:`primsel.types.Task`.
    library_names : names of the library's functions and classes.
    """
    import hashlib

    from primsel.eval.faults import make_faults

    faults = make_faults(task.id, task.program, frozenset(library_names)) if task.program.strip() else []
    if faults:
        pick = int(hashlib.sha256(task.id.encode("utf-8")).hexdigest(), 16) % len(faults)
        return faults[pick].program
    name = task.entry_point or "fulfil_request"
    return f"def {name}():\n    return None\n"


def _has_feedback(request: Mapping[str, Any]) -> bool:
    """True when a user message follows an assistant message (a reflection round's feedback)."""
    roles = [m.get("role") for m in request.get("messages", []) if isinstance(m, Mapping)]
    return "assistant" in roles and "user" in roles[roles.index("assistant"):]


def pipeline_responder(  # noqa: C901 (one answer per prompt template, each a branch of the closure)
    tasks: Iterable[Any], mode: str = "reference"
) -> Callable[[dict[str, Any]], Reply]:
    """A responder that answers primsel's packaged prompts as a perfect model would.

    Selection prompts (template ``select``) get a JSON list of the task's gold primitives of
    the module asked about; generation prompts (templates ``ps``, ``cck``) get the task's
    reference program in a fenced block. The task is found by its query (the ``Request:`` line
    of a user message, else the longest query contained in one; the first user message that
    names a task decides).

    Parameters
    ----------
    tasks : :class:`primsel.types.Task` objects (with ``gold`` filled for selection answers).
    mode : ``"reference"``; ``"cut"``: every program is cut in the middle of a line, the
        fence left open and ``finish_reason`` set to ``"length"`` (a model that ran out of
        tokens); ``"reflect"``: a generation prompt without feedback gets a wrong program
        (:func:`wrong_program`), and one whose conversation holds feedback (a user message after
        an assistant message: a reflection round) gets the reference program.

    Raises
    ------
    ValueError : unknown mode.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(repr(m) for m in MODES)}")
    tasks = list(tasks)
    by_query = {t.query.strip(): t for t in tasks}
    names: frozenset[str] = frozenset()
    if mode == "reflect":
        from primsel.simulator.library import build_library

        names = frozenset(p.name for p in build_library().values())
    wrong: dict[str, str] = {}
    # the server answers from several threads, and ast.parse in two threads at once can fail in
    # CPython 3.11 ("SystemError: AST constructor recursion depth mismatch", CPython issue
    # gh-106905): faults are made one at a time, once per task
    making = threading.Lock()

    def wrong_answer(task: Any) -> str:
        with making:
            if task.id not in wrong:
                wrong[task.id] = wrong_program(task, names)
            return wrong[task.id]

    def find(user: str) -> Any:
        match = _REQUEST_LINE.search(user)
        if match and match.group(1).strip() in by_query:
            return by_query[match.group(1).strip()]
        hits = [q for q in by_query if q and q in user]
        return by_query[max(hits, key=len)] if hits else None

    def respond(request: dict[str, Any]) -> Reply:
        user = last_user_message(request)
        task = None
        for message in request.get("messages", []):
            text = message.get("content") if isinstance(message, Mapping) and message.get("role") == "user" else None
            task = find(text) if isinstance(text, str) else None
            if task is not None:
                break
        if task is None:
            return Reply(content="I cannot tell which request this is.")
        module = _MODULE.search(user)
        if module is not None:
            names_ = sorted(pid.split(".", 1)[1] for pid in task.gold if pid.split(".", 1)[0] == module.group(1))
            return Reply(content=json.dumps(names_))
        if mode == "reflect" and not _has_feedback(request):
            return Reply(content=f"Here is the program.\n\n```python\n{wrong_answer(task).strip()}\n```\n")
        program = task.program.strip() + "\n"
        if mode == "cut":
            middle = len(program) // 2
            line_end = program.find("\n", middle)
            cut = middle if line_end < 0 or line_end - middle < 3 else (middle + line_end) // 2
            return Reply(content=f"```python\n{program[:cut]}", finish_reason="length")
        return Reply(content=f"Here is the program.\n\n```python\n{program}```\n")

    return respond


#: ``--help`` text of the command (plain text).
CLI_DESCRIPTION = """\
A local OpenAI-compatible chat-completions endpoint (127.0.0.1 only) that answers primsel's
prompts as a perfect model would, to check a set-up offline: no key, no network, no cost.

It prints its base URL on stdout; export OPENAI_BASE_URL=<that URL> (any model name and key
will do), run primsel, and stop the server with Ctrl-C."""

CLI_EPILOG = """\
What it answers:
  selection prompts (one per module)  the task's gold primitives of that module, as a JSON list
  generation prompts                  the task's reference program, in a fenced code block
                                      (--mode reflect: a wrong program first, the reference once
                                      the conversation holds feedback)

So with --mode reference every task passes (success 1.0) whatever the retriever, and the LLM
selector picks exactly the gold primitives (recall 1.0): by construction, the figures check the
pipeline, not a model. The task of a prompt is found by its query, so --data must name the
run's task set (both default to $PRIMSEL_ASPER_BENCH, else the built-in tasks); a prompt whose
query it does not know gets an answer without a program (no_program).

example:
  python -m primsel.testing.fake_server --latency 0.2 --stats stats.json"""


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Serve :func:`pipeline_responder` answers for a task set until interrupted (``--help``:
    :data:`CLI_DESCRIPTION` and :data:`CLI_EPILOG`).

    ``python -m primsel.testing.fake_server [--data ARCHIVE] [--latency S] [--mode reference|cut]
    [--port N] [--stats FILE]``: prints the base URL (set ``OPENAI_BASE_URL`` to it), then
    serves until SIGINT or SIGTERM; with ``--stats`` it rewrites FILE five times a second with
    ``requests`` (received), ``answered`` (sent) and ``max_in_flight``.
    """
    import argparse
    import signal
    import sys

    from primsel.datasets import DatasetError, load_tasks
    from primsel.files import write_atomic
    from primsel.library import with_gold
    from primsel.simulator.library import build_library

    parser = argparse.ArgumentParser(prog="python -m primsel.testing.fake_server", description=CLI_DESCRIPTION,
                                     epilog=CLI_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", metavar="PATH",
                        help="Asper-Bench archive (default $PRIMSEL_ASPER_BENCH, else the built-in tasks); must "
                             "be the task set of the run you point at this server")
    parser.add_argument("--latency", type=float, default=0.0, metavar="S",
                        help="seconds to wait before each answer, to imitate a remote model (default 0)")
    parser.add_argument("--mode", choices=MODES, default="reference",
                        help="reference: answer with the complete reference program; cut: answer with the "
                             "program cut off mid-line and finish_reason 'length', as a model that ran out "
                             "of tokens; reflect: a wrong program first (a faulty variant of the reference), "
                             "the reference program once the conversation holds feedback (reflection "
                             "rounds) (default reference)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free port)")
    parser.add_argument("--stats", metavar="FILE",
                        help="JSON file of the request counters (requests received, answered, "
                             "max_in_flight), rewritten 5 times a second")
    args = parser.parse_args(argv)
    if not args.latency >= 0:
        parser.error(f"--latency must be >= 0 seconds, got {args.latency}")
    try:
        tasks = with_gold(load_tasks(args.data), build_library())
    except DatasetError as exc:
        parser.error(str(exc))
    server = FakeOpenAIServer(pipeline_responder(tasks, args.mode), latency_s=args.latency, port=args.port)
    signal.signal(signal.SIGTERM, _interrupt)
    server.start()
    print(server.base_url, flush=True)

    def write_stats() -> None:
        if args.stats:
            write_atomic(args.stats, json.dumps(server.stats()), durable=False)

    try:
        while True:
            write_stats()
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        write_stats()
    print(f"served {server.request_count} requests", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
