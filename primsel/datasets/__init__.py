"""Task sets: the Asper-Bench archive (read as released) and the built-in tasks shipped with primsel.

Which set is used is decided by :func:`resolve_dataset`: an explicit path (the ``--data`` flag),
else the environment variable ``PRIMSEL_ASPER_BENCH``, else the built-in tasks.
"""

from __future__ import annotations

import os
from pathlib import Path

from primsel.datasets.asperbench import (
    ASPER_BENCH_FILENAME,
    ASPER_BENCH_SHA256,
    DatasetError,
    load_asper_bench,
    parse_shard,
    sorted_tasks,
    verify_checksum,
)
from primsel.types import Task

#: Environment variable naming the Asper-Bench archive.
ENV_VAR = "PRIMSEL_ASPER_BENCH"
#: Directory of the built-in task shards (``*.nt``, same schema as the archive's shards).
BUILTIN_DIR = Path(__file__).parent / "builtin"

# (resolved path, mtime_ns, size) -> tasks; "builtin" -> tasks.
_task_cache: dict[object, tuple[Task, ...]] = {}

__all__ = [
    "ASPER_BENCH_FILENAME",
    "ASPER_BENCH_SHA256",
    "BUILTIN_DIR",
    "ENV_VAR",
    "DatasetError",
    "load_asper_bench",
    "load_builtin_tasks",
    "load_tasks",
    "resolve_dataset",
    "verify_checksum",
]


def resolve_dataset(path: str | os.PathLike[str] | None = None, origin: str = "--data") -> Path | None:
    """The Asper-Bench archive to use, or None for the built-in tasks.

    Parameters
    ----------
    path : an explicit path (the ``--data`` flag); None or "" falls back to ``$PRIMSEL_ASPER_BENCH``.
    origin : where an explicit ``path`` came from, for messages (``"--data"``, ``"the 'data'
        key of exp.toml"``).

    Returns
    -------
    The archive path, or None when neither the argument nor the environment names one.

    Raises
    ------
    DatasetError : a path was given (by argument or environment) but no such file exists, or it
        is a directory or another non-regular file.
    """
    if path is None or str(path) == "":
        path = os.environ.get(ENV_VAR) or None
        origin = f"${ENV_VAR}"
        if path is None:
            return None
    resolved = Path(path).expanduser()
    if resolved.is_dir():
        raise DatasetError(f"{resolved} (from {origin}) is a directory; give the Asper-Bench archive file "
                           f"itself ({ASPER_BENCH_FILENAME})")
    if not resolved.exists():
        raise DatasetError(f"Asper-Bench archive not found: {resolved} (from {origin})")
    if not resolved.is_file():
        raise DatasetError(f"{resolved} (from {origin}) is not a regular file; give the Asper-Bench archive")
    return resolved


def load_tasks(path: str | os.PathLike[str] | None = None) -> list[Task]:
    """Tasks of the dataset chosen by :func:`resolve_dataset`, sorted by id.

    Loaded tasks are cached in-process per file (path, modification time and size), so calling
    this repeatedly is cheap. The returned list is a new list every call.

    Parameters
    ----------
    path : the Asper-Bench archive, or None (use ``$PRIMSEL_ASPER_BENCH``, else the built-in tasks).

    Raises
    ------
    DatasetError : see :func:`resolve_dataset` and :func:`load_asper_bench`.
    """
    archive = resolve_dataset(path)
    if archive is None:
        return load_builtin_tasks()
    stat = archive.stat()
    key = (str(archive.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _task_cache:
        _task_cache[key] = tuple(load_asper_bench(archive))
    return list(_task_cache[key])


def load_builtin_tasks() -> list[Task]:
    """The built-in tasks: every ``primsel/datasets/builtin/*.nt`` shard, sorted by id.

    Built-in tasks use the archive's shard schema (spec section 10.2) with ids ``"builtin-01"``,
    ..., and ``source="builtin"``. They let every command run without the Asper-Bench archive.

    Raises
    ------
    DatasetError : a malformed shard or task, or an id used twice.
    """
    if "builtin" not in _task_cache:
        tasks: dict[str, Task] = {}
        for shard in sorted(BUILTIN_DIR.glob("*.nt")):
            for task in parse_shard(shard.read_text(encoding="utf-8"), shard.name, source="builtin"):
                if task.id in tasks:
                    raise DatasetError(f"{shard.name}: built-in task id {task.id!r} is used twice")
                tasks[task.id] = task
        _task_cache["builtin"] = tuple(sorted_tasks(tasks.values()))
    return list(_task_cache["builtin"])
