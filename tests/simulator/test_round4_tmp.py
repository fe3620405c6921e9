"""Round-4 regression tests (to be merged into the attack suite)."""

from __future__ import annotations

import os
import textwrap
import time

import pytest

from primsel.simulator.sandbox import Sandbox
from primsel.types import Task

ROOT = os.geteuid() == 0

#: A task of our own: the evaluation program runs the program, then searches the rooms of the
#: world it left (as some Asper-Bench evaluation programs do): the judge matches room names.
ROOM_TASK = Task(
    id="rooms",
    query="Hey, [Assistant], test.",
    program="def reference():\n    return None\n",
    setup_programs=("def setup():\n    return None\n",),
    evaluation_programs=(textwrap.dedent('''\
        def evaluate_rooms(query, executable, setup_function):
            setup_function()
            executable()
            search_conference_room([room_booking_default_time_window()])
        '''),),
    scenario={"apps": ["exceptions", "time_utils", "room_booking"], "simulation_tools": [],
              "evaluation_tools": ["exceptions::SolutionError"]},
)
#: A task whose evaluation program only runs the program (no check): the program's result is
#: reported through the exception it raises.
PLAIN_TASK = Task(
    id="plain",
    query="Hey, [Assistant], test.",
    program="def reference():\n    return None\n",
    setup_programs=("def setup():\n    return None\n",),
    evaluation_programs=("def evaluate(query, executable, setup_function):\n    setup_function()\n"
                         "    executable()\n",),
    scenario={"apps": ["exceptions", "time_utils"], "simulation_tools": [],
              "evaluation_tools": ["exceptions::SolutionError"]},
)


def _rooms(*names: str) -> str:
    """A program that writes conference rooms with these names into the world."""
    return textwrap.dedent(f'''\
        def rooms():
            from aspera.simulation.execution_context import get_current_context
            table = get_current_context().tables["CONFERENCE_ROOMS"]
            for index, name in enumerate({list(names)!r}):
                table.append({{"room_id": "r%d" % index, "capacity": 4, "room_name": name}})
        ''')


def _worker_rss(box: Sandbox) -> int:
    """Resident memory of the sandbox's (only) worker, in bytes."""
    with open(f"/proc/{box._all[0].process.pid}/status") as handle:
        fields = dict(line.split(":", 1) for line in handle)
    return int(fields["VmRSS"].split()[0]) * 1024


#: 15 rooms named by 1 MiB of one letter each.
HUGE_ROOMS = textwrap.dedent('''\
    def rooms():
        from aspera.simulation.execution_context import get_current_context
        table = get_current_context().tables["CONFERENCE_ROOMS"]
        for index in range(15):
            table.append({"room_id": "r%d" % index, "capacity": 4, "room_name": chr(65 + index) * (1 << 20)})
    ''')


def test_room_names_from_the_world_do_not_stay_in_the_judge():
    with Sandbox(workers=1, timeout=10) as box:
        assert box.execute(ROOM_TASK, _rooms("small")).status == "pass"
        before = _worker_rss(box)
        for _ in range(3):
            result = box.execute(ROOM_TASK, HUGE_ROOMS)
            # a name too large for the regex engine matches nothing (as in ASPERA): the
            # evaluation program's search says so; nothing runs out of memory
            assert (result.error_type, result.raised_by) == ("SearchError", "task"), result
        grown = _worker_rss(box) - before
    # compiled as Python regexes and kept in re's cache, they grew the judge ~250 MB a task
    assert grown < 100 << 20, grown


def test_a_room_name_that_backtracks_costs_the_judge_no_time():
    # "(0+)+1|01" searched in a run of zeros backtracks exponentially in Python's re engine
    program = _rooms("0" * 26 + "2", "(0+)+1|01")
    with Sandbox(workers=1, timeout=10) as box:
        start = time.monotonic()
        result = box.execute(ROOM_TASK, program)
        spent = time.monotonic() - start
    assert result.raised_by != "task"
    assert spent < 8.0, (spent, result)


