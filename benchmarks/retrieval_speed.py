"""Fit and search time of every registered retriever (LLM-based and fine-tuned ones excluded).

Prints, per retriever, the seconds to ``fit`` (learned retrievers on 200 training tasks) and to
``search`` 250 queries ranking the whole library. Uses the Asper-Bench archive when
``PRIMSEL_ASPER_BENCH`` is set, else the built-in tasks' queries repeated to 250. The embedding
cache is a fresh temporary directory, removed at the end, so dense figures include encoding
(cold cache) and the model load (once per process: the first dense retriever pays it).

Targets: dense fit < 10 s; search of 250 queries < 2 s for every retriever.

    python benchmarks/retrieval_speed.py
"""

from __future__ import annotations

import dataclasses
import sys
import time


def main() -> int:
    from bench_env import fresh_cache

    with fresh_cache():
        return measure()


def measure() -> int:
    """Fit and search every retriever once; prints one line per retriever."""
    from primsel.datasets import load_tasks
    from primsel.library import with_gold
    from primsel.simulator.library import build_library
    from primsel.registry import available, build, resolve
    from primsel.retrieval import DEFAULT_RETRIEVER
    from primsel.types import SeesGold

    library = build_library()
    tasks = with_gold(load_tasks(), library)
    source = tasks[0].source
    if len(tasks) < 250:
        tasks = [dataclasses.replace(tasks[i % len(tasks)], id=str(i + 1)) for i in range(250)]
    train, queries = tasks[:200], {t.id: t.query for t in tasks[:250]}
    print(f"{len(queries)} queries ({source}), library of {len(library)} primitives")
    print(f"{'retriever':12s} {'fit s':>8s} {'search s':>9s}")
    # LLM retrievers are excluded, and so are those that fine-tune a transformer (finetuned,
    # rerank; benchmarks/finetune_speed.py times them per fold, cold and warm)
    trains = ("finetuned", "rerank")
    specs = {name: name for name in available("retriever")
             if not callable(getattr(resolve(name), "usage", None)) and name not in trains}
    specs["default"] = DEFAULT_RETRIEVER
    for name, spec in specs.items():
        retriever = build(spec)
        start = time.perf_counter()
        retriever.fit(library, train)
        fit = time.perf_counter() - start
        if isinstance(retriever, SeesGold):
            retriever.set_gold({t.id: t.gold for t in tasks})
        start = time.perf_counter()
        run = retriever.search(queries, len(library))
        search = time.perf_counter() - start
        if len(run) != len(queries):
            raise RuntimeError(f"{name}: {len(run)} of {len(queries)} queries answered")
        print(f"{name:12s} {fit:8.2f} {search:9.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
