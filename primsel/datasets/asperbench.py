"""Read the released Asper-Bench archive (a ``.tgz``) directly into :class:`~primsel.types.Task` objects.

The archive is read as released: no extraction step. Only the NestedText shards under
``plans/`` are used (the authoritative task data); ``code/`` and the macOS ``._*`` resource-fork
entries are skipped. The file's SHA-256 is checked against :data:`ASPER_BENCH_SHA256` before
anything is parsed.

Asper-Bench accompanies ASPERA (Coca et al., "ASPERA: A Simulated Environment to Evaluate
Planning for Complex Action Execution", 2025). It is licensed CC BY-NC-ND 4.0: load it from
where the user keeps it, never copy it into the project.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from primsel.types import Task, task_sort_key

#: SHA-256 of the released archive ``asper_bench_2025-05-27-1153.tgz``.
ASPER_BENCH_SHA256 = "67738cad71cbd145e95f2d5b4d6d9111f73681917bf8a32e1803a0039f51bbd4"
#: File name of the released archive.
ASPER_BENCH_FILENAME = "asper_bench_2025-05-27-1153.tgz"

#: Keys every task record of a shard must have; other keys (``timestamp``) are ignored.
REQUIRED_KEYS = (
    "query_id",
    "query",
    "program",
    "scenario",
    "state_generation_programs",
    "evaluation_programs",
)

#: Layout of the cached parsed shards (:func:`_shard_records`); a new one leaves older entries unread.
SHARD_CACHE_FORMAT = "v1"

# (path, mtime_ns, size) -> hex digest, so a file is hashed once per change.
_digest_cache: dict[tuple[str, int, int], str] = {}


class DatasetError(ValueError):
    """A dataset file is missing, has the wrong checksum, or holds a malformed shard or task.

    The message names the file and, where it applies, the shard and the task id or key.
    """


def sha256_of(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 digest of a file, cached per (path, modification time, size).

    Raises
    ------
    DatasetError : the file does not exist or cannot be read.
    """
    path = Path(path)
    try:
        stat = path.stat()
    except OSError as exc:
        raise DatasetError(f"cannot read dataset file {path}: {exc.strerror or exc}") from exc
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    digest = _digest_cache.get(key)
    if digest is None:
        hasher = hashlib.sha256()
        try:
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    hasher.update(block)
        except OSError as exc:
            raise DatasetError(f"cannot read dataset file {path}: {exc.strerror or exc}") from exc
        digest = hasher.hexdigest()
        _digest_cache[key] = digest
    return digest


def verify_checksum(path: str | os.PathLike[str], expected: str = ASPER_BENCH_SHA256) -> None:
    """Check that a file's SHA-256 equals ``expected``.

    Raises
    ------
    DatasetError : missing or unreadable file, or a different digest (the message gives both).
    """
    actual = sha256_of(path)
    if actual != expected.lower():
        raise DatasetError(
            f"{path} is not the released Asper-Bench archive: sha256 {actual}, expected {expected} "
            f"(re-download {ASPER_BENCH_FILENAME})"
        )


