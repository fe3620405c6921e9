"""Sandbox verdicts and isolation, on small tasks built here (plus archive checks when available)."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from primsel.simulator import landlock, seccomp
from primsel.simulator.sandbox import Sandbox, remove_stale_scratch, sandbox_info
from primsel.types import ExecutionResult, Task

SETUP = "def setup_env():\n    pass\n"
CHECK_42 = textwrap.dedent(
    """\
    def evaluate(query: str, executable: Callable[[], Any], setup_function: Callable[[], Any]):
        setup_function()
        answer = executable()
        if answer != 42:
            raise SolutionError(f"wrong answer {answer!r}")
    """
)
CHECK_TRUE = CHECK_42.replace("answer != 42", "answer is not True")


def make_task(check: str = CHECK_42, setup: str = SETUP, task_id: str = "t", pairs: int = 1) -> Task:
    """A task whose EP checks the program's return value (no library state needed)."""
    return Task(
        id=task_id,
        query="Hey, [Assistant], test.",
        program="def reference():\n    return 42\n",
        setup_programs=(setup,) * pairs,
        evaluation_programs=(check,) * pairs,
        scenario={
            "apps": ["exceptions", "time_utils"],
            "simulation_tools": ["company_directory::simulate_org_structure"],
            "evaluation_tools": ["exceptions::SolutionError"],
        },
    )


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=2, timeout=10) as box:
        yield box


def run(box: Sandbox, program: str | None, task: Task | None = None, entry: str | None = None) -> ExecutionResult:
    return box.execute(task or make_task(), program, entry)


# -- statuses ---------------------------------------------------------------------------------


def test_pass(sandbox):
    result = run(sandbox, "def answer():\n    return 6 * 7\n")
    assert (result.task_id, result.status, result.error_type, result.line) == ("t", "pass", None, None)
    assert result.passed


def test_fail_on_solution_error(sandbox):
    result = run(sandbox, "def answer():\n    return 41\n")
    assert (result.status, result.error_type, result.message) == ("fail", "SolutionError", "wrong answer 41")
    assert result.line is None  # raised by the EP, not the program


def test_fail_on_assertion_error_with_program_line(sandbox):
    result = run(sandbox, "def answer():\n    x = 1\n    assert x == 2, 'nope'\n")
    assert (result.status, result.error_type, result.message, result.line) == ("fail", "AssertionError", "nope", 3)


def test_requires_user_input(sandbox):
    result = run(sandbox, "def answer():\n    raise RequiresUserInput('which Alex?')\n")
    assert (result.status, result.error_type, result.message, result.line) == (
        "requires_user_input",
        "RequiresUserInput",
        "which Alex?",
        2,
    )


def test_error_reports_type_and_program_line(sandbox):
    result = run(sandbox, "def answer():\n    values = []\n\n    return values[3]\n")
    assert (result.status, result.error_type, result.line) == ("error", "IndexError", 4)


def test_error_inside_library_reports_calling_program_line(sandbox):
    # parse_time_string refuses a non-member with ParseError (spec 4.5); the line is the program's call.
    result = run(sandbox, "def answer():\n    x = 1\n    return parse_time_string('teatime')\n")
    assert (result.status, result.error_type, result.line) == ("error", "ParseError", 3)


def test_error_in_nested_program_function_reports_its_line(sandbox):
    program = "def answer():\n    def helper(v):\n        return 1 / v\n    return helper(0)\n"
    result = run(sandbox, program)
    assert (result.status, result.error_type, result.line) == ("error", "ZeroDivisionError", 3)


def test_system_exit_is_an_error(sandbox):
    result = run(sandbox, "def answer():\n    raise SystemExit(3)\n")
    assert (result.status, result.error_type, result.line) == ("error", "SystemExit", 2)


def test_syntax_error(sandbox):
    result = run(sandbox, "def answer(:\n    return 42\n")
    assert (result.status, result.error_type, result.line) == ("error", "SyntaxError", 1)


def test_syntax_error_found_by_the_compiler(sandbox):
    result = run(sandbox, "def answer():\n    return 42\nreturn 1\n")
    assert (result.status, result.error_type, result.line) == ("error", "SyntaxError", 3)


@pytest.mark.parametrize("program", [None, "", "  \n\n", "x = 42\n", "# only a comment\n"])
def test_no_program_starts_nothing(program):
    box = Sandbox(workers=1)
    try:
        result = box.execute(make_task(), program)
        assert (result.status, result.error_type) == ("no_program", None)
        assert box._all == []  # no worker process was started
    finally:
        box.close()


def test_preferred_entry_point(sandbox):
    program = "def first():\n    return 1\n\ndef second():\n    return 42\n"
    assert run(sandbox, program).status == "fail"
    assert run(sandbox, program, entry="second").status == "pass"
    assert run(sandbox, program, entry="missing").status == "fail"  # falls back to the first def


def test_every_pair_runs_and_the_first_failure_decides(sandbox):
    second_check = CHECK_42.replace("answer != 42", "answer != 43")
    task = dataclasses.replace(
        make_task(pairs=2), evaluation_programs=(CHECK_42, second_check)
    )
    result = run(sandbox, "def answer():\n    return 42\n", task)
    assert (result.status, result.message) == ("fail", "wrong answer 42")
    assert run(sandbox, "def answer():\n    return 42\n", make_task(pairs=2)).status == "pass"


def test_called_primitives_in_first_call_order(sandbox):
    program = "def answer():\n    now_()\n    date_by_mdy(1, 2, 2024)\n    now_()\n    return 42\n"
    result = run(sandbox, program)
    assert result.status == "pass"
    assert result.called_primitives == ("time_utils.now_", "time_utils.date_by_mdy")


