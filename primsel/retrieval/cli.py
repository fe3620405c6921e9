"""``primsel retrieve``: rank the library for every task and print retrieval metrics.

Retrievers that learn from tasks are cross-validated (``--folds``, ``--seed``); the TREC run
(``--out``) ranks the whole library for every task. The selection scored by the set metrics is
the top ``--k`` primitives, plus their type dependencies with ``--closure``.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

#: Ranking metrics printed by ``primsel retrieve``.
RANKING_METRICS = (
    "recall@5", "recall@10", "recall@15", "recall@20", "ndcg@10", "mrr",
    "complete@10", "complete@15", "complete@20",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Attach the ``retrieve`` options to ``parser``."""
    from primsel.registry import available

    parser.add_argument("--retriever", metavar="SPEC", default=None,
                        help=f"a registered name ({', '.join(available('retriever'))}), "
                             "'package.module:Class' (modules in the current directory included), or an "
                             "inline JSON table such as "
                             '\'{"type": "hybrid", "members": ["bm25", "dense"], "method": "rrf"}\' '
                             "(default: the learned hybrid, see primsel.retrieval.DEFAULT_RETRIEVER)")
    parser.add_argument("--k", type=int, default=15,
                        help="selection size for the set metrics (default 15; above the library size, "
                             "the whole library)")
    parser.add_argument("--closure", action="store_true",
                        help="add the library types the selected primitives depend on")
    parser.add_argument("--folds", type=int, default=5,
                        help="cross-validation folds for learned retrievers (default 5)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the fold split, also passed to retrievers that take a 'seed' "
                             "parameter (random) unless the JSON table sets one (default 0)")
    parser.add_argument("--data", metavar="PATH", default=None,
                        help="Asper-Bench archive (default: $PRIMSEL_ASPER_BENCH, else the built-in tasks)")
    parser.add_argument("--out", metavar="RUN.trec", default=None,
                        help="write the TREC run here (its directory must exist)")


def parse_spec(text: str | None) -> Any:
    """A retriever specification from the command line: JSON table, name or ``module:Class``.

    Raises
    ------
    primsel.cli.UsageError : malformed JSON, or a JSON value that is not a table with ``type``.
    """
    from primsel.cli import UsageError
    from primsel.retrieval import DEFAULT_RETRIEVER

    if text is None:
        return copy.deepcopy(DEFAULT_RETRIEVER)
    text = text.strip()
    if text.startswith("{"):
        try:
            spec = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--retriever: invalid JSON table: {exc}") from exc
        if not isinstance(spec, dict) or "type" not in spec:
            raise UsageError("--retriever: a JSON table needs a 'type' key")
        return spec
    if not text:
        raise UsageError("--retriever: empty specification")
    return text


def spec_tag(spec: Any) -> str:
    """Short name of a specification for the TREC tag column (no whitespace)."""
    name = spec if isinstance(spec, str) else str(spec.get("type", "retriever"))
    return "".join(c if not c.isspace() else "_" for c in name) or "retriever"


def check_output_path(path: str) -> None:
    """Fail early when ``path`` cannot be written, leaving nothing behind.

    The parent directory must exist (it is not created); an existing file is opened for
    appending (not changed) to probe it, a new one is created and removed again.

    Raises
    ------
    primsel.cli.UsageError : ``path`` is a directory, its parent is missing or not a directory,
        or the file cannot be opened for writing (the message gives the system's reason).
    """
    from primsel.cli import UsageError

    target = Path(path)
    parent = target.parent
    try:
        if target.is_dir():
            raise UsageError(f"--out {path}: is a directory; give a file name")
        if not parent.exists():
            raise UsageError(f"--out {path}: directory {parent} does not exist (create it first)")
        if not parent.is_dir():
            raise UsageError(f"--out {path}: {parent} is not a directory")
        existed = target.exists()
        with open(target, "a", encoding="utf-8"):
            pass
        if not existed:
            target.unlink()
    except OSError as exc:  # e.g. a name too long, no permission, a read-only file system
        raise UsageError(f"--out {path}: cannot write: {exc.strerror or exc}") from exc


