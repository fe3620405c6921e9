"""Files primsel writes: the cache directory, atomic writes, canonical JSON and JSONL.

Every cache lives below :func:`cache_dir` (``llm/`` answers, ``embeddings/`` vectors,
``experiments/retrieval/`` rankings). Every file primsel writes goes through
:func:`write_atomic`, so a reader (or a run killed midway) never sees part of a file.

JSON text written here keeps any Python string: UTF-8 cannot encode a lone surrogate (it can come
from a program's exception message), so such a character is written as its ``\\udXXXX`` escape,
which a JSON reader turns back into the same string.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from primsel.types import to_json

#: Environment variable naming the cache directory.
CACHE_ENV = "PRIMSEL_CACHE_DIR"


def cache_dir() -> Path:
    """The primsel cache directory: ``$PRIMSEL_CACHE_DIR`` (``~`` expanded) or ``~/.cache/primsel``.

    Read at every call, so a change of the variable takes effect at once.
    """
    value = os.environ.get(CACHE_ENV)
    return Path(value).expanduser() if value else Path.home() / ".cache" / "primsel"


def write_atomic(path: str | os.PathLike[str], data: str | bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename.

    Parameters
    ----------
    path : the file; its parent directories are created.
    data : text (encoded as UTF-8, a lone surrogate as its ``\\udXXXX`` escape) or bytes.
    durable : flush the file to disk (``fsync``) before the rename; caches, which lose
        nothing but time when an entry is lost, pass False.

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
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of every non-blank line of a JSON Lines file, in file order.

    Raises
    ------
    OSError : the file cannot be read.
    ValueError : a line is not JSON; the message names the file and the line.
    """
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: invalid JSON: {exc.msg}") from None
