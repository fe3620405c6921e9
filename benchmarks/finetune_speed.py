"""Fit time per fold and query latency of retrievers that train a model, cold and warm.

For each retriever specification (default: the fine-tuned bi-encoder alone and the default
configuration, ``primsel.retrieval.DEFAULT_RETRIEVER``), runs the 5-fold cross-validation of the
cell pipeline (``KFold(5, shuffle=True, random_state=seed)`` over the task ids) twice in a fresh
temporary cache directory: *cold* (nothing cached: models loaded, fine-tuned, weights and
vectors written) and *warm* (the same folds again: trained weights and vectors read back).
Prints, per fold, the seconds of ``fit`` and the milliseconds per query of ``search`` (the
fold's held-out queries, ranking the whole library), then the totals and the process CPU
seconds. Uses the Asper-Bench archive when ``PRIMSEL_ASPER_BENCH`` is set, else the built-in
tasks. The machine's load average is printed first: on a shared machine wall times grow with it.

Target (2 cores): the default configuration cold in under 5 minutes for all five folds; warm in
seconds.

    python benchmarks/finetune_speed.py [--seed 0] [--spec JSON ...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="seed of the folds (default 0)")
    parser.add_argument("--spec", action="append", default=None,
                        help="retriever specification (name or JSON table); repeatable "
                             "(default: finetuned and the default configuration)")
    args = parser.parse_args(argv)
    from bench_env import fresh_cache

    with fresh_cache():
        return measure(args.spec, args.seed)


def measure(texts: list[str] | None, seed: int) -> int:
    """Cold and warm cross-validated fit and search of each specification; prints a table."""
    from primsel import spec as specs
    from primsel.datasets import load_tasks
    from primsel.library import with_gold
    from primsel.simulator.library import build_library
    from primsel.registry import build
    from primsel.retrieval import DEFAULT_RETRIEVER
    from primsel.retrieval.cv import fold_assignment

    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    library = build_library()
    tasks = with_gold(load_tasks(), library)
    folds = fold_assignment([t.id for t in tasks], 5, seed)
    print(f"{len(tasks)} tasks ({tasks[0].source}), 5 folds, seed {seed}")
    wanted = [specs.parse(t) for t in texts] if texts else ["finetuned", DEFAULT_RETRIEVER]
    for spec in wanted:
        spec = specs.with_seed(spec, seed)
        print(f"\n{json.dumps(spec)}")
        print(f"{'run':5s} {'fold':>4s} {'fit s':>8s} {'ms/query':>9s}")
        for run in ("cold", "warm"):
            cpu, wall = time.process_time(), time.perf_counter()
            for fold in range(5):
                train = [t for t in tasks if folds[t.id] != fold]
                test = {t.id: t.query for t in tasks if folds[t.id] == fold}
                retriever = build(spec)
                start = time.perf_counter()
                retriever.fit(library, train)
                fit = time.perf_counter() - start
                start = time.perf_counter()
                retriever.search(test, len(library))
                latency = (time.perf_counter() - start) / len(test) * 1000
                print(f"{run:5s} {fold:4d} {fit:8.2f} {latency:9.1f}", flush=True)
            print(f"{run:5s} {'all':>4s} {time.perf_counter() - wall:8.2f} s wall, "
                  f"{time.process_time() - cpu:.2f} s CPU (this process)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