def main(args: argparse.Namespace) -> int:
    """Run ``primsel retrieve``; returns the exit status (2 on bad arguments via UsageError)."""
    from primsel.cli import UsageError
    from primsel.datasets import DatasetError, load_tasks
    from primsel.eval.metrics import evaluate, set_metrics
    from primsel.library import Library, with_gold
    from primsel.registry import UnknownComponentError, build, with_seed
    from primsel.retrieval.base import learns_from_tasks
    from primsel.retrieval.cv import cross_validated_run
    from primsel.retrieval.encoders import EncoderLoadError
    from primsel.retrieval.selector import select_run
    from primsel.retrieval.trec import write_run

    if args.k <= 0:
        raise UsageError(f"--k must be >= 1, got {args.k}")
    if args.folds < 2:
        raise UsageError(f"--folds must be >= 2, got {args.folds}")
    if args.out:
        check_output_path(args.out)
    spec = parse_spec(args.retriever)
    try:
        spec = with_seed(spec, args.seed, "retriever")
        probe = build(spec, "retriever")
    except (UnknownComponentError, TypeError, ValueError) as exc:
        raise UsageError(f"--retriever: {exc}") from exc

    try:
        tasks = load_tasks(args.data)
    except DatasetError as exc:
        raise UsageError(str(exc)) from exc
    source = tasks[0].source if tasks else "none"
    print(f"{len(tasks)} tasks ({source})", file=sys.stderr)
    if not tasks:
        raise UsageError("no tasks to rank")
    library = Library.from_simulator()
    tasks = with_gold(tasks, library)
    folds = min(args.folds, len(tasks))
    learned = learns_from_tasks(probe)
    if learned and len(tasks) < 2:
        raise UsageError("a retriever that learns from tasks needs at least 2 tasks to cross-validate")
    if folds != args.folds:
        print(f"only {len(tasks)} tasks: using {folds} folds", file=sys.stderr)

    if args.k > len(library):
        print(f"--k {args.k} is above the library size: selecting all {len(library)} primitives", file=sys.stderr)

    start = time.perf_counter()
    try:
        if len(tasks) >= 2:
            run, _ = cross_validated_run(spec, library, tasks, len(library), folds=folds, seed=args.seed)
        else:
            retriever = probe.fit(library)
            run = retriever.search({t.id: t.query for t in tasks}, len(library))
    except EncoderLoadError as exc:
        raise UsageError(f"--retriever: {exc}") from exc
    seconds = time.perf_counter() - start
    print(f"ranked {len(run)} tasks in {seconds:.2f} s"
          + (f" ({folds}-fold cross-validation, seed {args.seed})" if learned else ""), file=sys.stderr)

    tag = spec_tag(spec)
    if args.out:
        try:
            write_run(run, args.out, tag)
        except OSError as exc:  # checked before ranking, but the file system may have changed
            raise UsageError(f"--out {args.out}: cannot write: {exc.strerror or exc}") from exc
        print(f"wrote {args.out}", file=sys.stderr)

    gold = {t.id: t.gold for t in tasks}
    with_gold_sets = {t: g for t, g in gold.items() if g}
    if len(with_gold_sets) < len(gold):
        print(f"{len(gold) - len(with_gold_sets)} tasks have no gold primitive: left out of the ranking metrics",
              file=sys.stderr)
    selections = select_run(run, library, retriever=tag, k=args.k, closure=args.closure)
    values = evaluate(run, with_gold_sets, RANKING_METRICS)
    values.update(set_metrics({t: s.ids for t, s in selections.items()}, gold))
    sizes = [len(s.ids) for s in selections.values()]
    added = sum(len(s.added_by_closure) for s in selections.values())

    print(f"retriever {json.dumps(spec) if not isinstance(spec, str) else spec}  k={args.k}"
          f"{'  closure' if args.closure else ''}  tasks={len(tasks)}")
    for name, value in values.items():
        print(f"{name:22s} {value:.4f}")
    print(f"{'mean_selection_size':22s} {sum(sizes) / len(sizes):.2f}")
    if args.closure:
        print(f"{'closure_added':22s} {added} ({added / len(sizes):.2f} per task)")
    return 0
