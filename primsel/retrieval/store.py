"""Retrievals shared between cells: computed once per process, cached on disk.

A retrieval (every task's full ranking and fold) depends only on the retriever specification,
the dataset, the library, ``folds``, ``seed`` and ``depth``; it is named by
:func:`retrieval_key` and cached under ``experiments/retrieval`` of
:func:`primsel.files.cache_dir`, keyed also by the source of the retrieval package and of every
class the specification names. A retrieval with failed LLM requests is not cached on disk.

A run on a subset of a dataset ranks the whole dataset, so that a retriever that learns from tasks
is cross-validated as in the full run; a retriever that does not learn ranks only the subset's
tasks (``needed``), with the whole dataset's folds: an LLM selector then asks about those tasks
alone.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from primsel import registry
from primsel import spec as specs
from primsel.checks import FOLDS_BOUNDS
from primsel.files import cache_dir, digest, write_atomic
from primsel.retrieval.cv import cross_validated_run
from primsel.types import LearnsFromTasks, Run, ranking


def retrieval_key(dataset: str | None, retriever: Any, folds: int, seed: int, depth: int | None) -> str:
    """The one name of a retrieval (cells with the same key rank every task the same way): the
    sha256 hex digest (:func:`primsel.files.digest`) of the dataset's fingerprint, the retriever's
    specification (without its labels, :func:`primsel.spec.without_labels`: they change no
    ranking), the folds and seed of the cross-validation and the depth kept (None: all)."""
    return digest([dataset, specs.without_labels(retriever), folds, seed, depth])


@dataclasses.dataclass(frozen=True)
class Retrieval:
    """The full ranking of every task by one retriever, and the fold of every task.

    Parameters
    ----------
    ranked : task id -> ((primitive id, score), ...), best first (the whole library, or ``depth``).
    folds : task id -> fold (0-based).
    seconds : wall time of computing it (for a disk-cache hit, that of the computing run).
    cached : True when read from the disk cache.
    usage : task id -> the retriever's LLM usage for that task (empty without one).
    key : its :meth:`RetrievalStore.retrieval_key` ("" when not made by :meth:`RetrievalStore.get`).
    """

    ranked: Mapping[str, tuple[tuple[str, float], ...]]
    folds: Mapping[str, int]
    seconds: float
    cached: bool = False
    usage: Mapping[str, Mapping[str, float]] = dataclasses.field(default_factory=dict)
    key: str = ""

    def run(self) -> Run:
        """The ranking as a :data:`primsel.types.Run`."""
        return {t: dict(r) for t, r in self.ranked.items()}


def retrieval_errors(retrieval: Retrieval) -> dict[str, int]:
    """Task id -> failed LLM requests of the retriever (usage ``errors``), for tasks with any."""
    errors = {t: int(float(u.get("errors", 0) or 0)) for t, u in retrieval.usage.items()}
    return {t: n for t, n in errors.items() if n}


class RetrievalStore:
    """Computes retrievals once per process and keeps them on disk (``use_disk``).

    Parameters
    ----------
    library : the :class:`primsel.library.Library`.
    dataset : the tasks: an object with ``tasks`` (a sequence of :class:`primsel.types.Task`) and
        ``fingerprint`` (str).
    use_disk : read and write the disk cache.
    needed : ids of the tasks a run scores, when they are a subset of ``dataset``'s: a retriever
        that does not learn from tasks ranks only these (None: every task).
    """

    def __init__(self, library: Any, dataset: Any, use_disk: bool = True,
                 needed: Collection[str] | None = None) -> None:
        self.library = library
        self.dataset = dataset
        self.use_disk = use_disk
        every = {t.id for t in dataset.tasks}
        self.needed = None if needed is None or set(needed) == every else tuple(sorted(needed))
        self._memo: dict[str, Retrieval] = {}
        self._code: str | None = None
        self._library_fp: str | None = None

    def retrieval_key(self, spec: Any, folds: int, seed: int, depth: int | None = None) -> str:
        """The :func:`retrieval_key` of a retrieval over these tasks (the ``needed`` ones for a
        retriever that does not learn from tasks), folds capped and a depth keeping the whole
        library as None."""
        kept = depth if self.depth(depth) < len(self.library) else None
        dataset = self.dataset.fingerprint
        only = self._only(spec)
        if only is not None:
            dataset = f"{dataset}/only-{digest(list(only))[:8]}"
        return retrieval_key(dataset, spec, self.effective_folds(folds), seed, kept)

    def _only(self, spec: Any) -> tuple[str, ...] | None:
        """The tasks ``spec`` ranks when not all: ``needed``, for a retriever that does not learn."""
        if self.needed is None:
            return None
        if isinstance(registry.build(spec, "retriever"), LearnsFromTasks):
            return None
        return self.needed

    def key(self, spec: Any, folds: int, seed: int, depth: int | None = None) -> str:
        """Disk cache key (sha256 hex): the retrieval key, the library's fingerprint, and digests
        of the retrieval package's source and of the sources of the classes ``spec`` names."""
        if self._code is None:
            h = hashlib.sha256()
            for path in sorted(Path(importlib.import_module("primsel.retrieval").__file__).parent.rglob("*.py")):
                h.update(path.name.encode() + b"\0" + path.read_bytes())
            self._code = h.hexdigest()[:16]
        return digest({"retrieval": self.retrieval_key(spec, folds, seed, depth), "library": self.library_fingerprint(),
                       "code": self._code, "sources": specs.sources(spec)})

    def library_fingerprint(self) -> str:
        """The library's fingerprint (computed once)."""
        if self._library_fp is None:
            self._library_fp = self.library.fingerprint()
        return self._library_fp

    def depth(self, depth: int | None) -> int:
        """How many primitives a ranking keeps: ``depth`` capped at the library size (None: all)."""
        return len(self.library) if depth is None else min(depth, len(self.library))

    def effective_folds(self, folds: int) -> int:
        """``folds`` capped at the number of tasks (so a small task set still runs)."""
        return max(FOLDS_BOUNDS["minimum"], min(folds, len(self.dataset.tasks)))

    def get(self, spec: Any, folds: int, seed: int, depth: int | None = None,
            progress: Callable[[str, int, int], None] | None = None) -> Retrieval:
        """The :class:`Retrieval` of ``spec`` (folds capped, ``depth`` None: the whole library),
        memoised and disk-cached; ``progress(stage, i, n)`` is told a computation's stages."""
        folds = self.effective_folds(folds)
        name = self.retrieval_key(spec, folds, seed, depth)
        if name in self._memo:
            return self._memo[name]
        path = cache_dir() / "experiments" / "retrieval" / f"{self.key(spec, folds, seed, depth)}.json"
        result = self._read(path, self._only(spec) is not None) if self.use_disk else None
        if result is None:
            only = self._only(spec)
            queries = None
            if only is not None:
                by_id = {t.id: t.query for t in self.dataset.tasks}
                queries = {task_id: by_id[task_id] for task_id in only}
            result = self._compute(spec, folds, seed, self.depth(depth), queries, progress=progress,
                                   every_fold=True)
            if self.use_disk and not retrieval_errors(result):
                payload = {"ranked": {t: [list(p) for p in r] for t, r in result.ranked.items()},
                           "folds": dict(result.folds), "seconds": result.seconds,
                           "usage": {t: dict(u) for t, u in result.usage.items()}}
                try:
                    write_atomic(path, json.dumps(payload), durable=False)
                except OSError:
                    pass  # the cache is an optimisation
        result = dataclasses.replace(result, key=name)
        self._memo[name] = result
        return result

    def rerank(self, spec: Any, folds: int, seed: int, queries: Mapping[str, str]) -> Retrieval:
        """The :class:`Retrieval` of the tasks of ``queries`` (``{task id: text}``) ranked with
        those texts, with the folds and training tasks of :meth:`get`; not cached on disk.

        Raises
        ------
        ValueError : a task id not in the dataset.
        """
        return self._compute(spec, self.effective_folds(folds), seed, self.depth(None), queries)

    def _read(self, path: Path, only: bool = False) -> Retrieval | None:
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
            ranked = {t: tuple((str(p), float(s)) for p, s in r) for t, r in payload["ranked"].items()}
            expected = set(self.needed) if only else {t.id for t in self.dataset.tasks}
            if set(ranked) != expected:
                return None
            usage = {str(t): {str(n): float(v) for n, v in u.items()} for t, u in payload.get("usage", {}).items()}
            return Retrieval(ranked=ranked, folds={t: int(f) for t, f in payload["folds"].items()},
                             seconds=float(payload.get("seconds", 0.0)), cached=True, usage=usage)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _compute(self, spec: Any, folds: int, seed: int, depth: int, queries: Mapping[str, str] | None = None,
                 progress: Callable[[str, int, int], None] | None = None, every_fold: bool = False) -> Retrieval:
        """Rank the tasks (those of ``queries`` with their texts, when given) by cross-validation;
        the folds of the ranked tasks, or of every task with ``every_fold`` (a learning generator
        draws its examples from the folds of the whole dataset)."""
        start = time.perf_counter()
        usage: dict[str, dict[str, float]] = {}
        run, fold_of = cross_validated_run(specs.with_seed(spec, seed), self.library, list(self.dataset.tasks),
                                           k=depth, folds=folds, seed=seed, usage_out=usage,
                                           queries=queries, progress=progress)
        ranked = {t.id: tuple((p, float(run.get(t.id, {})[p])) for p in ranking(run.get(t.id, {})))
                  for t in self.dataset.tasks if queries is None or t.id in queries}
        kept_folds = dict(fold_of) if queries is None or every_fold else {t: fold_of[t] for t in ranked}
        return Retrieval(ranked=ranked, folds=kept_folds,
                         seconds=time.perf_counter() - start, usage=usage)
