"""Wall time of verifying every task's reference program, alone or paired with ASPERA's harness.

Usage::

    python benchmarks/verify_speed.py [--data asper_bench.tgz] [--repeat 3]
    python benchmarks/verify_speed.py --aspera ml-aspera --aspera-python ASPERA_PYTHON [--repeat 5]
    python benchmarks/verify_speed.py --profile

(default data: ``$PRIMSEL_ASPER_BENCH``, else the built-in tasks; ``--aspera`` needs the archive).

Alone, it prints per repetition the wall time of :class:`primsel.simulator.sandbox.Sandbox`
with its default settings, workers' start-up included, the mean seconds per task, the mean
in-sandbox time per task and, of that, the round trips to the program's process.

Paired (``--aspera``), each repetition runs the two commands a user would run, each in a fresh
process: ``python -m primsel verify --data ARCHIVE`` (default settings: one worker per CPU) and
ASPERA's reference harness on the same reference programs (``benchmarks/aspera_harness.py``
under ``--aspera-python``, an interpreter with ASPERA's dependencies); their order alternates
between repetitions. It prints both wall times (the whole process, start-up and dataset
included), their ratio, the load average before and after, and at the end the median ratio.
The goal: primsel at or below 0.15 of ASPERA's wall time on an idle machine.

``--profile`` runs every task through one worker's code in this process (a spawner, the judge,
one program process per pair), and prints where the time goes: the judge's CPU time, the
program processes' (and the spawner's) CPU time, per task, and the judge's heaviest functions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    from primsel.datasets import load_tasks, resolve_dataset

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="Asper-Bench archive (default $PRIMSEL_ASPER_BENCH, else built-in tasks)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions (default 3)")
    parser.add_argument("--aspera", help="a checkout of apple/ml-aspera: pair each run with ASPERA's harness")
    parser.add_argument("--aspera-python", default=sys.executable,
                        help="an interpreter with ASPERA's dependencies (default: this one)")
    parser.add_argument("--profile", action="store_true", help="where the time goes, in this process")
    args = parser.parse_args(argv)

    archive = resolve_dataset(args.data)
    tasks = load_tasks(archive)
    source = "Asper-Bench" if archive else "built-in tasks"
    print(f"data: {source} ({len(tasks)} tasks); CPUs: {os.cpu_count()}; load average: {_load()}")
    if args.profile:
        return profile(tasks)
    if args.aspera:
        if archive is None:
            parser.error("--aspera needs the Asper-Bench archive (--data or $PRIMSEL_ASPER_BENCH)")
        return paired(str(archive), args.aspera, args.aspera_python, args.repeat)
    return alone(tasks, args.repeat)


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def alone(tasks: list, repeat: int) -> int:
    """The sandbox alone, in this process (see the module docstring)."""
    from primsel.simulator.sandbox import Sandbox

    walls = []
    for repetition in range(1, repeat + 1):
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


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{command[0]} ... failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return wall, done.stdout.strip().splitlines()[-1]


def paired(archive: str, aspera: str, aspera_python: str, repeat: int) -> int:
    """primsel verify and ASPERA's harness, alternately, each in a fresh process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    ours = [sys.executable, "-m", "primsel", "verify", "--data", archive, "--out", os.devnull]
    theirs = [aspera_python, str(ROOT / "benchmarks" / "aspera_harness.py"), "--aspera", aspera, "--data", archive]
    ratios = []
    for repetition in range(1, repeat + 1):
        before = _load()
        order = [("primsel", ours), ("aspera", theirs)]
        if repetition % 2 == 0:
            order.reverse()
        walls, summaries = {}, {}
        for name, command in order:
            walls[name], summaries[name] = _timed(command, env)
        ratio = walls["primsel"] / walls["aspera"]
        ratios.append(ratio)
        aspera_figures = json.loads(summaries["aspera"])
        print(f"pair {repetition}: primsel verify {walls['primsel']:.2f} s ({summaries['primsel']}); "
              f"ASPERA's harness {walls['aspera']:.2f} s (passed {aspera_figures['passed']}/{aspera_figures['tasks']}, "
              f"{aspera_figures['evaluation_seconds']:.2f} s evaluating); ratio {ratio:.3f}; "
              f"load {before} -> {_load()}")
    print(f"median ratio {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}) "
          f"over {len(ratios)} pairs")
    return 0


def profile(tasks: list) -> int:
    """Every task through one worker's code in this process; where the time goes."""
    import cProfile
    import pstats
    import tempfile

    from primsel.simulator import program, worker
    from primsel.simulator.judge import JudgeLibrary
    from primsel.simulator.sandbox import Sandbox

    scratch = tempfile.mkdtemp(prefix=f"primsel-worker-{os.getpid()}-")
    apps = program.load_apps()
    worker.install_aliases(("apps",))
    runtime = program.readable_paths(scratch)
    spawner = worker.Spawner(runtime, None, runtime, scratch)
    library = JudgeLibrary(apps)
    worker.install_aliases(("setup_tools", "check_tools"))
    requests = [Sandbox()._prepare(task, task.program, None) for task in tasks]
    profiler = cProfile.Profile()
    start, before = time.perf_counter(), os.times()
    passed = 0
    for request in requests:
        profiler.enable()
        verdict = worker.run_request(library, spawner, request, scratch)
        profiler.disable()
        passed += verdict["status"] == "pass"
    spawner.socket.close()  # the spawner exits; reaped, its CPU time and its children's count below
    os.waitpid(spawner.pid, 0)
    wall, after = time.perf_counter() - start, os.times()
    count = len(requests)
    judge = (after.user - before.user + after.system - before.system) / count * 1000
    children = (after.children_user - before.children_user + after.children_system - before.children_system)
    print(f"passed {passed}/{count}; one worker, tasks in turn: {wall / count * 1000:.1f} ms/task wall; "
          f"CPU per task: judge {judge:.1f} ms (profiled), spawner and program processes "
          f"{children / count * 1000:.1f} ms")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
