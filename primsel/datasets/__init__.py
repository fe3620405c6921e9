"""Task sets: the Asper-Bench archive (read as released), the built-in tasks shipped with primsel,
and retrieval-only datasets.

Which executable set is used is decided by :func:`resolve_dataset`: an explicit path (the
``--data`` flag), else the environment variable ``PRIMSEL_ASPER_BENCH``, else the built-in tasks.

Retrieval-only data (:mod:`primsel.datasets.retrieval_only`: queries and gold documents, no
programs) is what :func:`is_retrieval_data` recognises and :func:`load_retrieval_data` reads: a
BEIR-layout directory, the MetaTool and Gorilla APIBench folders (or one of their subsets,
named as a path below the folder: ``metatool/single``, ``gorilla-apibench/torchhub``), and
``pydoc[:SIZE[:PACKAGES]]``, the documented callables of the installed packages. Commands that
generate or execute programs refuse it (:func:`resolve_dataset` raises).
"""

from __future__ import annotations

import os
from pathlib import Path

from primsel.datasets import apibench, beir, metatool, pydoc
from primsel.datasets.asperbench import (
    ASPER_BENCH_FILENAME,
    ASPER_BENCH_SHA256,
    DatasetError,
    load_asper_bench,
    parse_shard,
    sorted_tasks,
    verify_checksum,
)
from primsel.datasets.retrieval_only import RetrievalDataset
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
    "RetrievalDataset",
    "is_retrieval_data",
    "load_builtin_tasks",
    "load_retrieval_data",
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
        is a directory or another non-regular file, or it holds retrieval-only data (which has
        no programs to generate for or execute).
    """
    if path is None or str(path) == "":
        path = os.environ.get(ENV_VAR) or None
        origin = f"${ENV_VAR}"
        if path is None:
            return None
    if is_retrieval_data(path):
        raise DatasetError(f"{path} (from {origin}) is retrieval-only data (queries and gold documents, no "
                           "reference programs or evaluation programs): generating and executing programs "
                           "needs executable tasks, the Asper-Bench archive or the built-in tasks; "
                           "`primsel retrieve` and `primsel run` without a generator accept it")
    resolved = Path(path).expanduser()
    if resolved.is_dir():
        raise DatasetError(f"{resolved} (from {origin}) is a directory; give the Asper-Bench archive file "
                           f"itself ({ASPER_BENCH_FILENAME})")
    if not resolved.exists():
        if resolved.name.endswith((".tgz", ".tar.gz", ".tar")):
            raise DatasetError(f"Asper-Bench archive not found: {resolved} (from {origin})")
        # not named like an archive: it may be meant as retrieval-only data as well
        raise DatasetError(
            f"data not found: {resolved} (from {origin}): no such file or directory. Data is the "
            f"Asper-Bench archive ({ASPER_BENCH_FILENAME}) or retrieval-only data: a BEIR directory, "
            "the MetaTool or Gorilla APIBench folder or one of their subsets (.../metatool/multi, "
            ".../gorilla-apibench/torchhub), or pydoc[:SIZE]; docs/user-guide.md (\"Data\") says where "
            "to download MetaTool and APIBench")
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

    Built-in tasks use the record layout of the archive's shards (:mod:`primsel.datasets.asperbench`) with ids ``"builtin-01"``,
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


# ---------------------------------------------------------------------------------------------
# Retrieval-only data
# ---------------------------------------------------------------------------------------------
def _retrieval_parts(path: str | os.PathLike[str]) -> tuple[str, Path, tuple[str, ...]] | None:
    """``(kind, folder, subsets)`` of a retrieval-only data path, or None: kind is ``beir``,
    ``metatool``, ``apibench`` or ``pydoc`` (folder then unused, subsets the spec)."""
    text = os.fspath(path)
    resolved = Path(text).expanduser()
    if pydoc.is_pydoc_spec(text) and not resolved.exists():
        return "pydoc", resolved, (text,)
    for kind, recognise, subsets in (("metatool", metatool.is_metatool, tuple(metatool.SUBSETS)),
                                     ("apibench", apibench.is_apibench, tuple(apibench.HUBS))):
        if recognise(resolved):
            return kind, resolved, subsets
        if not resolved.exists() and resolved.name in subsets and recognise(resolved.parent):
            return kind, resolved.parent, (resolved.name,)
    if beir.is_beir(resolved):
        return "beir", resolved, ()
    return None


def is_retrieval_data(path: str | os.PathLike[str] | None) -> bool:
    """True when ``path`` names retrieval-only data (see the module docstring)."""
    return path is not None and str(path) != "" and _retrieval_parts(path) is not None


def load_retrieval_data(path: str | os.PathLike[str]) -> list[RetrievalDataset]:
    """The retrieval-only datasets ``path`` names, in a fixed order: a MetaTool folder gives
    ``metatool-single`` and ``metatool-multi``, an APIBench folder its three hubs, a subset path
    (``.../metatool/multi``, ``.../gorilla-apibench/huggingface``) that one, a BEIR directory
    and ``pydoc[:SIZE[:PACKAGES]]`` one each.

    Raises
    ------
    DatasetError : ``path`` is not retrieval-only data, or a file is missing or malformed
        (the message names the file and line).
    """
    parts = _retrieval_parts(path)
    if parts is None:
        raise DatasetError(f"{path}: not retrieval-only data (expected a BEIR directory with {beir.CORPUS}, "
                           f"the MetaTool or Gorilla APIBench folder or one of their subsets, or pydoc[:SIZE])")
    kind, folder, subsets = parts
    if kind == "pydoc":
        return [pydoc.load_pydoc(subsets[0])]
    if kind == "beir":
        return [beir.load_beir(folder)]
    if kind == "metatool":
        return [metatool.load_metatool(folder, s) for s in subsets]
    return [apibench.load_apibench(folder, s) for s in subsets]
