"""Accuracy of failure attribution on programs with known faults.

Usage: ``python benchmarks/attribution_accuracy.py [--data asper_bench.tgz] [--per-kind 2]
[--seed 0] [--workers N] [--show N]`` (default data: ``$PRIMSEL_ASPER_BENCH``, else the built-in
tasks).

Faulty programs are built from every task's reference program (``primsel.eval.faults``: drop a
call, change a constant, flip a comparison, swap two calls, remove a keyword argument), with the
line where each fault shows. Each is run in the sandbox; the reference programs are run once
too, and every faulty program that fails is attributed (``primsel.eval.attribution.attribute``
with the reference's execution). Printed per kind and overall:

* built / failed / passed: faulty programs made, those whose verdict is not ``pass``, and those
  the evaluation programs do not tell from the reference (they pass; left out below);
* detection: fraction of the failed ones that get an attribution with exactly one category of
  the diagnosis table; "difference found": fraction whose execution differs from the
  reference's in a call, a return value or an exception (``difference`` is not ``none``);
* localisation accuracy: fraction of the failed ones whose ``divergence_line`` is the fault's
  line (for a dropped call: the first line executed after it); "calls only": the same without
  the executed-path comparison (``localise`` without the reference's source: rules (a)-(c) of
  ``primsel.eval.localise``), to show what the call traces alone locate;
* category accuracy: fraction of the failed ones whose category is one the fault kind can
  cause (``runtime_error``, ``timeout`` or ``requires_user_input_misuse`` when the program
  raised or handed the task back, else: drop_call -> missing_call; swap_calls -> wrong_order;
  change_argument -> wrong_arguments; change_constant -> wrong_arguments, wrong_return or
  missing_call / extra_side_effect; flip_comparison -> any behavioural category).
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time

#: Categories a fault kind is counted correct for, when the program neither raised nor timed out.
EXPECTED = {
    "drop_call": {"missing_call"},
    "swap_calls": {"wrong_order"},
    "change_argument": {"wrong_arguments"},
    "change_constant": {"wrong_arguments", "wrong_return", "missing_call", "extra_side_effect"},
    "flip_comparison": {"wrong_arguments", "wrong_return", "missing_call", "extra_side_effect", "wrong_order"},
}
#: Categories that are correct whatever the kind, when the program raised, timed out or handed back.
ALWAYS = {"runtime_error", "timeout", "requires_user_input_misuse"}


def main(argv: list[str] | None = None) -> int:
    from primsel.datasets import load_tasks, resolve_dataset
    from primsel.eval.attribution import CATEGORIES, attribute
    from primsel.eval.faults import KINDS, make_faults
    from primsel.eval.localise import localise
    from primsel.library import with_gold
    from primsel.simulator.library import build_library
    from primsel.simulator.sandbox import Sandbox
    from primsel.types import Program

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="Asper-Bench archive (default $PRIMSEL_ASPER_BENCH, else built-in tasks)")
    parser.add_argument("--per-kind", type=int, default=2, help="faults of each kind per task (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the choice of faults (default 0)")
    parser.add_argument("--workers", type=int, default=None, help="sandbox workers (default: CPUs)")
    parser.add_argument("--show", type=int, default=0, help="print N mislocalised faults per kind")
    args = parser.parse_args(argv)

    archive = resolve_dataset(args.data)
    library = build_library()
    tasks = with_gold(load_tasks(archive), library)
    from primsel.simulator.program import load_apps, star_exports

    names = {name for module in load_apps().values() for name, value in star_exports(module).items()
             if callable(value) and getattr(value, "__module__", "").startswith("primsel.simulator.apps.")}
    faults = [f for t in tasks for f in make_faults(t.id, t.program, names, per_kind=args.per_kind, seed=args.seed)]
    by_id = {t.id: t for t in tasks}
    print(f"data: {'Asper-Bench' if archive else 'built-in tasks'} ({len(tasks)} tasks); "
          f"{len(faults)} faulty programs ({args.per_kind} per kind per task at most, seed {args.seed}); "
          f"CPUs: {os.cpu_count()}")
    start = time.perf_counter()
    with Sandbox(workers=args.workers) as sandbox:
        references = {r.task_id: r for r in sandbox.execute_many((t, t.program, None) for t in tasks)}
        results = list(sandbox.execute_many((by_id[f.task_id], f.program, None) for f in faults))
    seconds = time.perf_counter() - start
    broken = [tid for tid, r in references.items() if not r.passed]
    if broken:
        print(f"warning: {len(broken)} reference programs do not pass: {', '.join(broken[:10])}")

    counts: dict[str, collections.Counter[str]] = {kind: collections.Counter() for kind in (*KINDS, "all")}
    categories: dict[str, collections.Counter[str]] = {kind: collections.Counter() for kind in KINDS}
    misses: dict[str, list[str]] = {kind: [] for kind in KINDS}
    for fault, result in zip(faults, results):
        for key in (fault.kind, "all"):
            counts[key]["built"] += 1
        if result.passed:
            for key in (fault.kind, "all"):
                counts[key]["passed"] += 1
            continue
        task = by_id[fault.task_id]
        row = attribute(task, None, Program(task.id, fault.program), result, library,
                        reference=references[task.id])
        category = row["category"] if row else None
        base = category.split(":")[0] if category else None
        categories[fault.kind][str(base)] += 1
        found = row is not None and row.get("difference") not in (None, "none")
        located = row is not None and row.get("divergence_line") == fault.line
        calls_only = localise(fault.program, result, references[task.id]).divergence_line == fault.line
        right = base in ALWAYS or base in EXPECTED[fault.kind]
        for key in (fault.kind, "all"):
            counts[key]["failed"] += 1
            counts[key]["detected"] += row is not None and base in CATEGORIES
            counts[key]["found"] += found
            counts[key]["located"] += located
            counts[key]["calls_only"] += calls_only
            counts[key]["category"] += right
        if not located and len(misses[fault.kind]) < args.show:
            misses[fault.kind].append(
                f"  task {fault.task_id} {fault.description}; fault line {fault.line}, got "
                f"{row.get('divergence_line') if row else None} ({category}, {row.get('difference') if row else None})\n"
                f"    expected: {row.get('expected_call') if row else None}\n"
                f"    actual:   {row.get('actual_call') if row else None}")

    print(f"sandbox time {seconds:.1f} s ({len(tasks)} reference + {len(faults)} faulty programs)")
    header = f"{'kind':<17} {'built':>6} {'failed':>6} {'passed':>6} {'detection':>9} {'diff found':>10} " \
             f"{'localisation':>12} {'calls only':>10} {'category':>8}"
    print(header)
    for kind in (*KINDS, "all"):
        c = counts[kind]
        failed = c["failed"] or 1
        print(f"{kind:<17} {c['built']:>6} {c['failed']:>6} {c['passed']:>6} {c['detected'] / failed:>9.3f} "
              f"{c['found'] / failed:>10.3f} {c['located'] / failed:>12.3f} {c['calls_only'] / failed:>10.3f} "
              f"{c['category'] / failed:>8.3f}")
    both = counts["change_constant"] + counts["flip_comparison"]
    print(f"changed constant + flipped comparison: localisation {both['located'] / (both['failed'] or 1):.3f} "
          f"({both['located']}/{both['failed']}; calls only {both['calls_only'] / (both['failed'] or 1):.3f}), "
          f"detection {both['detected'] / (both['failed'] or 1):.3f}")
    for kind in KINDS:
        shown = ", ".join(f"{k} {v}" for k, v in categories[kind].most_common())
        print(f"categories, {kind}: {shown}")
    for kind in KINDS:
        if misses[kind]:
            print(f"mislocalised, {kind}:")
            print("\n".join(misses[kind]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
