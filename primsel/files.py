"""Files primsel writes: the cache directory, atomic writes, canonical JSON and JSONL.

Every cache lives below :func:`cache_dir` (``llm/`` answers, ``embeddings/`` vectors,
``experiments/retrieval/`` rankings, ``digests/`` file digests), and every cache asks
:func:`caches_enabled` before it reads or writes: inside :func:`caches_disabled` (``primsel run
--no-cache``) nothing is read from or written to any of them. Every file primsel writes goes
through :func:`write_atomic`, so a reader (or a run killed midway) never sees part of a file.

JSON text written here keeps any Python string: UTF-8 cannot encode a lone surrogate (it can come
from a program's exception message), so such a character is written as its ``\\udXXXX`` escape,
which a JSON reader turns back into the same string.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from primsel.types import to_json

#: Environment variable naming the cache directory.
CACHE_ENV = "PRIMSEL_CACHE_DIR"


def encodable_text(text: str) -> str:
    """``text``, with each lone surrogate (which UTF-8 cannot encode, so no request, tokenizer or
    digest of UTF-8 bytes can take it) replaced by the text of its ``\\udXXXX`` escape; any
    other text is returned as it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="backslashreplace").decode("utf-8")
    return text


def cache_dir() -> Path:
    """The primsel cache directory: ``$PRIMSEL_CACHE_DIR`` (``~`` expanded) or ``~/.cache/primsel``.

    Read at every call, so a change of the variable takes effect at once.
    """
    value = os.environ.get(CACHE_ENV)
    return Path(value).expanduser() if value else Path.home() / ".cache" / "primsel"


_disabled = 0
_disabled_lock = threading.Lock()


def caches_enabled() -> bool:
    """False while a :func:`caches_disabled` block is active (in any thread), else True."""
    return _disabled == 0


@contextlib.contextmanager
def caches_disabled() -> Iterator[None]:
    """Bypass every on-disk cache of primsel while the block runs: LLM answers, embeddings,
    retrieval rankings and file digests are neither read nor written. Process-wide (every
    thread), nestable; ``primsel run --no-cache`` runs inside it."""
    global _disabled
    with _disabled_lock:
        _disabled += 1
    try:
        yield
    finally:
        with _disabled_lock:
            _disabled -= 1


#: A digest remembered for a file whose modification time is less than this many seconds old
#: could miss a change made within the file system's timestamp resolution, so such files are
#: hashed again at every call (git's "racily clean" rule).
RACY_SECONDS = 2.0

_file_digests: dict[str, tuple[tuple[int, ...], str]] = {}
_file_digests_lock = threading.Lock()


def file_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 (hex) of a file's bytes, remembered by path, size, modification and change time.

    The digest is kept in memory and, while caches are enabled, below ``digests/`` of
    :func:`cache_dir`; it is read again from the file whenever its size, ``mtime``, ``ctime``
    or inode differs from the remembered ones, or its ``mtime`` is less than
    :data:`RACY_SECONDS` old (a change within the timestamp resolution would keep every stat
    field). Symbolic links are followed.

    Raises
    ------
    OSError : the file cannot be read.
    """
    real = os.path.realpath(path)
    st = os.stat(real)
    stamp = _stamp(st)
    settled = time.time() - st.st_mtime >= RACY_SECONDS
    entry_path = cache_dir() / "digests" / f"{hashlib.sha256(real.encode('utf-8', 'surrogatepass')).hexdigest()}.json"
    if settled:
        with _file_digests_lock:
            known = _file_digests.get(real)
        if known is not None and known[0] == stamp:
            return known[1]
        if caches_enabled():
            try:
                entry = json.loads(entry_path.read_text(encoding="utf-8"))
                if entry.get("path") == real and tuple(entry.get("stamp", ())) == stamp:
                    sha = str(entry["sha256"])
                    with _file_digests_lock:
                        _file_digests[real] = (stamp, sha)
                    return sha
            except (OSError, ValueError, KeyError, TypeError):
                pass
    sha = hashlib.sha256()
    with open(real, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            sha.update(block)
    value = sha.hexdigest()
    if settled and _stamp(os.stat(real)) == stamp:  # unchanged while it was read
        with _file_digests_lock:
            _file_digests[real] = (stamp, value)
        if caches_enabled():
            try:
                write_atomic(entry_path, json.dumps({"path": real, "stamp": list(stamp), "sha256": value}),
                             durable=False)
            except OSError:
                pass
    return value


def _stamp(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def write_atomic(path: str | os.PathLike[str], data: str | bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename.

    Parameters
    ----------
    path : the file; its parent directories are created.
    data : text (encoded as UTF-8, a lone surrogate as its ``\\udXXXX`` escape) or bytes.
    durable : flush the file to disk (``fsync``) before the rename; caches, which lose
        nothing but time when an entry is lost, pass False.

    The file gets the permissions a plain ``open(path, "w")`` gives: ``0o666`` less the
    process's umask (``0o644`` under umask 022), not the ``0o600`` of the temporary file.

    Raises
    ------
    OSError : the directory cannot be created or the file written; the temporary file is
        removed and ``path`` is left as it was.
    """
    path = Path(path)
    raw = data.encode("utf-8", errors="backslashreplace") if isinstance(data, str) else data
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_umask_lock = threading.Lock()


