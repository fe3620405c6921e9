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

Each kind of retrieval-only data is one module of this package that registers a
:class:`~primsel.datasets.retrieval_only.RetrievalLoader` as it is imported. The package imports
all its modules (in name order) when it is imported, and recognises paths, loads data and names
the kinds in its messages from the registered declarations (:func:`retrieval_data_kinds`), so a
new kind needs no edit here (docs/architecture.md, "a dataset").
"""

from __future__ import annotations

import importlib
import os
import pkgutil
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
from primsel.datasets.retrieval_only import (
    RetrievalDataset,
    RetrievalLoader,
    retrieval_loaders,
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
    "RetrievalDataset",
    "is_retrieval_data",
    "load_asper_bench",
    "load_builtin_tasks",
    "load_retrieval_data",
    "load_tasks",
    "resolve_dataset",
    "retrieval_data_kinds",
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
            f"Asper-Bench archive ({ASPER_BENCH_FILENAME}) or retrieval-only data: {retrieval_data_kinds()}; "
            "docs/user-guide.md (\"Data\") says where to download MetaTool and APIBench")
    if not resolved.is_file():
        raise DatasetError(f"{resolved} (from {origin}) is not a regular file; give the Asper-Bench archive")
    return resolved


def load_tasks(path: str | os.PathLike[str] | None = None) -> list[Task]:
    """Tasks of the dataset chosen by :func:`resolve_dataset`, sorted by id, their ``gold`` empty
    (a dataset knows no library: :func:`primsel.api.load_tasks` gives them with gold filled).

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
def _import_loader_modules() -> None:
    """Import every module of this package, in name order: a loader module registers its
    :class:`RetrievalLoader` as it is imported (:func:`primsel.datasets.retrieval_only.register_loader`)."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda module: module.name):
        importlib.import_module(f"{__name__}.{info.name}")


def _either(items: list[str]) -> str:
    """``"a"``, ``"a or b"``, ``"a, b, or c"``."""
    if len(items) <= 2:
        return " or ".join(items)
    return ", ".join(items[:-1]) + ", or " + items[-1]


def retrieval_data_kinds() -> str:
    """The kinds of retrieval-only data the registered loaders read, as messages name them:
    data recognised by its path first (``"a BEIR directory with corpus.jsonl"``), then the folders
    with subsets together (``"the MetaTool or Gorilla APIBench folder or one of their subsets
    (.../metatool/multi, .../gorilla-apibench/torchhub)"``), then data named by a text
    (``"pydoc[:SIZE]"``), each group in recognition order."""
    loaders = retrieval_loaders()
    paths = [loader.description for loader in loaders if loader.recognise is not None and not loader.subsets]
    folders = [loader for loader in loaders if loader.subsets]
    names = [loader.description for loader in loaders if loader.recognise_name is not None]
    if folders:
        titles = [loader.description for loader in folders]
        joined = titles[0] if len(titles) == 1 else ", ".join(titles[:-1]) + " or " + titles[-1]
        whose = "its" if len(folders) == 1 else "their"
        examples = ", ".join(loader.example for loader in folders)
        paths.append(f"the {joined} folder or one of {whose} subsets ({examples})")
    return _either(paths + names)


def _retrieval_parts(path: str | os.PathLike[str]) -> tuple[RetrievalLoader, Path, tuple[str, ...]] | None:
    """``(loader, folder, subsets)`` of a retrieval-only data path, or None: the first registered
    loader (:func:`~primsel.datasets.retrieval_only.retrieval_loaders`) that recognises the path
    as a whole, or (loaders with subsets) ``FOLDER/SUBSET`` for a path that does not exist; for
    data named by a text, folder is that text as a path and subsets the text itself."""
    text = os.fspath(path)
    resolved = Path(text).expanduser()
    for loader in retrieval_loaders():
        if loader.recognise_name is not None:
            if not resolved.exists() and loader.recognise_name(text):
                return loader, resolved, (text,)
            continue
        assert loader.recognise is not None  # RetrievalLoader requires one of the two
        if loader.recognise(resolved):
            return loader, resolved, loader.subsets
        if loader.subsets and not resolved.exists() and resolved.name in loader.subsets \
                and loader.recognise(resolved.parent):
            return loader, resolved.parent, (resolved.name,)
    return None


def is_retrieval_data(path: str | os.PathLike[str] | None) -> bool:
    """True when ``path`` names retrieval-only data (see the module docstring)."""
    return path is not None and str(path) != "" and _retrieval_parts(path) is not None


def load_retrieval_data(path: str | os.PathLike[str]) -> list[RetrievalDataset]:
    """The retrieval-only datasets ``path`` names, in a fixed order: a MetaTool folder gives
    ``metatool-single`` and ``metatool-multi``, an APIBench folder its three hubs (a folder of a
    loader with subsets: one dataset per subset, in the declared order), a subset path
    (``.../metatool/multi``, ``.../gorilla-apibench/huggingface``) that one, a BEIR directory
    and ``pydoc[:SIZE[:PACKAGES]]`` one each.

    Raises
    ------
    DatasetError : ``path`` is not retrieval-only data (the message lists the kinds, see
        :func:`retrieval_data_kinds`), or a file is missing or malformed (the message names the
        file and line).
    """
    parts = _retrieval_parts(path)
    if parts is None:
        raise DatasetError(f"{path}: not retrieval-only data (expected {retrieval_data_kinds()})")
    loader, folder, subsets = parts
    if not subsets:
        return [loader.load(folder, None)]
    return [loader.load(folder, subset) for subset in subsets]


_import_loader_modules()
