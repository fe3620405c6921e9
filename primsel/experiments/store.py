"""Retrievals shared between cells: computed once per process, cached on disk.

Retrieval (the full ranking of every task and the fold of every task) depends only on the
retriever specification, the dataset, the library, ``folds`` and ``seed``: it is computed once per
process for all cells that share them (cells that differ in ``k``, ``closure`` or the
generator), and cached on disk under ``experiments/retrieval`` of the cache directory
(:func:`primsel.files.cache_dir`). What names a retrieval is
:func:`primsel.experiments.records.retrieval_key` (:meth:`RetrievalStore.retrieval_key`): the
store memoises by it, the Ray backend shares one retrieval task per key, and every cell records the
key of the retrieval it used (:attr:`Retrieval.key`). The disk cache key also holds a hash of the retrieval package's
source and of the source file of every class the retriever specification names, nested
specifications included (:func:`primsel.spec.sources`), so an edit of a built-in or a plug-in
retriever invalidates it. A retrieval with failed LLM requests is not cached on disk.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from primsel import spec as specs
from primsel.checks import FOLDS_BOUNDS
from primsel.experiments.dataset import Dataset
from primsel.experiments.records import retrieval_key
from primsel.files import cache_dir, digest, write_atomic
from primsel.retrieval.cv import cross_validated_run
from primsel.types import Run, ranking


def _source_hash(package: str) -> str:
    module = importlib.import_module(package)
    h = hashlib.sha256()
    for path in sorted(Path(module.__file__).parent.rglob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class Retrieval:
    """The full ranking of every task by one retriever, and the fold of every task.

    Parameters
    ----------
    ranked : task id -> ((primitive id, score), ...), best first, the whole library (or the
        first ``depth``).
    folds : task id -> fold (0-based).
    seconds : wall time of computing the retrieval, in seconds (for a disk-cache hit, the time
        the computing run took).
    cached : True when it was read from the disk cache.
    usage : task id -> LLM usage of the retriever for that task (retrievers with the
        :class:`primsel.types.ReportsUsage` ability, else empty); for a disk-cache hit, the
        usage of the computing run.
    key : the retrieval's :meth:`RetrievalStore.retrieval_key` (empty when it was not made by a
        store, e.g. by :meth:`RetrievalStore.rerank`).
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
    """Task id -> failed LLM requests of the retriever for that task (``usage`` ``errors``),
    for the tasks that had any."""
    out = {}
    for task_id, usage in retrieval.usage.items():
        errors = int(float(usage.get("errors", 0) or 0))
        if errors:
            out[task_id] = errors
    return out


class RetrievalStore:
    """Computes retrievals once per process and keeps them on disk (see the module docstring).

    Parameters
    ----------
    library : the library (:class:`primsel.library.Library`).
    dataset : the tasks.
    use_disk : read and write the disk cache.
    """

    def __init__(self, library: Any, dataset: Dataset, use_disk: bool = True) -> None:
        self.library = library
        self.dataset = dataset
        self.use_disk = use_disk
        self._memo: dict[str, Retrieval] = {}
        self._code = None
        self._library_fp: str | None = None

    def retrieval_key(self, spec: Any, folds: int, seed: int, depth: int | None = None) -> str:
        """The name of a retrieval (:func:`primsel.experiments.records.retrieval_key`) over this
        store's tasks, with ``folds`` capped (:meth:`effective_folds`) and a ``depth`` that keeps
        the whole library taken as None, so that settings giving the same rankings give one key."""
        kept = depth if self.depth(depth) < len(self.library) else None
        return retrieval_key(self.dataset.fingerprint, spec, self.effective_folds(folds), seed, kept)

    def key(self, spec: Any, folds: int, seed: int, depth: int | None = None) -> str:
        """Disk cache key of a retrieval (sha256 hex, :func:`primsel.files.digest`): its
        :meth:`retrieval_key` with the library's fingerprint, a hash of the retrieval package's
        source and the sources of the classes ``spec`` names."""
        if self._code is None:
            self._code = _source_hash("primsel.retrieval")
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
        """The retrieval of ``spec`` with the given folds (capped, :meth:`effective_folds`),
        seed and ranking depth (None: the whole library) (memoised, disk-cached). ``progress``
        is told the stages of a computation (:func:`primsel.retrieval.cv.cross_validated_run`);
        a cached retrieval has none."""
        folds = self.effective_folds(folds)
        name = self.retrieval_key(spec, folds, seed, depth)
        if name in self._memo:
            return self._memo[name]
        path = cache_dir() / "experiments" / "retrieval" / f"{self.key(spec, folds, seed, depth)}.json"
        result = self._read(path) if self.use_disk else None
        if result is None:
            result = self._compute(spec, folds, seed, self.depth(depth), progress=progress)
            if self.use_disk and not retrieval_errors(result):
                payload = {"ranked": {t: [list(p) for p in r] for t, r in result.ranked.items()},
                           "folds": dict(result.folds), "seconds": result.seconds,
                           "usage": {t: dict(u) for t, u in result.usage.items()}}
                try:
                    write_atomic(path, json.dumps(payload), durable=False)
                except OSError:
                    pass  # the cache is an optimisation; an unwritable cache directory is not an error
        result = dataclasses.replace(result, key=name)
        self._memo[name] = result
        return result

    def rerank(self, spec: Any, folds: int, seed: int, queries: Mapping[str, str]) -> Retrieval:
        """Rank the library again for some tasks, each with another text (e.g. its query plus an
        error message, reflection's ``reselect``), with the folds and training tasks of
        :meth:`get` (same ``folds``, capped, and ``seed``). Not cached on disk (an LLM
        selector's answers are, by its client).

        Parameters
        ----------
        spec, folds, seed : as :meth:`get`.
        queries : ``{task_id: text}``, task ids of the dataset.

        Returns
        -------
        A :class:`Retrieval` of the tasks of ``queries`` only.

        Raises
        ------
        ValueError : a task id not in the dataset.
        """
        return self._compute(spec, self.effective_folds(folds), seed, self.depth(None), queries)

    def _read(self, path: Path) -> Retrieval | None:
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
            ranked = {t: tuple((str(p), float(s)) for p, s in r) for t, r in payload["ranked"].items()}
            if set(ranked) != {t.id for t in self.dataset.tasks}:
                return None
            usage = {str(t): {str(n): float(v) for n, v in u.items()} for t, u in payload.get("usage", {}).items()}
            return Retrieval(ranked=ranked, folds={t: int(f) for t, f in payload["folds"].items()},
                             seconds=float(payload.get("seconds", 0.0)), cached=True, usage=usage)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _compute(self, spec: Any, folds: int, seed: int, depth: int, queries: Mapping[str, str] | None = None,
                 progress: Callable[[str, int, int], None] | None = None) -> Retrieval:
        start = time.perf_counter()
        usage: dict[str, dict[str, float]] = {}
        run, fold_of = cross_validated_run(specs.with_seed(spec, seed), self.library, list(self.dataset.tasks),
                                           k=depth, folds=folds, seed=seed, usage_out=usage,
                                           queries=queries, progress=progress)
        ranked = {}
        for t in self.dataset.tasks:
            if queries is None or t.id in queries:
                scores = run.get(t.id, {})
                ranked[t.id] = tuple((p, float(scores[p])) for p in ranking(scores))
        return Retrieval(ranked=ranked, folds={t: fold_of[t] for t in ranked} if queries is not None else dict(fold_of),
                         seconds=time.perf_counter() - start, usage=usage)