def current_umask() -> int:
    """The process's file mode creation mask (``0o022`` typically).

    Read from ``/proc/self/status`` where the kernel gives it; elsewhere set and restored at
    once (under a lock, so that threads of primsel never see the temporary value).
    """
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _umask_lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def canonical_json(obj: Any) -> str:
    """Canonical JSON text of ``obj``: sorted keys, no whitespace, characters kept as they are."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(obj: Any) -> str:
    """sha256 (hex) of :func:`canonical_json` of ``obj`` (a lone surrogate hashed as its
    ``surrogatepass`` bytes): the key of every cache and the source of cell ids."""
    return hashlib.sha256(canonical_json(obj).encode("utf-8", errors="surrogatepass")).hexdigest()


def dumps_json(obj: Any) -> str:
    """Readable JSON text of ``obj`` (primsel dataclasses converted): indented, sorted keys,
    one final newline."""
    return json.dumps(to_json(obj), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def dumps_jsonl(rows: Iterable[Mapping[str, Any]]) -> str:
    """JSON Lines text: one compact JSON object per row, each ending in a newline."""
    return "".join(json.dumps(to_json(r), ensure_ascii=False) + "\n" for r in rows)


class NotUtf8Error(UnicodeDecodeError):
    """A file that is not UTF-8 text; its text names the file, the byte offset and the line.

    A :class:`UnicodeDecodeError`, so code that catches that catches this too. Its text is
    ``"<path>: not UTF-8 text: <reason> at byte <offset> (line <line>)"``.

    Attributes
    ----------
    path : the file.
    start : the byte offset of the first byte that is not UTF-8, from the start of the file (0
        for the first byte).
    line : the line that byte is on (1 for the first line).
    reason : the decoder's words (``"invalid start byte"``).
    """

    def __init__(self, path: str | os.PathLike[str], data: bytes, error: UnicodeDecodeError) -> None:
        super().__init__(error.encoding, data, error.start, error.end, error.reason)
        self.path = path
        self.line = data.count(b"\n", 0, error.start) + 1

    def __str__(self) -> str:
        return f"{self.path}: not UTF-8 text: {self.reason} at byte {self.start} (line {self.line})"


def read_utf8(path: str | os.PathLike[str]) -> str:
    """The text of a UTF-8 file (a byte order mark is kept, as ``open(encoding="utf-8")`` keeps it).

    Unlike a text-mode read, which decodes in chunks, the offset of a bad byte is counted from
    the start of the file.

    Raises
    ------
    OSError : the file cannot be read.
    NotUtf8Error : the file is not UTF-8 text (the message names the file, the byte offset and
        the line).
    """
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotUtf8Error(path, data, exc) from None


class JsonlError(ValueError):
    """A line of a JSON Lines file that is not valid JSON.

    Its text is ``"<path>:<line>: invalid JSON: <reason>"``; callers that speak of a bad line in
    their own words (a dataset loader, a command) read the fields.

    Attributes
    ----------
    path : the file, as given to :func:`read_jsonl`.
    line : the line number (1 for the first line).
    column : the column of the error in that line (1 for the first character).
    reason : the parser's message (``"Expecting value"``).
    detail : the parser's whole message (``"Expecting value: line 1 column 1 (char 0)"``).
    """

    def __init__(self, path: str | os.PathLike[str], line: int, column: int, reason: str, detail: str) -> None:
        super().__init__(f"{path}:{line}: invalid JSON: {reason}")
        self.path = path
        self.line = line
        self.column = column
        self.reason = reason
        self.detail = detail


def read_jsonl(path: str | os.PathLike[str], *, text: str | None = None,
               on_error: Callable[[JsonlError], None] | None = None) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of every non-blank line of a JSON Lines file, in file order: the
    one JSON Lines reader of primsel.

    Lines end at ``\n`` (after the text-mode translation of ``\r\n`` and ``\r``) and nowhere
    else, so a JSON string holding U+2028 or U+0085 as it is stays on its line.

    Parameters
    ----------
    path : the file.
    text : the file's content, when the caller has read it already (to report a file that cannot
        be read in its own words); ``path`` then only names the file in messages.
    on_error : called with the :class:`JsonlError` of a line that is not JSON, which is then
        left out (it may raise an error of its own instead); default: the error is raised.

    Raises
    ------
    OSError : the file cannot be read.
    NotUtf8Error : the file is not UTF-8 text (a :class:`UnicodeDecodeError` naming the file
        and the byte offset).
    JsonlError : (without ``on_error``) a line is not JSON; the message names the file and
        the line.
    """
    if text is None:
        text = read_utf8(path)
    lines = io.StringIO(text, newline=None)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            error = JsonlError(path, number, exc.colno, exc.msg, str(exc))
        else:
            yield number, value
            continue
        if on_error is None:
            raise error
        on_error(error)
