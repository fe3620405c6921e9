"""How retrievers scale with the library: fit time, query latency and memory on ``pydoc``.

For each library size (``pydoc:1k``, ``pydoc:10k``, ``pydoc:full``: the documented callables
of the installed environment) and each retriever (bm25 with rank-bm25 and with bm25s, tfidf,
dense with a flat and an HNSW FAISS index), a fresh child process loads the library, fits the
retriever and runs known-item queries one at a time (``search({id: query}, k=10)``), and
reports

* fit seconds (for dense: loading all-MiniLM-L6-v2 and encoding every document; embeddings are
  cached on disk, so the first run at a size gives the cold time and later runs the warm one),
* query latency p50 and p99 in milliseconds over ``--queries`` queries (dense: including
  encoding the query, never cached, and the search alone),
* peak memory: the largest resident set size above the one before fitting, sampled every 5 ms,
  in MB (for dense, the sentence model's weights included),
* recall@10 of the known-item queries (a sanity check, not a benchmark),

then the growth exponent of fit time and p50 between consecutive sizes,
``log(t2 / t1) / log(n2 / n1)`` (1.0: linear in the library size).

    python benchmarks/scale.py                       # 1k, 10k, full; every retriever
    python benchmarks/scale.py --sizes 1k 10k --retrievers bm25s dense-flat --queries 200

Run it on a quiet machine, under ``nice`` when it is shared, and give ``uptime`` with the
figures: latency on a loaded machine measures the load.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

#: Retriever name -> specification.
RETRIEVERS = {
    "bm25-rank_bm25": {"type": "bm25", "backend": "rank_bm25"},
    "bm25-bm25s": {"type": "bm25", "backend": "bm25s"},
    "tfidf": {"type": "tfidf"},
    "dense-flat": {"type": "dense", "index": "flat"},
    "dense-hnsw": {"type": "dense", "index": "hnsw"},
}
SIZES = ("1k", "10k", "full")


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class _PeakSampler(threading.Thread):
    """Samples the resident set size every 5 ms until stopped."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak = _rss_mb()
        self._done = threading.Event()  # not _stop: threading.Thread has a method of that name

    def run(self) -> None:
        while not self._done.wait(0.005):
            self.peak = max(self.peak, _rss_mb())

    def stop(self) -> float:
        self._done.set()
        self.join()
        return max(self.peak, _rss_mb())


def measure(size: str, name: str, n_queries: int) -> dict:
    """One measurement (run in a child process): see the module docstring."""
    import numpy as np

    from primsel import registry
    from primsel.datasets import load_retrieval_data
    from primsel.library import Library

    (data,) = load_retrieval_data(f"pydoc:{size}")
    library = Library(data.documents, unique_names=False)
    tasks = list(data.tasks)[:n_queries]
    retriever = registry.build(RETRIEVERS[name], "retriever")
    before = _rss_mb()
    sampler = _PeakSampler()
    sampler.start()
    start = time.perf_counter()
    retriever.fit(library)
    fit = time.perf_counter() - start
    search_only = None
    if name.startswith("dense"):
        from primsel.retrieval.encoders import SentenceEncoder

        fresh = SentenceEncoder(retriever.model, use_cache=False)
        retriever.set_encoder(fresh.encode)
        retriever.search({"warm": "load the model"}, 10)
    latencies, hits = [], 0
    for task in tasks:
        start = time.perf_counter()
        run = retriever.search({task.id: task.query}, 10)
        latencies.append(time.perf_counter() - start)
        hits += bool(task.gold & set(run[task.id]))
    if name.startswith("dense"):
        vectors = {t.query: v for t, v in zip(tasks, fresh.encode([t.query for t in tasks]))}
        retriever.set_encoder(lambda texts: np.stack([vectors[t] for t in texts]))
        times = []
        for task in tasks:
            start = time.perf_counter()
            retriever.search({task.id: task.query}, 10)
            times.append(time.perf_counter() - start)
        search_only = float(np.percentile(times, 50)) * 1000
    peak = sampler.stop() - before
    ms = np.array(latencies) * 1000
    return {"size": size, "documents": len(library), "retriever": name, "fit_s": fit,
            "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)),
            "search_only_p50_ms": search_only, "peak_mb": peak, "queries": len(tasks),
            "recall@10": hits / len(tasks) if tasks else 0.0}


def _exponent(a: float, b: float, n1: int, n2: int) -> str:
    if a <= 0 or b <= 0 or n1 == n2:
        return "–"
    return f"{math.log(b / a) / math.log(n2 / n1):.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), help="pydoc sizes (default: 1k 10k full)")
    parser.add_argument("--retrievers", nargs="+", default=list(RETRIEVERS), choices=list(RETRIEVERS))
    parser.add_argument("--queries", type=int, default=300, help="queries timed per measurement (default 300)")
    parser.add_argument("--child", nargs=2, metavar=("SIZE", "RETRIEVER"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child[0], args.child[1], args.queries)))
        return 0
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
           "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    rows = []
    header = (f"{'size':>5} {'docs':>6} {'retriever':15} {'fit s':>8} {'p50 ms':>8} {'p99 ms':>8} "
              f"{'search p50':>10} {'peak MB':>8} {'R@10':>5}")
    print(header)
    for size in args.sizes:
        for name in args.retrievers:
            proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", size, name,
                                   "--queries", str(args.queries)], capture_output=True, text=True, env=env,
                                  check=False)
            if proc.returncode != 0:
                print(f"{size:>5} {name}: failed: {proc.stderr.strip().splitlines()[-1:]}", flush=True)
                continue
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            rows.append(row)
            search = f"{row['search_only_p50_ms']:.2f}" if row["search_only_p50_ms"] is not None else "–"
            print(f"{size:>5} {row['documents']:>6} {name:15} {row['fit_s']:>8.2f} {row['p50_ms']:>8.2f} "
                  f"{row['p99_ms']:>8.2f} {search:>10} {row['peak_mb']:>8.1f} {row['recall@10']:>5.2f}", flush=True)
    print("\ngrowth exponents (log t2/t1 / log n2/n1) between consecutive sizes: fit, p50")
    for name in args.retrievers:
        mine = [r for r in rows if r["retriever"] == name]
        parts = [f"{a['size']}->{b['size']}: fit {_exponent(a['fit_s'], b['fit_s'], a['documents'], b['documents'])}, "
                 f"p50 {_exponent(a['p50_ms'], b['p50_ms'], a['documents'], b['documents'])}"
                 for a, b in zip(mine, mine[1:])]
        print(f"  {name:15} " + ("; ".join(parts) or "–"))
    print(f"\nuptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