def test_trace_records_class_instantiations_and_outcomes_per_call(sandbox):
    program = (
        "def answer():\n"
        "    Duration(45, TimeUnits.Minutes)\n"
        "    Event(subject='x', attendees=[])\n"
        "    RepetitionSpec(frequency=EventFrequency.WEEKLY, period=2)\n"
        "    now_()\n"
        "    return 42\n"
    )
    task = make_task(pairs=2)
    apps = ["exceptions", "time_utils", "company_directory", "work_calendar"]
    result = run(sandbox, program, dataclasses.replace(task, scenario={**task.scenario, "apps": apps}))
    assert result.status == "pass"
    calls = [
        ("time_utils.Duration", 2, "45, TimeUnits.Minutes"),
        ("work_calendar.Event", 3, "subject='x', attendees=[]"),
        ("time_utils.RepetitionSpec", 4, "frequency='weekly', period=2"),
        ("time_utils.now_", 5, ""),
    ]
    assert result.trace == tuple(calls + calls)  # one program call per (SIP, EP) pair
    assert result.outcomes == ((4, "return", "42"), (4, "return", "42"))


def test_outcomes_record_what_the_program_raised(sandbox):
    result = run(sandbox, "def answer():\n    raise RequiresUserInput('which one?')\n")
    assert result.status == "requires_user_input"
    assert result.trace == (("exceptions.RequiresUserInput", 2, "'which one?'"),)
    assert result.outcomes == ((1, "raise", "RequiresUserInput: which one?"),)


def test_summaries_are_short_and_deterministic():
    from primsel.simulator.apps.work_calendar import Event, ShowAsStatus
    from primsel.simulator.program import SUMMARY_ITEMS, summarise

    assert summarise({"b", "a", 3}) == "{'a', 'b', 3}"  # sorted texts: the same in every process
    assert summarise(list(range(20))) == "[" + ", ".join(map(str, range(SUMMARY_ITEMS))) + ", ...+12]"
    assert summarise(Event(subject="s", show_as_status=ShowAsStatus.Free)) == "Event(subject='s', show_as_status='free')"
    assert summarise("x" * 100) == repr("x" * 80) + "..."
    assert summarise(object()) == "<object>"  # never a memory address
    assert summarise([[[[[1]]]]]) == "[[[[...]]]]"


def test_reference_import_paths_resolve_to_our_modules(sandbox):
    program = textwrap.dedent(
        """\
        def answer():
            import primsel.simulator.apps.time_utils as ours
            import primsel.simulator.state as state
            from aspera.apps_implementation.time_utils import now_ as theirs
            import aspera.apps_implementation.exceptions as exceptions
            from aspera.simulation.execution_context import get_current_context, new_context
            return (
                theirs is ours.now_
                and exceptions.RequiresUserInput is RequiresUserInput
                and get_current_context is state.get_current_context
            )
        """
    )
    before = {name for name in sys.modules if name.split(".")[0] == "aspera"}
    assert run(sandbox, program, make_task(CHECK_TRUE)).status == "pass"
    # the aliases exist in the workers only (another test may have imported ASPERA's own code here)
    after = {name for name in sys.modules if name.split(".")[0] == "aspera"}
    assert after == before


def test_tool_import_paths_resolve_for_the_judge_but_not_in_the_program(sandbox):
    # The setup and check tools are the judge's: the evaluation program imports them by the
    # reference's paths, the program's process does not have them.
    check = CHECK_TRUE.replace(
        "    setup_function()\n",
        "    setup_function()\n"
        "    from aspera.runtime_state_generation_tools_implementation.company_directory import simulate_org_structure\n"
        "    from aspera.execution_evaluation_tools_implementation.exceptions import SolutionError\n"
        "    from aspera.execution_evaluation_tools.time_utils import repetition_schedule\n"
        "    assert callable(simulate_org_structure) and callable(repetition_schedule)\n",
    )
    probe = textwrap.dedent(
        """\
        def answer():
            import sys
            try:
                import aspera.execution_evaluation_tools_implementation.exceptions
            except ImportError:
                return not any("check_tools" in name or "setup_tools" in name for name in sys.modules)
            return False
        """
    )
    assert run(sandbox, probe, make_task(check)).status == "pass"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"workers": 0},
        {"timeout": 0},
        {"timeout": float("inf")},
        {"timeout": float("nan")},
        {"timeout": 1e300},
        {"timeout": 86400.5},
        {"memory_mb": 1},
        {"stdout_cap": -1},
        {"program_cap": 0},
    ],
)
def test_parameters_are_validated(kwargs):
    with pytest.raises(ValueError):
        Sandbox(**kwargs)


def test_workers_are_capped_at_four_per_cpu():
    cpus = os.cpu_count() or 1
    assert Sandbox(workers=100 * cpus).workers == 4 * cpus  # nothing starts before first use
    assert Sandbox(workers=1).workers == 1
    assert Sandbox(timeout=86400).timeout == 86400.0


def test_sandbox_info_names_the_layers():
    info = sandbox_info()
    assert info["audit_hook"] is True
    assert info["seccomp"] == seccomp.status()[0]
    assert info["landlock"] == landlock.status()[0]
    assert sandbox_info(seccomp=False)["seccomp"] is False
    assert sandbox_info(landlock=False)["landlock"] is False
    assert Sandbox(landlock=False).info()["landlock_detail"] == "disabled by the caller"


# -- limits -----------------------------------------------------------------------------------


def test_endless_loop_times_out_and_the_next_task_runs():
    with Sandbox(workers=1, timeout=2) as box:
        result = run(box, "def answer():\n    while True:\n        pass\n")
        assert (result.status, result.error_type) == ("timeout", None)
        assert run(box, "def answer():\n    return 42\n").status == "pass"


def test_sub_second_time_limit():
    with Sandbox(workers=1, timeout=0.2) as box:
        result = run(box, "def answer():\n    import time\n    time.sleep(0.5)\n    return 42\n")
        assert result.status == "timeout"


