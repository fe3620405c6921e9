"""``primsel verify``: run programs against tasks' evaluation programs in the sandbox.

Without ``--programs`` every task's reference program is run (a check of the simulator). With
``--programs FILE.jsonl`` each line ``{"task_id": "17", "program": "..."}`` (optionally
``"entry_point": "name"``) is run against its task. One JSON row per input line is written, in input
order, to ``--out`` (or stdout): ``{"task_id", "status", "error_type", "message", "line", "seconds",
"collateral", "strict"}`` (``status`` is ASPERA's verdict; ``collateral`` counts the rows of the
world the program was given that it removed or changed and the task's reference program, run on the
same world, did not; ``strict`` is ``pass`` with no collateral). With ``--explain`` every row that
did not pass also gets ``divergence_line``, ``expected_call``, ``actual_call`` (where the program's
execution first departs from the task's reference program run on the same initial state:
:func:`primsel.eval.localise.localise`) and ``category`` (its diagnosis,
:func:`primsel.eval.attribution.attribute`); those rows are written once every program has run. The
summary line is ``passed N/M, strict K/M``, on stderr when the rows go to stdout, on stdout with
``--out``; progress goes to stderr. The output of ``primsel
extract`` is a ``--programs`` file as it is: a row whose ``status`` is ``truncated`` (the answer was
cut off) is not run and gets ``error`` / ``TruncatedAnswer``. A line that is not a JSON object with
a ``task_id`` and a ``program`` is reported on stderr (file, line and, for bad JSON, column) and
left out; the other lines are run. Exit status 0 when the run completed (whatever the verdicts), 1
when it completed with lines left out, 2 on bad arguments, an unreadable file or dataset, 130 when
interrupted (Ctrl-C; the rows already written are kept).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from contextlib import ExitStack

from primsel.commands.common import UsageError, output_stream, read_jsonl_objects, summary_stream
from primsel.simulator.verify import ROW_KEYS, TRUNCATED, verdict_rows

__all__ = ["ROW_KEYS", "add_arguments", "main", "read_programs", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Attach the ``verify`` options to ``parser``."""
    parser.add_argument(
        "--data",
        metavar="PATH",
        help="Asper-Bench archive (.tgz as released); default $PRIMSEL_ASPER_BENCH, else the built-in tasks",
    )
    parser.add_argument(
        "--programs",
        metavar="FILE.jsonl",
        help='programs to run, one JSON object per line: {"task_id": "17", "program": "..."}; '
        "default: every task's reference program",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="parallel worker processes (default: CPU count; at most 4 per CPU)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="time limit per task in seconds, at most 86400 (default 10)",
    )
    parser.add_argument(
        "--out", metavar="FILE.jsonl", help="write the result rows here instead of stdout"
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="add divergence_line, expected_call, actual_call and category to the rows that did not pass "
        "(runs the reference program of each such task on the same initial state)",
    )


def main(args: argparse.Namespace) -> int:
    """Run the verification; returns the exit status (see the module docstring)."""
    try:
        return _verify(args)
    except KeyboardInterrupt:
        print("primsel verify: interrupted; the rows already written are kept", file=sys.stderr)
        return 130


