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

``--profile`` prints where the time goes: CPU time per task of the judge (the worker), the
spawner and the program processes (read from ``/proc``, one worker, tasks in turn), for the
reference programs and for a program that does nothing (the fixed cost of a task), then the
judge's heaviest functions (every task through one worker's code in this process, profiled).
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


def _cpu(pid: int) -> tuple[float, float]:
    """CPU seconds of process ``pid`` itself and of its reaped children (``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


def profile(tasks: list) -> int:
    """Where the time goes: CPU per task by process (one worker, tasks in turn), for the reference
    programs and for a program that does nothing, then the judge's heaviest functions."""
    import cProfile
    import pstats
    import tempfile

    from primsel.simulator import program, worker
    from primsel.simulator.judge import JudgeLibrary
    from primsel.simulator.sandbox import Sandbox

    nothing = "def nothing():\n    return None\n"
    for label, text in (("reference programs", None), ("a program that does nothing", nothing)):
        with Sandbox(workers=1) as sandbox:
            sandbox.execute(tasks[0], tasks[0].program)  # the worker is up
            handle = sandbox._all[0]
            judge_pid, spawner_pid = handle.process.pid, handle.hello["spawner"]
            judge_before, (spawner_before, programs_before) = _cpu(judge_pid)[0], _cpu(spawner_pid)
            start = time.perf_counter()
            results = [sandbox.execute(task, task.program if text is None else text) for task in tasks]
            wall = time.perf_counter() - start
            judge_after, (spawner_after, programs_after) = _cpu(judge_pid)[0], _cpu(spawner_pid)
        count = len(tasks)
        print(f"{label}: {wall / count * 1000:.1f} ms/task wall (one worker, tasks in turn), "
              f"passed {sum(r.passed for r in results)}/{count}; CPU ms/task: judge "
              f"{(judge_after - judge_before) / count * 1000:.1f}, spawner "
              f"{(spawner_after - spawner_before) / count * 1000:.1f}, program processes "
              f"{(programs_after - programs_before) / count * 1000:.1f}")
    scratch = tempfile.mkdtemp(prefix=f"primsel-worker-{os.getpid()}-")
    apps = program.load_apps()
    worker.install_aliases(("apps",))
    runtime = program.readable_paths(scratch)
    spawner = worker.Spawner(runtime, None, runtime, scratch)
    library = JudgeLibrary(apps)
    worker.install_aliases(("setup_tools", "check_tools"))
    requests = [Sandbox()._prepare(task, task.program, None) for task in tasks]
    profiler = cProfile.Profile()
    for request in requests:
        profiler.enable()
        worker.run_request(library, spawner, request, scratch)
        profiler.disable()
    spawner.socket.close()
    os.waitpid(spawner.pid, 0)
    print("the judge's heaviest functions (reference programs, profiled in this process):")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
    return 0


if __name__ == "__main__":
    sys.exit(main())