def test_a_frame_too_large_for_the_judge_is_the_program_s(monkeypatch):
    from primsel.simulator import codec, judge, program, worker
    from primsel.simulator.verdicts import JudgeVerdict

    apps = program.load_apps()
    worker.install_aliases(("apps",))
    library = judge.JudgeLibrary(apps)
    to_read, to_write = os.pipe()
    from_read, from_write = os.pipe()
    os.write(from_write, program.READY)

    def no_memory(*args, **kwargs):
        raise MemoryError

    clock = judge.Clock(5.0, 5.0)
    handle = judge.ProgramHandle(library, to_write, from_read, clock, 5.0)
    handle.ready = True
    monkeypatch.setattr(codec, "read_frame", no_memory)
    with clock, pytest.raises(JudgeVerdict) as caught:
        handle.load("def f():\n    return 1\n", "f", ["exceptions"])
    assert (caught.value.status, caught.value.error_type) == ("error", "UnsupportedReturn")
    for fd in (to_read, to_write, from_read, from_write):
        os.close(fd)


FRAMES_PROBE = textwrap.dedent('''\
    def probe():
        import sys
        found = []
        frame = sys._getframe()
        while frame is not None:
            for name, value in list(frame.f_locals.items()):
                text = repr(value)
                if name == "ended" or "19712" in text or "'cpu'" in text:
                    found.append((frame.f_code.co_name, name, text[:80]))
            frame = frame.f_back
        raise ValueError("LEAK %r" % found if found else "CLEAN")
    ''')


def test_the_previous_task_s_end_is_not_in_the_program_s_frames():
    with Sandbox(workers=1, timeout=10) as box:
        box.execute(PLAIN_TASK, "def quit():\n    import os\n    os._exit(77)\n")  # status 77 << 8 = 19712
        result = box.execute(PLAIN_TASK, FRAMES_PROBE)
    assert result.message == "CLEAN", result.message


THREADS = textwrap.dedent('''\
    def threads():
        import threading, time
        stop = threading.Event()
        started = 0
        for _ in range({count}):
            try:
                threading.Thread(target=stop.wait, daemon=True).start()
            except RuntimeError:
                break
            started += 1
        time.sleep({hold})
        stop.set()
        raise ValueError("started %d" % started)
    ''')


def test_an_honest_program_starts_its_documented_threads():
    from primsel.simulator.isolation import NPROC

    with Sandbox(workers=1, timeout=20) as box:
        result = box.execute(PLAIN_TASK, THREADS.format(count=NPROC - 6, hold=0))
    assert result.message == f"started {NPROC - 6}", result


@pytest.mark.skipif(not ROOT, reason="as an ordinary user program processes already count threads in a namespace of their own")
def test_threads_of_one_task_leave_every_slot_to_another():
    program = THREADS.format(count=200, hold=2.5)
    with Sandbox(workers=2, timeout=20) as box:
        results = list(box.execute_many([(PLAIN_TASK, program, None)] * 2))
    assert [r.message for r in results] == ["started 200"] * 2


PID_PROBE = textwrap.dedent('''\
    def pids():
        import os, threading
        for _ in range({threads}):
            threading.Thread(target=lambda: None).start()
        ids = []
        thread = threading.Thread(target=lambda: ids.append(threading.get_native_id()))
        thread.start()
        thread.join()
        raise ValueError("%d %d" % (os.getpid(), ids[0]))
    ''')


def test_the_host_pid_counter_does_not_show():
    with Sandbox(workers=1, timeout=10) as box:
        if not box.info()["pid_namespace"]:
            pytest.skip(box.info()["pid_namespace_detail"])
        first = box.execute(PLAIN_TASK, PID_PROBE.format(threads=40))
        second = box.execute(PLAIN_TASK, PID_PROBE.format(threads=0))
    # a pid namespace per program process: pid 1, its threads 2, 3, ... whatever ran before
    assert first.message == "1 42"
    assert second.message == "1 2"


FUTEX_PROBE = textwrap.dedent('''\
    def futex():
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_long]
        # a page of a file every program process maps alike: a futex on it without
        # FUTEX_PRIVATE_FLAG is keyed by the file, not by this process
        address = libc.mmap(None, 4096, 1, 1, os.open(os.__file__, os.O_RDONLY), 0)  # PROT_READ, MAP_SHARED
        value = ctypes.c_uint32.from_address(address).value
        got = []
        for op, name, argument in ((1, "wake", 1), (0, "wait", value + 1)):  # FUTEX_WAKE, FUTEX_WAIT
            ctypes.set_errno(0)
            result = libc.syscall(202, ctypes.c_void_p(address), op, argument, None, None, 0)
            if result != -1 or ctypes.get_errno() != 1:  # EPERM
                got.append((name, result, ctypes.get_errno()))
        raise ValueError("LEAK %r" % got if got else "CLEAN")
    ''')