def load_asper_bench(
    path: str | os.PathLike[str], *, sha256: str | None = ASPER_BENCH_SHA256
) -> list[Task]:
    """Read the Asper-Bench archive into tasks, sorted numerically by id.

    Parameters
    ----------
    path : the ``.tgz`` archive as released.
    sha256 : expected digest of the file; None skips the check (for archives built in tests).

    Returns
    -------
    list of :class:`Task`, ids ``"1"`` ... ``"250"`` for the released archive, with
    ``source="asper-bench"`` and an empty ``gold`` (see :func:`primsel.library.gold_primitives`).

    Raises
    ------
    DatasetError : missing file, wrong checksum, not a gzip tar archive, no shard in ``plans/``,
        a shard that is not valid NestedText, a malformed task (the message names the shard and
        the task id or position and the offending key), or a task id that occurs twice.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"Asper-Bench archive not found: {path}")
    if sha256 is not None:
        verify_checksum(path, sha256)
    tasks: list[Task] = []
    seen: dict[str, str] = {}
    for shard_name, records in _shard_records(path):
        where = f"{path.name}:{shard_name}"
        for task in _tasks_of(records, where, source="asper-bench"):
            if task.id in seen:
                raise DatasetError(f"{where}: task id {task.id!r} also occurs in {seen[task.id]}")
            seen[task.id] = where
            tasks.append(task)
    if not tasks:
        raise DatasetError(f"{path}: no task shard (plans/*.nt) in the archive")
    return sorted_tasks(tasks)


def sorted_tasks(tasks: Iterable[Task]) -> list[Task]:
    """``tasks`` in task id order (:func:`primsel.types.task_sort_key`: ``"2"`` before ``"10"``)."""
    return sorted(tasks, key=lambda t: task_sort_key(t.id))


def _shard_records(path: Path) -> list[tuple[str, Any]]:
    """(member name, parsed NestedText) of every ``plans/*.nt`` member of the archive, in name
    order: parsed once per archive content (sha256) and then read from the cache
    (``datasets/`` of :func:`primsel.files.cache_dir`, while caches are enabled), since parsing
    the NestedText takes most of the time of loading the tasks (0.4 s of 0.5 s for the release).
    The cache holds the parsed values as JSON (strings, lists, dictionaries: the same values
    come back); an entry that cannot be read is parsed again, one that cannot be written is
    left out.

    Raises
    ------
    DatasetError : see :func:`_read_shards`; a shard that is not valid NestedText.
    """
    from primsel.files import cache_dir, caches_enabled, write_atomic

    entry = cache_dir() / "datasets" / f"asper-bench-{sha256_of(path)}-{SHARD_CACHE_FORMAT}.json"
    if caches_enabled():
        try:
            return [(str(name), records) for name, records in json.loads(entry.read_text(encoding="utf-8"))]
        except (OSError, ValueError, TypeError):
            pass
    shards = [(name, _parsed(text, f"{path.name}:{name}")) for name, text in _read_shards(path)]
    if caches_enabled():
        try:
            write_atomic(entry, json.dumps(shards), durable=False)
        except OSError:
            pass
    return shards


def _read_shards(path: Path) -> Iterable[tuple[str, str]]:
    """(member name, text) of every ``plans/*.nt`` member of the archive, in name order."""
    try:
        with tarfile.open(path, mode="r:gz") as archive:
            shards = []
            for member in archive.getmembers():
                parts = [p for p in member.name.split("/") if p not in ("", ".")]
                if not member.isfile() or not parts or parts[-1].startswith("._"):
                    continue
                if parts[0] != "plans" or not parts[-1].endswith(".nt"):
                    continue  # code/, .gitignore and the index JSON files are not needed
                handle = archive.extractfile(member)
                if handle is None:
                    continue
                data = handle.read()
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise DatasetError(f"{path.name}:{member.name}: not UTF-8 text ({exc})") from exc
                shards.append(("/".join(parts), text))
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise DatasetError(f"{path}: not a readable gzip tar archive ({exc})") from exc
    return sorted(shards)


def parse_shard(text: str, where: str, *, source: str) -> list[Task]:
    """Parse one NestedText shard (a list of task dictionaries) into tasks.

    Parameters
    ----------
    text : the shard's content.
    where : name used in error messages (archive and member, or a file path).
    source : the ``Task.source`` to set (``"asper-bench"``, ``"builtin"``).

    Raises
    ------
    DatasetError : invalid NestedText, a top level that is not a list, or a malformed task.
    """
    return _tasks_of(_parsed(text, where), where, source=source)


def _parsed(text: str, where: str) -> Any:
    """The NestedText ``text`` parsed (``where`` names it in the error).

    Raises
    ------
    DatasetError : invalid NestedText.
    """
    import nestedtext

    try:
        return nestedtext.load(io.StringIO(text), top="any")
    except nestedtext.NestedTextError as exc:
        line = getattr(exc, "lineno", None)
        at = f" line {line + 1}" if isinstance(line, int) else ""
        raise DatasetError(f"{where}{at}: invalid NestedText: {exc.get_message()}") from exc


def _tasks_of(records: Any, where: str, *, source: str) -> list[Task]:
    """The tasks of a parsed shard (:func:`parse_shard`).

    Raises
    ------
    DatasetError : a top level that is not a list, or a malformed task.
    """
    if not isinstance(records, list):
        raise DatasetError(f"{where}: expected a list of tasks at the top level, got {type(records).__name__}")
    return [task_from_record(record, f"{where} task #{i + 1}", source=source) for i, record in enumerate(records)]


def task_from_record(record: Any, where: str, *, source: str) -> Task:
    """Build a :class:`Task` from one task dictionary of a shard.

    Parameters
    ----------
    record : the parsed dictionary (all scalars are strings in NestedText).
    where : position used in error messages until the task id is known.
    source : the ``Task.source`` to set.

    Raises
    ------
    DatasetError : not a dictionary, a missing key, a value of the wrong shape, SIP and EP
        lists of different lengths or empty, or a malformed ``scenario``.
    """
    if not isinstance(record, Mapping):
        raise DatasetError(f"{where}: expected a dictionary, got {type(record).__name__}")
    task_id = record.get("query_id")
    if isinstance(task_id, str) and task_id.strip():
        where = f"{where.rsplit(' task #', 1)[0]} task {task_id.strip()!r}"
    for key in REQUIRED_KEYS:
        if key not in record:
            raise DatasetError(f"{where}: missing key {key!r}")
    task_id = _text(record, "query_id", where).strip()
    if not task_id:
        raise DatasetError(f"{where}: empty 'query_id'")
    query = _text(record, "query", where)
    program = _text(record, "program", where)
    setups = _text_list(record, "state_generation_programs", where)
    checks = _text_list(record, "evaluation_programs", where)
    if not setups:
        raise DatasetError(f"{where}: 'state_generation_programs' is empty")
    if len(setups) != len(checks):
        raise DatasetError(
            f"{where}: {len(setups)} state_generation_programs but {len(checks)} evaluation_programs "
            "(they are paired by position)"
        )
    scenario = _scenario(record["scenario"], where)
    return Task(
        id=task_id,
        query=query,
        program=program,
        setup_programs=tuple(setups),
        evaluation_programs=tuple(checks),
        scenario=scenario,
        source=source,
    )


def _text(record: Mapping[str, Any], key: str, where: str) -> str:
    value = record[key]
    if not isinstance(value, str):
        raise DatasetError(f"{where}: key {key!r} must be a string, got {type(value).__name__}")
    return value


def _text_list(record: Mapping[str, Any], key: str, where: str) -> list[str]:
    value = record[key]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DatasetError(f"{where}: key {key!r} must be a list of program texts")
    return list(value)


def _scenario(value: Any, where: str) -> dict[str, Any]:
    """Validate the scenario dict; ``symbols_in_apps: ""`` is treated as absent (spec 10.2)."""
    if not isinstance(value, Mapping):
        raise DatasetError(f"{where}: key 'scenario' must be a dictionary, got {type(value).__name__}")
    scenario = dict(value)
    if "apps" not in scenario:
        raise DatasetError(f"{where}: scenario has no key 'apps'")
    for key in ("apps", "simulation_tools", "evaluation_tools"):
        items = scenario.get(key, [])
        if not isinstance(items, list) or not all(isinstance(v, str) and v.strip() for v in items):
            raise DatasetError(f"{where}: scenario key {key!r} must be a list of names")
    for key in ("simulation_tools", "evaluation_tools"):
        for item in scenario.get(key, []):
            module, sep, name = item.partition("::")
            if not sep or not module or not name:
                raise DatasetError(f"{where}: scenario {key} entry {item!r} is not 'module::name'")
    if scenario.get("symbols_in_apps") == "":
        del scenario["symbols_in_apps"]
    return scenario
