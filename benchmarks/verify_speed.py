"""Wall time of verifying every task's reference program with the default sandbox settings.

Usage: ``python benchmarks/verify_speed.py [--data asper_bench.tgz] [--repeat 3]``
(default data: ``$PRIMSEL_ASPER_BENCH``, else the built-in tasks). Prints, per repetition, the
wall time including the workers' start-up, the mean seconds per task (wall time / tasks), the
mean in-sandbox time per task and, of that, the mean time of the round trips to the program's
process (loading the program and calling it with the world state crossing both ways, the
program's own run time included); then the best repetition. Target on an idle 2-core machine:
<= 4 s for the 250 Asper-Bench tasks.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def main(argv: list[str] | None = None) -> int:
    from primsel.datasets import load_tasks, resolve_dataset
    from primsel.simulator.sandbox import Sandbox, sandbox_info

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="Asper-Bench archive (default $PRIMSEL_ASPER_BENCH, else built-in tasks)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions (default 3)")
    args = parser.parse_args(argv)

    archive = resolve_dataset(args.data)
    tasks = load_tasks(archive)
    info = sandbox_info()
    source = "Asper-Bench" if archive else "built-in tasks"
    print(f"data: {source} ({len(tasks)} tasks); CPUs: {os.cpu_count()}; seccomp: {info['seccomp']}")
    walls = []
    for repetition in range(1, args.repeat + 1):
        start = time.perf_counter()
        with Sandbox() as sandbox:  # default settings: one worker per CPU, 10 s per task
            results = list(sandbox.execute_many((task, task.program, None) for task in tasks))
        wall = time.perf_counter() - start
        walls.append(wall)
        passed = sum(r.passed for r in results)
        inside = statistics.fmean(r.seconds for r in results)
        round_trip = statistics.fmean(r.program_seconds for r in results)
        print(
            f"run {repetition}: {wall:.2f} s wall for {len(tasks)} tasks "
            f"({wall / len(tasks) * 1000:.1f} ms/task wall, {inside * 1000:.1f} ms/task in the sandbox, "
            f"of which {round_trip * 1000:.1f} ms/task program-process round trips), "
            f"passed {passed}/{len(tasks)}"
        )
    print(f"best: {min(walls):.2f} s ({min(walls) / len(tasks) * 1000:.1f} ms/task)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