def test_shared_futexes_are_refused():
    with Sandbox(workers=1, timeout=10, audit_hook=False) as box:
        result = box.execute(PLAIN_TASK, FUTEX_PROBE)
    assert result.message == "CLEAN", result.message


def test_reading_a_host_file_changes_no_access_time():
    import shutil
    import tempfile

    directory = tempfile.mkdtemp(dir="/tmp")  # reachable for the program's unprivileged user
    try:
        os.chmod(directory, 0o755)
        target = os.path.join(directory, "data.txt")
        with open(target, "w") as handle:
            handle.write("some text")
        os.chmod(target, 0o644)
        old = time.time() - 3 * 86400
        os.utime(target, (old, old + 60))  # read before its last change: relatime would update it
        program = f"def read():\n    with open({target!r}) as handle:\n        return handle.read()\n"
        with Sandbox(workers=1, timeout=10, landlock=False) as box:  # Landlock would refuse the path
            result = box.execute(PLAIN_TASK, program)
        assert result.status == "pass", result
        assert os.stat(target).st_atime == pytest.approx(old, abs=1)
    finally:
        shutil.rmtree(directory)


CACHE_PROBE = textwrap.dedent('''\
    def cache():
        import os
        got = []
        fd = os.open(os.__file__, os.O_RDONLY)
        buffer = bytearray(4096)
        try:
            got.append(("preadv2 RWF_NOWAIT", os.preadv(fd, [buffer], 0, os.RWF_NOWAIT)))
        except OSError:
            pass
        try:
            os.close(os.open(os.__file__, os.O_RDONLY | os.O_DIRECT))
            got.append("O_DIRECT open")
        except OSError:
            pass
        try:
            import fcntl
            fcntl.fcntl(fd, fcntl.F_SETFL, os.O_DIRECT)
            got.append("F_SETFL O_DIRECT")
        except OSError:
            pass
        os.preadv(fd, [buffer], 0)  # a plain read still works
        raise ValueError("LEAK %r" % got if got else "CLEAN")
    ''')


@pytest.mark.parametrize("hooked", [True, False])
def test_no_page_cache_oracle_and_no_direct_reads(hooked):
    with Sandbox(workers=1, timeout=10, audit_hook=hooked) as box:
        result = box.execute(PLAIN_TASK, CACHE_PROBE)
    assert result.message == "CLEAN", result.message


def test_the_caller_s_python_path_does_not_reach_programs(tmp_path, monkeypatch):
    from primsel.simulator.sandbox import _worker_env

    marker = tmp_path / "callers-own-modules"
    marker.mkdir()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(marker), os.environ.get("PYTHONPATH", "")]))
    # the worker's environment block, as it was started: where its strings lie
    block = sum(len(k) + len(v) + 2 for k, v in _worker_env().items())
    assert next(iter(_worker_env())) == "PATH"
    program = textwrap.dedent(f'''\
        def where():
            import os, sys, posix
            mark = {marker.name!r}
            seen = [k for k, v in os.environ.items() if mark in v or k == "PYTHONPATH"]
            seen += [k.decode() for k, v in posix.environ.items() if mark.encode() in v]
            seen += [p for p in sys.path if mark in p]
            seen += [p for p in sys.path_importer_cache if p and mark in p]
            import ctypes
            libc = ctypes.CDLL(None)
            libc.getenv.restype = ctypes.c_void_p
            path = libc.getenv(b"PATH") - len(b"PATH=")
            address, end = path, path + {block}
            while address < end:  # the strings of the block the process was started with
                text = ctypes.string_at(address)
                if mark.encode() in text:
                    seen.append("the environment block")
                address += len(text) + 1
            raise ValueError("LEAK %r" % seen if seen else "CLEAN")
        ''')
    with Sandbox(workers=1, timeout=10, audit_hook=False) as box:
        result = box.execute(PLAIN_TASK, program)
    assert result.message == "CLEAN", result.message
