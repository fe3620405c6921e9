"""``pydoc``: a large real library, the public documented callables of the installed packages.

The catalogue (:func:`build_catalogue`) lists every public, documented function, class and
method of the standard library and of every installed distribution (or of the packages
named), walked in a child process by :mod:`primsel.datasets.pydoc_walk`; its rules are there.
Id = dotted path (``json.dumps``, ``collections.OrderedDict.move_to_end``), document =
signature + docstring (at most 4000 characters). It is deterministic for a given environment
and cached under the cache directory (:func:`primsel.files.cache_dir`), keyed by Python's
version, every installed distribution's version, the packages asked for and the walker's
source. :attr:`RetrievalDataset.info` records those versions.

Specification: ``pydoc[:SIZE[:PACKAGES]]``. SIZE is ``1k``, ``10k``, ``full`` (default) or a
number of documents; PACKAGES a comma-separated list of top-level packages (default: the whole
environment). A sized library is the first SIZE callables in the order of the sha256 of their
ids, so the 1k library is part of the 10k library, which is part of the whole.

Known-item queries (:func:`known_item_query`): the first sentence of a callable's docstring,
with the callable's own name words removed (``os.path.join``: "Join two or more pathname
components, inserting '/' as needed." becomes "two or more pathname components, inserting '/' as
needed.").
The gold set is the callable itself. A first sentence that several callables share gives no
query (the known item would be ambiguous), nor does one of fewer than 3 words once the name
words are gone. At most :data:`MAX_QUERIES` queries per library: those of its callables, in
the order of the sha256 of ``"query:" + id``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from primsel.datasets.asperbench import DatasetError
from primsel.datasets.pydoc_walk import environment
from primsel.datasets.retrieval_only import (
    RetrievalDataset,
    RetrievalLoader,
    query_task,
    register_loader,
)
from primsel.files import cache_dir
from primsel.types import Primitive

logger = logging.getLogger(__name__)

#: Named sizes of a ``pydoc`` library (None: the whole catalogue).
SIZES: dict[str, int | None] = {"1k": 1000, "10k": 10000, "full": None}
#: Most known-item queries of one library.
MAX_QUERIES = 1000
#: Fewest words a known-item query keeps.
MIN_QUERY_WORDS = 3
_SPEC = re.compile(r"^pydoc(?::(?P<size>[^:]*))?(?::(?P<packages>[^:]*))?$")
_SENTENCE = re.compile(r"^(.+?[.!?])(?:\s|$)")
_SIGNATURE_LINE = re.compile(r"^[\w.]+\(.*\)(\s*->.*)?$")
_NAME_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_TOKEN = re.compile(r"\S+")


def is_pydoc_spec(text: str) -> bool:
    """True when ``text`` has the form ``pydoc[:SIZE[:PACKAGES]]``."""
    return _SPEC.match(text) is not None


def parse_spec(text: str) -> tuple[int | None, tuple[str, ...], str]:
    """``(size or None, packages, size label)`` of a ``pydoc`` specification.

    Raises
    ------
    DatasetError : not a pydoc specification, a size that is neither a name of :data:`SIZES`
        nor an integer >= 1, or a package name that is not an identifier.
    """
    m = _SPEC.match(text)
    if m is None:
        raise DatasetError(f"{text!r} is not a pydoc specification (pydoc[:SIZE[:PACKAGES]])")
    label = (m.group("size") or "full").strip().lower()
    if label in SIZES:
        size = SIZES[label]
    elif label.isdecimal() and int(label) >= 1:
        size = int(label)
    else:
        raise DatasetError(f"{text}: size {label!r} must be one of {', '.join(SIZES)} or a number >= 1")
    packages = tuple(sorted({p.strip() for p in (m.group("packages") or "").split(",") if p.strip()}))
    bad = [p for p in packages if not p.isidentifier()]
    if bad:
        raise DatasetError(f"{text}: {bad} are not package names")
    return size, packages, label


def _walker_source() -> bytes:
    return (Path(__file__).parent / "pydoc_walk.py").read_bytes()


def catalogue_key(packages: Sequence[str]) -> str:
    """Cache key of a catalogue: sha256 (hex) of Python's version, every installed
    distribution's version, the packages asked for and the walker's source."""
    payload = json.dumps({"env": environment(), "packages": list(packages)}, sort_keys=True).encode()
    return hashlib.sha256(payload + b"\0" + _walker_source()).hexdigest()


def build_catalogue(packages: Sequence[str] = (), use_cache: bool = True) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """The catalogue of the environment (or of ``packages``): ``(meta, records)``.

    ``meta`` holds ``python``, ``packages`` (distribution -> version), ``roots``, ``modules``,
    ``failed_imports`` and ``callables``; records are sorted by id. Built by a child process
    (minutes for a whole environment; progress at INFO on the ``primsel`` logger) and cached.

    Raises
    ------
    DatasetError : the child process failed (its last lines of error output are quoted).
    """
    key = catalogue_key(packages)
    path = cache_dir() / "pydoc" / f"{key}.jsonl"
    if not (use_cache and path.is_file()):
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.part")
        logger.info("building the pydoc catalogue of %s (once per environment)", ", ".join(packages) or "the environment")
        start = time.perf_counter()
        env = {**os.environ, "PYTHONWARNINGS": "ignore"}
        proc = subprocess.run([sys.executable, "-m", "primsel.datasets.pydoc_walk", "--out", str(partial), *packages],
                              capture_output=True, text=True, env=env, check=False)
        if proc.returncode != 0 or not partial.is_file():
            partial.unlink(missing_ok=True)
            tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
            raise DatasetError(f"building the pydoc catalogue failed (exit {proc.returncode}): {tail}")
        os.replace(partial, path)
        logger.info("pydoc catalogue built in %.1f s", time.perf_counter() - start)
    lines = path.read_text(encoding="utf-8").splitlines()
    meta = json.loads(lines[0])["meta"]
    return meta, [{k: _unicode(v) for k, v in json.loads(line).items()} for line in lines[1:]]


def _unicode(value: Any) -> Any:
    """A string with each lone surrogate (a docstring may hold one, written as an escape in
    its source) replaced by the text of its ``\\udXXXX`` escape, so that every later stage
    (hashing, tokenising, embedding, writing) gets valid Unicode text; other values as given."""
    if not isinstance(value, str):
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", errors="backslashreplace").decode("utf-8")
    return value


def _name_words(name: str) -> set[str]:
    words = {w.lower() for part in name.split("_") for w in _NAME_WORD.findall(part)}
    words.add(name.strip("_").lower())
    return words


def first_sentence(doc: str) -> str:
    """The first sentence of a docstring: of its first paragraph that is not a signature line
    (``abs(x, /)``, or the ``--`` that follows one), white space collapsed; up to the first
    ``.``, ``!`` or ``?`` followed by a space or the end, else the whole paragraph."""
    for paragraph in re.split(r"\n\s*\n", doc.strip()):
        lines = [line for line in paragraph.splitlines()
                 if line.strip() and line.strip() != "--" and not _SIGNATURE_LINE.match(line.strip())]
        text = " ".join(" ".join(lines).split())
        if text:
            m = _SENTENCE.match(text)
            return m.group(1) if m else text
    return ""


def known_item_query(name: str, doc: str) -> str:
    """The first sentence of ``doc`` without the words of ``name``: a word goes when, lower-cased
    and without surrounding punctuation, it is the name, or made only of the name's snake_case
    and CamelCase parts (``body-encode`` for ``body_encode``)."""
    words = _name_words(name)
    kept = []
    for token in _TOKEN.findall(first_sentence(doc)):
        core = token.strip("`'\"()[]{},.:;!?*").lower()
        parts = set(_NAME_WORD.findall(core))
        if core and (core in words or (parts and parts <= words)):
            continue
        kept.append(token)
    return " ".join(kept)


def _order(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def load_pydoc(spec: str = "pydoc", use_cache: bool = True) -> RetrievalDataset:
    """The ``pydoc`` dataset of a specification (see the module docstring).

    Raises
    ------
    DatasetError : a bad specification, a failed catalogue build, or a size above the
        catalogue's (the message gives the catalogue's size).
    """
    size, packages, label = parse_spec(spec)
    meta, records = build_catalogue(packages, use_cache=use_cache)
    if not records:
        raise DatasetError(f"{spec}: the catalogue is empty")
    if size is not None and size > len(records):
        raise DatasetError(f"{spec}: asks for {size} callables; the catalogue has {len(records)}")
    chosen = records if size is None else sorted(records, key=lambda r: _order(r["id"]))[:size]
    chosen = sorted(chosen, key=lambda r: r["id"])
    name = f"pydoc-{label}" + (f"-{'-'.join(packages)}" if packages else "")
    docs = tuple(Primitive(id=r["id"], name=r["name"], module=r["module"], kind=r["kind"],
                           signature=r["signature"], doc=r["doc"]) for r in chosen)
    sentences: dict[str, int] = {}
    for r in records:
        s = first_sentence(r["doc"])
        sentences[s] = sentences.get(s, 0) + 1
    candidates = []
    for r in chosen:
        if sentences[first_sentence(r["doc"])] != 1:
            continue
        query = known_item_query(r["name"], r["doc"])
        if sum(1 for w in query.split() if any(ch.isalpha() for ch in w)) >= MIN_QUERY_WORDS:
            candidates.append((r["id"], query))
    candidates.sort(key=lambda item: _order("query:" + item[0]))
    tasks = tuple(query_task(i, q, [i], name) for i, q in sorted(candidates[:MAX_QUERIES]))
    notes = (f"{len(docs)} of {len(records)} callables of the catalogue; {len(candidates)} have a known-item "
             f"query (a unique first sentence of {MIN_QUERY_WORDS}+ words without the name), "
             f"{len(tasks)} used",)
    info = {"python": meta.get("python"), "packages": meta.get("packages", {}), "roots": len(meta.get("roots", ())),
            "modules": meta.get("modules"), "failed_imports": meta.get("failed_imports"),
            "catalogue": len(records)}
    return RetrievalDataset(name=name, documents=docs, tasks=tasks, notes=notes, info=info)


def versions_text(info: Mapping[str, Any], limit: int = 12) -> str:
    """A short text of the Python and package versions recorded in a pydoc dataset's info."""
    packages = info.get("packages") or {}
    shown = ", ".join(f"{k} {v}" for k, v in list(packages.items())[:limit])
    more = f", and {len(packages) - limit} more" if len(packages) > limit else ""
    return f"Python {info.get('python')}; {shown}{more}"


#: Asked first, when no file or directory has the name: ``pydoc:10k`` is a text, not a path.
LOADER = register_loader(RetrievalLoader(
    kind="pydoc", description="pydoc[:SIZE]", recognise_name=is_pydoc_spec,
    load=lambda folder, spec: load_pydoc(spec or "pydoc"), order=10))