def test_time_limit_covers_all_pairs_of_a_task():
    program = "def answer():\n    import time\n    time.sleep(1.2)\n    return 42\n"
    with Sandbox(workers=1, timeout=2.0) as box:
        assert run(box, program).status == "pass"
        assert run(box, program, make_task(pairs=2)).status == "timeout"


def test_output_is_capped_and_memory_stays_flat(sandbox):
    program = textwrap.dedent(
        """\
        def answer():
            import resource
            def rss_kib():  # peak resident set size (/proc is not readable in the sandbox)
                return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            before = rss_kib()
            line = "x" * 199
            for _ in range(300_000):  # 60 MB of output
                print(line)
            grown = rss_kib() - before
            assert grown < 16 * 1024, f"memory grew by {grown} KiB"
            return 42
        """
    )
    result = run(sandbox, program)
    assert (result.status, result.stdout_truncated) == ("pass", True)
    assert run(sandbox, "def answer():\n    print('hello')\n    return 42\n").stdout_truncated is False


def test_endless_print_loop_is_reported_truncated():
    with Sandbox(workers=1, timeout=1) as box:
        result = run(box, "def answer():\n    while True:\n        print('spam' * 50)\n")
        assert (result.status, result.stdout_truncated) == ("timeout", True)


def test_memory_limit():
    with Sandbox(workers=1, memory_mb=256) as box:
        result = run(box, "def answer():\n    block = bytearray(1024 ** 3)\n    return 42\n")
        assert (result.status, result.error_type, result.line) == ("error", "MemoryError", 2)


# -- isolation --------------------------------------------------------------------------------