def _verify(args: argparse.Namespace) -> int:
    from primsel.checks import MAX_TIMEOUT
    from primsel.datasets import DatasetError, load_tasks, resolve_dataset
    from primsel.simulator.sandbox import MAX_WORKERS_PER_CPU, Sandbox

    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be >= 1, got {args.workers}")
    if not (math.isfinite(args.timeout) and 0 < args.timeout <= MAX_TIMEOUT):
        raise UsageError(
            f"--timeout must be a finite number of seconds in (0, {MAX_TIMEOUT:g}], got {args.timeout}"
        )
    most = MAX_WORKERS_PER_CPU * (os.cpu_count() or 1)
    if args.workers is not None and args.workers > most:
        print(
            f"primsel verify: --workers {args.workers} capped at {most} ({MAX_WORKERS_PER_CPU} per CPU)",
            file=sys.stderr,
        )
    bad: list[str] = []
    jobs = read_programs(args.programs, bad) if args.programs else None
    for problem in bad:
        print(f"primsel verify: {problem}; line left out", file=sys.stderr)
    try:
        archive = resolve_dataset(args.data)
        tasks = {task.id: task for task in load_tasks(archive)}
    except DatasetError as exc:
        raise UsageError(str(exc)) from exc
    if archive is None:
        print(
            f"primsel verify: no Asper-Bench archive (--data or $PRIMSEL_ASPER_BENCH); "
            f"running the {len(tasks)} built-in tasks",
            file=sys.stderr,
        )
    if jobs is None:
        jobs = [(task_id, task.program, None) for task_id, task in tasks.items()]

    total = len(jobs)
    passed = strict = 0
    progress = _Progress(total)
    with ExitStack() as stack:
        out = output_stream(stack, args.out)
        sandbox = stack.enter_context(Sandbox(workers=args.workers, timeout=args.timeout))
        if getattr(args, "explain", False):
            # imported only here: the library imports the apps, which verify alone never needs
            from primsel.eval.explain import explained_rows
            from primsel.simulator.library import build_library

            rows = explained_rows(sandbox, tasks, jobs, build_library())
        else:
            rows = verdict_rows(sandbox, tasks, jobs)
        for done, row in enumerate(rows, start=1):
            passed += row["status"] == "pass"
            strict += row["strict"]
            out.write(json.dumps(row) + "\n")
            out.flush()
            progress.update(done, passed)
    left_out = f" ({len(bad)} bad lines left out)" if bad else ""
    print(f"passed {passed}/{total}, strict {strict}/{total}{left_out}", file=summary_stream(args.out))
    return 1 if bad else 0


def read_programs(
    path: str, bad: list[str] | None = None
) -> list[tuple[str, str | None, str | None]]:
    """Read ``(task_id, program, entry_point)`` jobs from a JSONL file; blank lines are skipped.

    A row with ``"status": "truncated"`` (``primsel extract``'s mark of an answer cut off) gives
    the entry point :data:`primsel.simulator.verify.TRUNCATED`: it is reported, not run.

    Parameters
    ----------
    path : the JSONL file.
    bad : when a list, a line that is not a JSON object with the fields below is not an error:
        its message is appended here and the line left out.

    Raises
    ------
    primsel.commands.common.UsageError : the file is missing or unreadable, or (without ``bad``) a
        line is not a JSON object with a string (or integer) ``task_id`` and a string (or null)
        ``program``; the message gives the line number (and the column of bad JSON).
    """
    jobs = []
    for where, record in read_jsonl_objects(
        path, "task_id and program", what="--programs", bad=bad
    ):
        task_id = record.get("task_id")
        if isinstance(task_id, int) and not isinstance(task_id, bool):
            task_id = str(task_id)
        program, entry = record.get("program"), record.get("entry_point")
        if not isinstance(task_id, str) or not task_id:
            problem = f"{where}: 'task_id' must be a non-empty string"
        elif "program" not in record:
            problem = f"{where}: missing 'program'"
        elif program is not None and not isinstance(program, str):
            problem = f"{where}: 'program' must be a string or null"
        elif entry is not None and not isinstance(entry, str):
            problem = f"{where}: 'entry_point' must be a string or null"
        else:
            jobs.append(
                (task_id, program, TRUNCATED if record.get("status") == "truncated" else entry)
            )
            continue
        if bad is None:
            raise UsageError(problem)
        bad.append(problem)
    return jobs


class _Progress:
    """Progress lines on stderr, at most every two seconds and at the end."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.start = self.last = time.monotonic()

    def update(self, done: int, passed: int) -> None:
        """Print a progress line when two seconds have passed or all is done."""
        now = time.monotonic()
        if done == self.total or now - self.last >= 2.0:
            self.last = now
            print(
                f"primsel verify: {done}/{self.total} done, {passed} passed ({now - self.start:.1f} s)",
                file=sys.stderr,
                flush=True,
            )


def run(argv: list[str] | None = None) -> int:
    """Parse ``argv`` as the ``verify`` subcommand alone and run it (exit 2 on bad arguments)."""
    parser = argparse.ArgumentParser(prog="primsel verify", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return main(args)
    except UsageError as exc:
        print(f"primsel verify: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