def test_forbidden_operations_fail_and_leave_the_host_untouched(sandbox, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    victim = tmp_path / "keep.txt"
    victim.write_text("data")
    target = tmp_path / "created.txt"
    programs = {
        "open relative": "def answer():\n    open('x', 'w').write('x')\n",
        "open absolute": f"def answer():\n    open({str(target)!r}, 'a')\n",
        "os.open": f"def answer():\n    import os\n    os.open({str(target)!r}, os.O_CREAT | os.O_WRONLY)\n",
        "remove": f"def answer():\n    import os\n    os.remove({str(victim)!r})\n",
        "mkdir": f"def answer():\n    import os\n    os.mkdir({str(tmp_path / 'newdir')!r})\n",
        "os.system": "def answer():\n    import os\n    return os.system('true')\n",
        "subprocess": "def answer():\n    import subprocess\n    subprocess.run(['true'])\n",
        "socket": "def answer():\n    import socket\n    socket.socket()\n",
        "fork": "def answer():\n    import os\n    os.fork()\n",
        "kill parent": "def answer():\n    import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)\n",
        "ctypes": "def answer():\n    import ctypes\n    ctypes.CDLL(None)\n",
    }
    for name, program in programs.items():
        result = run(sandbox, program)
        assert (name, result.status, result.error_type) == (name, "error", "PermissionError")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
    assert victim.read_text() == "data"
    assert run(sandbox, "def answer():\n    return 42\n").status == "pass"  # the workers survived


def test_audit_hook_alone_blocks_writes_when_seccomp_is_off(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with Sandbox(workers=1, seccomp=False) as box:
        for program in (
            "def answer():\n    open('x', 'w')\n",
            "def answer():\n    import socket\n    socket.socket()\n",
            "def answer():\n    import subprocess\n    subprocess.run(['true'])\n",
        ):
            result = run(box, program)
            assert (result.status, result.error_type) == ("error", "PermissionError")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not seccomp.status()[0], reason="seccomp is not available here")
def test_seccomp_filter_alone_denies_writes_processes_and_network(tmp_path):
    target = tmp_path / "created.txt"
    script = textwrap.dedent(
        f"""\
        import os, socket
        from primsel.simulator import landlock, seccomp, worker
        seccomp.install()
        outcomes = []
        for attempt in (
            lambda: open({str(target)!r}, "w"),
            lambda: os.mkdir({str(tmp_path / "d")!r}),
            lambda: socket.socket(),
            lambda: os.fork(),
            lambda: os.kill(os.getppid(), 0),
        ):
            try:
                attempt()
                outcomes.append("allowed")
            except PermissionError:
                outcomes.append("denied")
        open(__file__).close()  # reading stays allowed
        print(",".join(outcomes))
        """
    )
    script_path = tmp_path / "probe.py"
    script_path.write_text(script)
    out = subprocess.run([sys.executable, str(script_path)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ",".join(["denied"] * 5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["probe.py"]


def test_crashing_child_is_an_error_and_the_pool_survives(sandbox):
    # a real fault (reading address 0): the kernel's SIGSEGV ends even the first process of a
    # pid namespace, which ignores the signals it sends itself (raise(SIGSEGV) included)
    result = run(sandbox, "def answer():\n    import faulthandler\n    faulthandler._read_null()\n")
    assert (result.status, result.error_type) == ("error", "ProcessDied")
    assert "SIGSEGV" in result.message
    assert run(sandbox, "def answer():\n    return 42\n").status == "pass"


def test_dead_worker_is_restarted():
    with Sandbox(workers=1) as box:
        assert run(box, "def answer():\n    return 42\n").status == "pass"
        box._all[0].process.kill()
        box._all[0].process.wait()
        assert run(box, "def answer():\n    return 42\n").status == "pass"


def test_worker_dying_mid_task_is_an_error_and_the_next_task_runs():
    with Sandbox(workers=1, timeout=20) as box:
        assert run(box, "def answer():\n    return 42\n").status == "pass"
        worker = box._all[0].process
        results = []
        thread = threading.Thread(
            target=lambda: results.append(run(box, "def answer():\n    import time\n    time.sleep(10)\n"))
        )
        thread.start()
        time.sleep(1.0)
        worker.kill()
        thread.join()
        assert (results[0].status, results[0].error_type) == ("error", "WorkerDied")
        assert run(box, "def answer():\n    return 42\n").status == "pass"


PROBE_TASK_CHECK = textwrap.dedent(
    """\
    def evaluate(query: str, executable: Callable[[], Any], setup_function: Callable[[], Any]):
        import datetime
        setup_function()
        answer = executable()
        expected = (datetime.datetime(2024, 6, 25, 9, 6), False, False, 42, 1)
        if answer != expected:
            raise SolutionError(f"leak: {answer!r}")
    """
)
PROBE_SETUP = textwrap.dedent(
    """\
    def setup_env():
        simulate_org_structure(["Ana", "Bogdan"])
    """
)
PROBE = textwrap.dedent(
    """\
    def probe():
        import builtins
        import primsel.simulator.state as state
        from primsel.simulator.state import get_current_context
        return (
            now_(),
            hasattr(state, "LEAKED"),
            hasattr(builtins, "LEAKED"),
            len([1] * 42),
            sum(1 for row in get_current_context().table("EMPLOYEES") if row["name"] == "Ana"),
        )
    """
)
VANDAL = textwrap.dedent(
    """\
    def vandal():
        import builtins
        import primsel.simulator.apps.time_utils as time_utils
        import aspera.apps_implementation.time_utils as their_time_utils
        import primsel.simulator.state as state
        time_utils.now_ = lambda: None
        their_time_utils.now_ = lambda: None
        state.LEAKED = True
        builtins.LEAKED = True
        builtins.len = lambda value: 0
        state.ExecutionContext.__init__ = lambda self: None
        state.get_current_context().table("EMPLOYEES").clear()
        state.set_current_context(None)
        return 42
    """
)


def test_no_state_leaks_between_tasks():
    task = make_task(PROBE_TASK_CHECK, setup=PROBE_SETUP)
    with Sandbox(workers=1) as box:
        assert run(box, PROBE, task).status == "pass"
        run(box, VANDAL, task)
        run(box, VANDAL, task)
        assert run(box, PROBE, task).status == "pass"


def _mixed_jobs():
    task = make_task()
    programs = [
        "def a():\n    return 42\n",
        "def b():\n    return 0\n",
        "def c():\n    raise RequiresUserInput('?')\n",
        "def d():\n    return {}['k']\n",
        VANDAL,
        "",
        "def e(:\n",
        "def f():\n    import primsel.simulator.apps.time_utils as t\n    return 42 if t.now_() is not None else 0\n",
    ]
    return [(dataclasses.replace(task, id=str(i)), program, None) for i, program in enumerate(programs)]


def test_verdicts_do_not_depend_on_order():
    jobs = _mixed_jobs()
    with Sandbox(workers=2) as box:
        forward = {r.task_id: (r.status, r.error_type) for r in box.execute_many(jobs)}
        backward = {r.task_id: (r.status, r.error_type) for r in box.execute_many(reversed(jobs))}
        shuffled_jobs = list(jobs)
        random.Random(7).shuffle(shuffled_jobs)
        shuffled = list(box.execute_many(shuffled_jobs))
    assert [r.task_id for r in shuffled] == [job[0].id for job in shuffled_jobs]  # input order
    assert forward == backward == {r.task_id: (r.status, r.error_type) for r in shuffled}
    assert [forward[str(i)][0] for i in range(8)] == [
        "pass", "fail", "requires_user_input", "error", "pass", "no_program", "error", "pass",
    ]  # fmt: skip


def test_execute_is_thread_safe(sandbox):
    programs = ["def a():\n    return 42\n", "def b():\n    return 1\n"] * 4
    results = [None] * len(programs)

    def work(i):
        results[i] = run(sandbox, programs[i]).status

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(programs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == ["pass", "fail"] * 4


# -- hardening: host, other processes, the caller --------------------------------------------

needs_landlock = pytest.mark.skipif(not landlock.status()[0], reason="Landlock is not available here")
needs_seccomp = pytest.mark.skipif(not seccomp.status()[0], reason="seccomp is not available here")
FAKE_PASS = json.dumps(
    {
        "status": "pass",
        "error_type": None,
        "message": None,
        "line": None,
        "called_primitives": [],
        "stdout_truncated": False,
    }
)


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] not in ("Z", "X"):
                found.append(int(entry))
    return found


def _wait_until(condition, within: float = 30.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_program_runs_in_its_own_session_and_process_group(sandbox):
    program = "def answer():\n    import os\n    return 42 if os.getsid(0) == os.getpgid(0) == os.getpid() else 0\n"
    assert run(sandbox, program).status == "pass"


@needs_seccomp
def test_scheduling_and_signals_of_other_processes_are_denied(sandbox, sleeper):
    before = os.getpriority(os.PRIO_PROCESS, sleeper)
    calls = {
        "setpriority": f"os.setpriority(os.PRIO_PROCESS, {sleeper}, {before})",
        "setpriority of the caller's group": f"os.setpriority(os.PRIO_PGRP, {os.getpgid(0)}, {before})",
        "sched_setaffinity": f"os.sched_setaffinity({sleeper}, os.sched_getaffinity({sleeper}))",
        "sched_setscheduler": f"os.sched_setscheduler({sleeper}, os.SCHED_OTHER, os.sched_param(0))",
        "sched_setparam": f"os.sched_setparam({sleeper}, os.sched_param(0))",
        "setpgid": "os.setpgid(0, 0)",
        "setsid": "os.setsid()",
    }
    for name, call in calls.items():
        result = run(sandbox, f"def answer():\n    import os\n    {call}\n    return 42\n")
        assert (name, result.status, result.error_type) == (name, "error", "PermissionError")
    assert os.getpriority(os.PRIO_PROCESS, sleeper) == before
    assert _running(sleeper)


@pytest.mark.parametrize(
    "call",
    ["gc.get_objects()", "gc.get_referrers(gc)", "gc.get_referents(gc)", "sys._current_frames()"],
)
def test_introspection_that_reaches_the_harness_is_refused(sandbox, call):
    result = run(sandbox, f"def answer():\n    import gc, sys\n    {call}\n    return 42\n")
    assert (result.status, result.error_type, result.line) == ("error", "PermissionError", 3)


def test_audit_hook_survives_rebinding_module_globals_and_builtins():
    # Only the audit hook is on, so this shows what it refuses by itself. The directory made if
    # it failed would be inside the task's throwaway working directory.
    program = textwrap.dedent(
        """\
        def answer():
            import builtins, os, sys
            main = sys.modules["__main__"]
            main._AUDIT_BLOCKED = frozenset()
            main._WRITE_FLAGS = 0
            builtins.isinstance = lambda *args: False
            builtins.PermissionError = ValueError
            os.mkdir("made-by-the-program")
            return 42
        """
    )
    with Sandbox(workers=1, seccomp=False, landlock=False) as box:
        result = run(box, program)
    assert (result.status, result.error_type, result.line) == ("error", "PermissionError", 8)


@needs_landlock
def test_other_processes_and_files_outside_the_library_cannot_be_read(sandbox, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the caller's file")
    targets = {
        "the caller's environment": f"/proc/{os.getpid()}/environ",
        "the caller's memory": f"/proc/{os.getpid()}/mem",
        "the worker's environment": "/proc/{os.getppid()}/environ",
        "the worker's request pipe": "/proc/{os.getppid()}/fd/0",
        "its own environment": "/proc/self/environ",
        "a file of the caller": str(secret),
        "the home directory": os.path.expanduser("~"),
    }
    covered = sandbox.info()["process_list_hidden"]
    for name, path in targets.items():
        program = f"def answer():\n    import os\n    os.close(os.open(f{path!r}, os.O_RDONLY | os.O_NONBLOCK))\n"
        result = run(sandbox, program)
        # another process's /proc entry: refused, or absent where /proc is covered (and then
        # so is its own)
        hidden = path.startswith("/proc/") and (covered or not path.startswith("/proc/self/"))
        allowed = {"PermissionError", "FileNotFoundError"} if hidden else {"PermissionError"}
        assert (name, result.status) == (name, "error") and result.error_type in allowed, (name, result)


def test_standard_library_modules_still_import(sandbox):
    program = textwrap.dedent(
        """\
        def answer():
            import importlib
            names = (
                "datetime collections re random typing itertools functools math json string copy "
                "dataclasses enum calendar zoneinfo decimal fractions statistics heapq bisect "
                "operator textwrap pprint difflib hashlib uuid base64 struct array csv io time "
                "unicodedata numbers abc contextlib types weakref secrets locale logging "
                "traceback inspect dateutil.parser dateutil.relativedelta"
            ).split()
            for name in names:
                importlib.import_module(name)
            import collections, datetime, enum, typing, zoneinfo
            collections.namedtuple("Pair", "a b")(1, 2)
            enum.Enum("Colour", "RED GREEN")
            typing.TypeVar("T")
            paris = zoneinfo.ZoneInfo("Europe/Paris")
            offset = datetime.datetime(2024, 7, 1, tzinfo=paris).utcoffset()
            return 42 if offset == datetime.timedelta(hours=2) else 0
        """
    )
    result = run(sandbox, program)
    assert (result.status, result.message) == ("pass", None)


def test_stdout_buffer_takes_bytes_within_the_cap():
    program = "def answer():\n    import sys\n    sys.stdout.buffer.write(b'x' * 40)\n    return 42\n"
    for cap, truncated in ((100, False), (10, True)):
        with Sandbox(workers=1, stdout_cap=cap) as box:
            result = run(box, program)
        assert (result.status, result.stdout_truncated) == ("pass", truncated)


# -- hardening: verdicts ----------------------------------------------------------------------


def test_the_program_process_holds_no_verdict_machinery(sandbox):
    program = textwrap.dedent(
        """\
        def answer():
            import os, sys
            main = sys.modules["__main__"]
            found = [n for n in ("_send", "_verdict", "_channel") if hasattr(main, n)]
            found += [n for n in sys.modules if "judge" in n or "check_tools" in n or "setup_tools" in n]
            if found:
                return found
            os._exit(0)
        """
    )
    result = run(sandbox, program)
    assert (result.status, result.error_type) == ("error", "ProcessDied")
    assert "exited with status 0" in result.message


@pytest.mark.parametrize("payload", [FAKE_PASS, "[" * 200_000])
def test_verdict_written_to_every_descriptor_is_rejected(sandbox, payload):
    program = textwrap.dedent(
        f"""\
        def answer():
            import os
            line = ("R " + {payload!r} + "\\n").encode()
            for fd in range(3, 64):
                try:
                    os.write(fd, line)
                except OSError:
                    pass
            os._exit(0)
        """
    )
    result = run(sandbox, program)
    # The program's only way out is its answer pipe to the judge: the line is read as a frame
    # header announcing ~1.3 GB, which is refused before anything more is read.
    assert (result.status, result.error_type) == ("error", "UnsupportedReturn")
    assert "above the cap" in result.message


@pytest.mark.parametrize(
    "rebind",
    [
        # the worker's own functions that compute a verdict (whichever exist)
        "main = sys.modules['__main__']\n"
        "    for name in ('_verdict', '_classify', '_result', '_describe'):\n"
        "        if hasattr(main, name):\n"
        "            setattr(main, name, lambda *args, **kwargs: json.loads(FAKE))",
        "json.dumps = lambda *args, **kwargs: FAKE",
    ],
)
def test_rebinding_what_computes_the_verdict_does_not_make_a_pass(sandbox, rebind):
    header = f"FAKE = {FAKE_PASS!r}\n\n\ndef answer():\n    import json, sys\n"
    program = header + f"    {rebind}\n    raise ValueError('wrong')\n"
    result = run(sandbox, program)
    assert (result.status, result.error_type, result.message) == ("error", "ValueError", "wrong")


def test_exception_whose_str_fails_still_reports_its_class(sandbox):
    program = textwrap.dedent(
        """\
        def answer():
            class Opaque(Exception):
                def __str__(self):
                    raise RuntimeError("no")
            raise Opaque()
        """
    )
    result = run(sandbox, program)
    assert (result.status, result.error_type, result.line) == ("error", "Opaque", 5)


def test_lone_surrogates_do_not_break_anything(sandbox):
    result = run(sandbox, "def answer():\n    raise ValueError('bad ' + chr(0xD800))\n")
    assert (result.status, result.error_type, result.message) == ("error", "ValueError", "bad ?")
    result = run(sandbox, "def answer():\n    return 42  # \ud800\n")
    assert (result.status, result.error_type) == ("error", "UnicodeEncodeError")


def test_child_is_killed_as_soon_as_its_verdict_is_in():
    # A forged verdict followed by a long sleep: the worker must not wait for the program.
    program = textwrap.dedent(
        f"""\
        def answer():
            import os, time
            for fd in range(3, 64):
                try:
                    os.write(fd, ("R " + {FAKE_PASS!r} + "\\n").encode())
                except OSError:
                    pass
            time.sleep(600)
        """
    )
    # behaviour, not speed: the verdict comes long before the program's time limit (60 s), and
    # the program is gone soon after (killed, not waited for: it would sleep 600 s). The bounds
    # hold on a machine at load 15; at load 7-13 the program was seen 0.26 s after the verdict.
    with Sandbox(workers=1, timeout=60) as box:
        result = run(box, program)
        assert (result.status, result.error_type) == ("error", "UnsupportedReturn")
        assert result.seconds < 30
        spawner = box._all[0].hello["spawner"]
        deadline = time.monotonic() + 30
        while (_children(box._all[0].process.pid) != [spawner] or _children(spawner)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _children(box._all[0].process.pid) == [spawner]  # no judge or program left over
        assert _children(spawner) == []


# -- hardening: the caller's process ----------------------------------------------------------


def test_large_program_is_refused_without_parsing(monkeypatch):
    parsed = []
    real_parse = ast.parse
    monkeypatch.setattr(ast, "parse", lambda source, *a, **k: parsed.append(len(source)) or real_parse(source, *a, **k))
    box = Sandbox(workers=1, program_cap=100)
    try:
        result = box.execute(make_task(), "def answer():\n    return 42\n" + "#" * 80 + "\n")
        assert (result.status, result.error_type) == ("error", "ProgramTooLarge")
        result = box.execute(make_task(), "def answer():\n    return 42  # " + "é" * 40 + "\n")  # 109 bytes
        assert (result.status, result.error_type) == ("error", "ProgramTooLarge")
        assert parsed == [] and box._all == []
        result = box.execute(make_task(), "def answer():\n    return 42\n")
        assert result.status == "pass"
        assert len(parsed) == 1  # parsed once in this process
    finally:
        box.close()


def test_default_program_cap_is_256_kib():
    box = Sandbox(workers=1)
    program = "def answer():\n    return 42\n" + "#" * (256 * 1024) + "\n"
    assert box.execute(make_task(), program).error_type == "ProgramTooLarge"
    assert box._all == []


def test_stale_scratch_directories_of_dead_processes_are_removed(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = tmp_path / f"primsel-worker-{gone.pid}-abc"
    live = tmp_path / f"primsel-worker-{os.getpid()}-abc"
    other = tmp_path / "primsel-worker-notapid"
    for path in (stale / "primsel-program-1", live, other):
        path.mkdir(parents=True)
    (tmp_path / f"primsel-worker-{gone.pid}-link").symlink_to(live)
    assert remove_stale_scratch(str(tmp_path)) == [str(stale)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [live.name, other.name, f"primsel-worker-{gone.pid}-link"]
    )


CALLER = textwrap.dedent(
    """\
    import json, sys, threading, time
    from primsel.datasets import load_builtin_tasks
    from primsel.simulator.sandbox import Sandbox

    box = Sandbox(workers=1, timeout=60)
    program = "def f():\\n    import time\\n    time.sleep(40)\\n"
    threading.Thread(target=box.execute, args=(load_builtin_tasks()[0], program), daemon=True).start()
    while not box._all or box._all[0].process is None:
        time.sleep(0.02)
    print(json.dumps({"worker": box._all[0].process.pid, "scratch": box._all[0].scratch}), flush=True)
    time.sleep(120)
    """
)


def test_workers_die_with_their_caller_and_leave_no_scratch(tmp_path):
    script = tmp_path / "caller.py"
    script.write_text(CALLER)
    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch_root)}
    caller = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        started = json.loads(caller.stdout.readline())
        scratch = started["scratch"]
        # Kill the caller while the worker is in the middle of the task.
        assert _wait_until(lambda: any(n.startswith("primsel-program-") for n in os.listdir(scratch)))
        caller.send_signal(signal.SIGKILL)
        caller.wait()
        assert _wait_until(lambda: not _running(started["worker"]))
        assert _wait_until(lambda: not os.path.exists(scratch))
    finally:
        caller.kill()
        caller.wait()
        if _running(started["worker"]):
            os.kill(started["worker"], signal.SIGKILL)


# -- the real benchmark -----------------------------------------------------------------------


@pytest.mark.asper
def test_every_pair_of_the_two_case_tasks_passes_on_its_own(asper_path):
    from primsel.datasets import load_tasks

    tasks = [t for t in load_tasks(asper_path) if len(t.setup_programs) == 2]
    assert [t.id for t in tasks] == ["141", "142", "145", "146", "147", "149", "154", "155", "161", "203"]
    jobs = []
    for task in tasks:
        jobs.append((task, task.program, None))
        for setup, check in zip(task.setup_programs, task.evaluation_programs):
            single = dataclasses.replace(task, setup_programs=(setup,), evaluation_programs=(check,))
            jobs.append((single, task.program, None))
    with Sandbox() as box:
        statuses = [r.status for r in box.execute_many(jobs)]
    assert statuses == ["pass"] * 30


# -- privileges -------------------------------------------------------------------------------

#: What the kernel says of the program process's ids and capabilities, in the words of
#: /proc/self/status (which a program process cannot read: /proc is covered or out of Landlock's
#: reach), asked with the system calls themselves: ``getres[ug]id``, ``setfs[ug]id(-1)``,
#: ``getgroups``, ``capget`` and ``prctl`` (``PR_CAPBSET_READ``, ``PR_CAP_AMBIENT_IS_SET``,
#: ``PR_GET_NO_NEW_PRIVS``). It needs ctypes and those calls: seccomp and the audit hook off.
STATUS_PROBE = textwrap.dedent(
    """\
    def answer():
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        class Header(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
        class Data(ctypes.Structure):
            _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                        ("inheritable", ctypes.c_uint32)]
        data = (Data * 2)()
        assert libc.capget(ctypes.byref(Header(0x20080522, 0)), data) == 0
        def caps(name):
            return "%016x" % (getattr(data[0], name) | getattr(data[1], name) << 32)
        bounding = sum(1 << cap for cap in range(64) if libc.prctl(23, cap, 0, 0, 0) == 1)
        ambient = sum(1 << cap for cap in range(64) if libc.prctl(47, 1, cap, 0, 0) == 1)
        fields = {
            "Uid": [str(v) for v in (*os.getresuid(), libc.setfsuid(-1))],
            "Gid": [str(v) for v in (*os.getresgid(), libc.setfsgid(-1))],
            "Groups": [str(g) for g in os.getgroups()],
            "CapInh": [caps("inheritable")], "CapPrm": [caps("permitted")], "CapEff": [caps("effective")],
            "CapBnd": ["%016x" % bounding], "CapAmb": ["%016x" % ambient],
            "NoNewPrivs": [str(libc.prctl(39, 0, 0, 0, 0))],
        }
        raise ValueError(repr(fields))
    """
)
#: The sandbox settings the probe needs (the privileges do not depend on them).
PROBE_SETTINGS = {"landlock": False, "seccomp": False, "audit_hook": False}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="capabilities are Linux's")
def test_program_process_has_no_privileges():
    with Sandbox(workers=1, **PROBE_SETTINGS) as box:
        result = run(box, STATUS_PROBE)
    assert (result.status, result.error_type) == ("error", "ValueError")
    fields = ast.literal_eval(result.message)
    expected_uid = "65534" if os.geteuid() == 0 else str(os.getuid())
    assert fields["Uid"] == [expected_uid] * 4  # real, effective, saved, file system
    assert fields["Uid"][0] != "0"
    assert fields["Gid"] == [("65534" if os.geteuid() == 0 else str(os.getgid()))] * 4
    assert fields["Groups"] == []
    for name in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(fields[name][0], 16) == 0, name
    if os.geteuid() == 0 or _user_namespaces_allowed():
        assert int(fields["CapBnd"][0], 16) == 0
    assert fields["NoNewPrivs"] == ["1"]


def test_program_user_is_configurable_and_never_root():
    if os.geteuid() == 0:
        with Sandbox(workers=1, program_user=(4321, 4322), **PROBE_SETTINGS) as box:
            fields = ast.literal_eval(run(box, STATUS_PROBE).message)
        assert (fields["Uid"], fields["Gid"]) == (["4321"] * 4, ["4322"] * 4)
    for user in ((0, 0), (0, 65534), (65534, 0), (-1, 1), (1,), (2**32 - 1, 1), ("1", 1)):
        with pytest.raises(ValueError, match="program_user"):
            Sandbox(program_user=user)


def test_blocking_directories_names_what_the_user_cannot_search(tmp_path):
    from primsel.simulator.isolation import blocking_directories

    closed = tmp_path / "closed"
    (closed / "runtime" / "lib").mkdir(parents=True)
    (tmp_path / "open").mkdir()
    closed.chmod(0o700)
    tmp_path.chmod(0o755)
    owner = (os.stat(closed).st_uid, os.stat(closed).st_gid)
    stranger = (owner[0] + 1, owner[1] + 1)
    paths = [str(closed / "runtime" / "lib"), str(tmp_path / "open")]
    assert blocking_directories(paths, owner) == {}
    blocking = blocking_directories(paths, stranger)
    assert blocking[str(closed)] == {"runtime"}
    assert str(tmp_path) not in blocking


def _user_namespaces_allowed() -> bool:
    """Whether this (unprivileged) user may create a user namespace."""
    probe = "import ctypes, sys; sys.exit(ctypes.CDLL(None).unshare(0x10000000) != 0)"
    return subprocess.run([sys.executable, "-c", probe]).returncode == 0


def test_the_audit_hook_tables_are_not_in_a_caught_traceback(sandbox):
    program = textwrap.dedent(
        """\
        def answer():
            import os
            try:
                os.system("true")
            except PermissionError as exc:
                tb = exc.__traceback__
                seen = []
                while tb is not None:
                    frame = tb.tb_frame
                    seen.extend(type(v).__name__ for v in frame.f_locals.values())
                    seen.extend(type(v).__name__ for v in frame.f_code.co_consts)
                    tb = tb.tb_next
                raise ValueError(" ".join(sorted(set(seen))))
        """
    )
    result = run(sandbox, program)
    assert (result.status, result.error_type) == ("error", "ValueError")
    found = set(result.message.split())
    assert "str" in found  # the event and the message are there
    assert {"frozenset", "function", "type"}.isdisjoint(found)  # the tables are not


def test_audit_hook_can_be_switched_off():
    program = "def answer():\n    import os\n    return 42 if os.system('true') == 0 else 0\n"
    with Sandbox(workers=1, audit_hook=False) as box:
        assert box.info()["audit_hook"] is False
        result = run(box, program)
    # without the hook os.system reaches the kernel, where seccomp refuses the fork: it fails
    assert (result.status, result.error_type) == ("fail", "SolutionError")


# -- the caller never crashes; the judge's work on the program's output is the program's ---------


def test_a_worker_that_cannot_start_is_this_tasks_error_and_the_next_task_runs(monkeypatch):
    import primsel.simulator.sandbox as sandbox_module

    real = sandbox_module.tempfile.mkdtemp
    calls = []

    def fails_once(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            raise PermissionError(1, "Operation not permitted", "/tmp")
        return real(*args, **kwargs)

    monkeypatch.setattr(sandbox_module.tempfile, "mkdtemp", fails_once)
    with Sandbox(workers=1) as box:
        first = run(box, "def answer():\n    return 42\n")
        second = run(box, "def answer():\n    return 42\n")
    assert (first.status, first.error_type, first.raised_by) == ("error", "WorkerStartFailed", "task")
    assert "PermissionError" in first.message
    assert second.status == "pass"


def test_a_lost_scratch_directory_is_this_tasks_error_and_the_next_task_runs():
    import shutil

    with Sandbox(workers=1) as box:
        assert run(box, "def answer():\n    return 42\n").status == "pass"
        shutil.rmtree(box._all[0].scratch)
        lost = run(box, "def answer():\n    return 42\n")
        assert (lost.status, lost.error_type, lost.raised_by) == ("error", "ScratchError", "task")
        assert run(box, "def answer():\n    return 42\n").status == "pass"  # a restarted worker


def test_sigxcpu_sent_by_the_program_itself_is_not_a_timeout():
    program = "def answer():\n    import signal\n    signal.raise_signal(signal.SIGXCPU)\n    return 42\n"
    with Sandbox(workers=1, timeout=5) as box:
        result = run(box, program)
        namespaced = box.info()["pid_namespace"]
    if namespaced:
        # the first process of a pid namespace ignores the signals it sends itself: it goes on
        assert (result.status, result.error_type) == ("pass", None)
    else:
        assert (result.status, result.error_type) == ("error", "ProcessDied")
        assert result.message == "the program's process was killed by SIGXCPU"


def test_a_hash_flooding_set_is_refused_quickly():
    # every item hashes to 7: a set of them takes quadratic time to build
    program = "def answer():\n    return {7 + i * (2**61 - 1) for i in range(3000)}\n"
    with Sandbox(workers=1, timeout=10) as box:
        result = run(box, program)
    assert (result.status, result.error_type, result.raised_by) == ("error", "UnsupportedReturn", "sandbox")
    assert "hash" in result.message
    assert result.seconds < 10 + 60  # well within the task's and the judge's limits


def test_a_check_made_slow_by_the_program_output_is_the_programs_timeout():
    check = CHECK_42.replace("    answer = executable()\n", "    answer = executable()\n    while answer == 42:\n        pass\n")
    with Sandbox(workers=1, timeout=5, judge_timeout=0.5) as box:
        result = run(box, "def answer():\n    return 42\n", make_task(check))
        before = run(box, "def answer():\n    return 42\n", make_task(check.replace("answer = executable()", "while True:\n        pass\n    answer = executable()")))
    assert (result.status, result.error_type, result.raised_by) == ("timeout", "CheckTimeout", "program")
    assert (before.status, before.error_type, before.raised_by) == ("error", "EvaluatorError", "task")


def test_the_judge_refuses_a_regex_search_that_would_run_long_in_c():
    from primsel.simulator import judge, matching

    names = ["Hopper", "a" * 100_000]
    with judge.Clock(5.0, 5.0) as clock:
        assert matching.regex_first_match("hop", names) == 0  # a room name's search: far below the bound
        started = time.monotonic()
        with pytest.raises(judge._JudgeTimeout):
            # 3,005 instructions times 100,000 characters: RE2's NFA would take seconds in C
            matching.regex_first_match("a" * 3000 + "b", names)
        assert time.monotonic() - started < 0.5
        assert clock.expired and "300,500,000 steps" in clock.reason
    assert matching.search_guard is None  # a program process (and the caller) search unbounded


def test_the_judge_refuses_a_fuzzy_match_that_would_run_long_in_c():
    from primsel.simulator import judge, matching

    long_name = "ab" * 50_000
    names = ["Alice Smith", None, long_name]
    with judge.Clock(5.0, 5.0) as clock:
        # 5 x (11 + 100,000) character pairs: 1,666 steps, far below the bound
        assert matching.fuzzy_match("alice", names) == [0]
        # 29,996 x 100,011 pairs: 9,999,766 steps at 300 pairs a step, just below the bound
        assert matching.fuzzy_match("b" * 29_996, names) == []
        started = time.monotonic()
        with pytest.raises(judge._JudgeTimeout):
            # 100,000 x 100,011 character pairs: seconds of rapidfuzz's WRatio in C
            matching.fuzzy_match(long_name, names)
        assert time.monotonic() - started < 0.5
        assert clock.expired
        assert "a fuzzy name match of up to 33,337,000 steps" in clock.reason
    assert matching.search_guard is None
