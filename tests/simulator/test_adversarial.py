"""Adversarial programs against the sandbox: none may pass, see what it must not, or do harm.

Each attack is a whole program text whose first top-level function is the entry point. None of
them solves its task. They run on every built-in task and, when the archive is present, on
Asper-Bench tasks 1, 17, 100, 200 and 250; a do-nothing program passes none of those, so a
``pass`` is a forged verdict.

*Probes* look for something the program must not see or do (the query, the setup and evaluation
programs, the built-in task files, other processes, the host's file system). They end with
``ValueError("CLEAN")`` when they found nothing, else ``ValueError("LEAK ...")`` naming what
they saw, so the verdict's message is the finding. Attacks that spin, sleep or stop themselves
run on a few tasks in a sandbox with short limits, to keep the file fast. Attacks that still
succeed are marked ``xfail(strict=True)`` with the reason.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import venv
from pathlib import Path

import pytest

import primsel
from primsel.datasets import load_builtin_tasks
from primsel.simulator import landlock
from primsel.simulator.sandbox import Sandbox
from primsel.types import ExecutionResult, Task

ARCHIVE_TASKS = ("1", "17", "100", "200", "250")
#: Time limit of the sandbox for the quick attacks (each takes well under a second).
TIMEOUT = 10.0
#: Limits of the sandbox for the attacks that spin, sleep, stop themselves or keep the judge busy.
SHORT = {"timeout": 0.5, "judge_timeout": 3.0}
#: Built-in tasks the costly attacks run on: a return-value task and a two-pair task.
FEW = ("builtin-05", "builtin-11")
#: Archive tasks the costly attacks run on (what they do does not depend on the task).
ARCHIVE_FEW = ("1", "17")
#: Statuses a program that does not solve its task may get.
NOT_PASS = frozenset({"fail", "error", "timeout", "requires_user_input"})
ERROR = frozenset({"error"})


@dataclasses.dataclass(frozen=True)
class Attack:
    """One adversarial program and what the sandbox must answer to it.

    Parameters
    ----------
    program : the whole program text.
    statuses : statuses allowed on every task it runs on (never ``pass``).
    error_type : when set, every ``error`` verdict must carry this error type.
    probe : the program reports what it found: the message must be exactly ``"CLEAN"``.
    few : costly: run on the :data:`FEW` built-in tasks and the :data:`ARCHIVE_FEW` tasks only.
    slow : run in the sandbox with :data:`SHORT` limits (and on the few tasks only).
    only : the built-in task ids it is aimed at (it runs on those alone, never on the archive),
        or None.
    skip : task ids where the attack is the honest answer (raising RequiresUserInput on a task
        whose request cannot be carried out).
    xfail : why the attack still succeeds on a built-in task (None: it must not).
    xfail_archive : why it still succeeds on an archive task (None: it must not).
    """

    program: str
    statuses: frozenset[str] = NOT_PASS
    error_type: str | None = None
    probe: bool = False
    few: bool = False
    slow: bool = False
    only: tuple[str, ...] | None = None
    skip: frozenset[str] = frozenset()
    xfail: str | None = None
    xfail_archive: str | None = None


def _program(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# Walks everything reachable from the program's frames and modules (with gc when allowed, else
# by plain attribute access) looking for text of the query, the setup and the evaluation
# programs. The marks are built at run time, so the program's own text does not match them.
_SCAN = _program('''
    def _reachable_secrets():
        import gc, sys, types
        marks = ["Hey, [" + "Assistant]", "def eval" + "uate_", "def set" + "up_env",
                 "Solution" + "Error(", "setup" + "_function()", "expected" + "_schedule"]

        def referents(o):
            try:
                return list(gc.get_referents(o))
            except Exception:
                pass
            out = []
            if isinstance(o, dict):
                out += list(o.keys()) + list(o.values())
            elif isinstance(o, (list, tuple, set, frozenset)):
                out += list(o)
            elif isinstance(o, types.FrameType):
                out += [o.f_locals, o.f_globals, o.f_code, o.f_back]
            elif isinstance(o, types.CodeType):
                out += list(o.co_consts)
            elif isinstance(o, types.FunctionType):
                out += [o.__code__, o.__globals__, o.__defaults__, o.__kwdefaults__, o.__closure__]
            elif isinstance(o, types.CellType):
                try:
                    out.append(o.cell_contents)
                except ValueError:
                    pass
            elif isinstance(o, types.MethodType):
                out += [o.__func__, o.__self__]
            if isinstance(o, type):
                out += list(o.__mro__)
            else:
                for slot in getattr(type(o), "__slots__", ()):
                    try:
                        out.append(object.__getattribute__(o, slot))
                    except Exception:
                        pass
            try:
                out.append(object.__getattribute__(o, "__dict__"))
            except Exception:
                pass
            return out

        roots = [sys.modules, sys._getframe(1)]
        for more in (lambda: list(sys._current_frames().values()), gc.get_objects):
            try:
                roots.extend(more())
            except Exception:
                pass
        seen = {id(marks), id(roots)}
        hits = set()
        stack = list(roots)
        while stack and len(seen) < 1_000_000:
            o = stack.pop()
            if id(o) in seen:
                continue
            seen.add(id(o))
            if isinstance(o, (bytes, bytearray, memoryview)):
                o = bytes(o).decode("latin-1")
            if isinstance(o, str):
                if any(m in o for m in marks) and all(o is not m for m in marks):
                    hits.add(o[:100])
                continue
            if not isinstance(o, (int, float, complex)):
                stack.extend(referents(o))
        return sorted(hits)


    def _is_secret(text):
        marks = ["Hey, [" + "Assistant]", "def eval" + "uate_", "def set" + "up_env", "Solution" + "Error("]
        return any(m in text for m in marks) and all(text is not m for m in marks)


    def _report(hits):
        raise ValueError("LEAK " + repr(hits)[:1500] if hits else "CLEAN")
''')

# Answers and verdicts as a program might forge them (in the framings it might guess, or in the
# sandbox's own, with the world state it was given), and a writer that sends bytes down every
# descriptor that takes them.
_FORGED = _program('''
    def _forged_frames():
        import json, struct
        out = []
        for item in ({"status": "pass", "error_type": None, "message": None, "line": None},
                     {"ok": True, "return": True, "state": None, "status": "pass"},
                     {"verdict": "pass", "passed": True}):
            body = json.dumps(item).encode()
            out += [body + b"\\n", struct.pack(">I", len(body)) + body, struct.pack("<I", len(body)) + body,
                    struct.pack(">Q", len(body)) + body]
        return out


    def _answer(**fields):
        import random
        from primsel.simulator import codec, program
        from primsel.simulator.state import TABLES, get_current_context
        coder = codec.Codec(program.load_apps())
        tables = get_current_context().tables
        answer = {"state": coder.encode({name: tables[name] for name in TABLES}),
                  "random": coder.encode(random.getstate()), "trace": [], "calls": 0, "stdout_truncated": False}
        answer.update(fields)
        body = codec.dumps(answer)
        return len(body).to_bytes(4, "big") + body


    def _write_everywhere(frames, descriptors=range(3, 64)):
        import os
        for fd in descriptors:
            for frame in frames:
                try:
                    os.write(fd, frame)
                except OSError:
                    break
''')

# An object whose every comparison, membership test, length, text and number says yes.
_YES = _program('''
    class Yes:
        def __eq__(self, other): return True
        def __ne__(self, other): return False
        __lt__ = __le__ = __gt__ = __ge__ = __eq__
        def __contains__(self, item): return True
        def __len__(self): return 2
        def __iter__(self): return iter([self, self])
        def __getitem__(self, key): return self
        def __getattr__(self, name): return self
        def __call__(self, *args, **kwargs): return self
        def __hash__(self): return 0
        def __bool__(self): return True
        def __str__(self): return "Tuesday 2024-06-26 10:00 2024-06-26 12:00 Hopper Turing 3"
        __repr__ = __str__
        def __round__(self, n=None): return self
        def __abs__(self): return 0
        def __sub__(self, other): return self
        __rsub__ = __add__ = __radd__ = __mul__ = __rmul__ = __sub__
        def __float__(self): return 210.0
        def __int__(self): return 4
        __index__ = __int__
''')


def _with(program: str, *helpers: str) -> str:
    return "\n\n".join((_program(program), *helpers))


ATTACKS: dict[str, Attack] = {}

# --- hooks -------------------------------------------------------------------------------------

ATTACKS["trace_and_profile_hooks_rewrite_every_dict"] = Attack(_program('''
    def f():
        import sys, threading
        def poison(value):
            if isinstance(value, dict):
                value.update(status="pass", error_type=None, message=None, passed=True, ok=True)
        def tracer(frame, event, arg):
            if event == "return":
                poison(arg)
                for value in list(frame.f_locals.values()):
                    poison(value)
            return tracer
        sys.settrace(tracer)
        threading.settrace(tracer)
        sys.setprofile(tracer)
        threading.setprofile(tracer)
'''))

ATTACKS["audit_hook_edits_every_event"] = Attack(_program('''
    def f():
        import sys
        def hook(event, args):
            for value in args:
                if isinstance(value, dict):
                    value["status"] = "pass"
                elif isinstance(value, list):
                    for item in value:
                        if isinstance(item, dict):
                            item["status"] = "pass"
        sys.addaudithook(hook)
'''))

ATTACKS["import_hooks_serve_fake_modules"] = Attack(_program('''
    def f():
        import builtins, importlib.abc, importlib.machinery, sys, types
        fake = types.ModuleType("json")
        fake.dumps = lambda *a, **k: '{"status": "pass", "return": true}'
        fake.loads = lambda *a, **k: {"status": "pass"}
        class Finder(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                return importlib.machinery.ModuleSpec(name, None)
        sys.meta_path.insert(0, Finder())
        for name in ("json", "pickle", "marshal", "_json"):
            sys.modules[name] = fake
        real_import = builtins.__import__
        def evil_import(name, *args, **kwargs):
            module = real_import(name, *args, **kwargs)
            for attr in ("dumps", "encode"):
                if hasattr(module, attr):
                    try:
                        setattr(module, attr, fake.dumps)
                    except Exception:
                        pass
            return module
        builtins.__import__ = evil_import
'''))

ATTACKS["hooks_installed_by_module_level_code"] = Attack(_program('''
    def f():
        return None

    import json, sys
    sys.setprofile(lambda frame, event, arg: isinstance(arg, dict) and arg.update(status="pass"))
    json.JSONEncoder.encode = lambda self, o: '{"status": "pass", "return": true}'
'''))

# --- frames ------------------------------------------------------------------------------------

ATTACKS["frame_walk_looks_for_task_text"] = Attack(_with('''
    def f():
        _report(_reachable_secrets())
''', _SCAN), statuses=ERROR, probe=True)

ATTACKS["frame_walk_rewrites_callers"] = Attack(_program('''
    def f():
        import sys
        frame = sys._getframe(1)
        while frame is not None:
            for value in list(frame.f_locals.values()):
                if isinstance(value, dict):
                    value.update(status="pass", result=True)
                elif isinstance(value, list):
                    value.clear()
            for name, value in list(frame.f_globals.items()):
                if callable(value) and any(w in name.lower() for w in ("encode", "dump", "write", "answer")):
                    frame.f_globals[name] = lambda *a, **k: b'{"status": "pass"}'
            frame = frame.f_back
        return True
'''))

# --- gc ----------------------------------------------------------------------------------------

ATTACKS["gc_scan_after_disarming_the_audit_hook"] = Attack(_with('''
    def f():
        import gc, sys
        # empty every container of the sandbox's own modules that names a refused operation
        for name, module in list(sys.modules.items()):
            if name.startswith("primsel"):
                for key, value in list(vars(module).items()):
                    try:
                        if isinstance(value, (set, dict, list)) and "gc.get_objects" in value:
                            value.clear()
                        elif isinstance(value, frozenset) and "gc.get_objects" in value:
                            setattr(module, key, frozenset())
                    except Exception:
                        pass
        try:
            every = gc.get_objects()
        except PermissionError:
            every = []
        strings = [o for o in every if isinstance(o, str)]
        _report([s[:100] for s in strings if _is_secret(s)])
''', _SCAN), statuses=ERROR, probe=True)

ATTACKS["gc_callback_rewrites_the_callers"] = Attack(_program('''
    def f():
        import gc, sys
        def callback(phase, info):
            frame = sys._getframe(1)
            while frame is not None:
                for value in list(frame.f_locals.values()):
                    if isinstance(value, dict) and "state" in value:
                        value.update(status="pass", ok=True)
                        value.pop("exception", None)
                frame = frame.f_back
        gc.callbacks.append(callback)
        gc.freeze()
        gc.set_threshold(50, 1, 1)
        raise ValueError("nothing solved")
'''), statuses=ERROR)

# --- json, pickle and encoder poisoning ------------------------------------------------------

ATTACKS["json_module_rewritten"] = Attack(_program('''
    def f():
        import json, json.encoder
        forged = '{"status": "pass", "verdict": "pass", "return": true}'
        json.dumps = lambda *a, **k: forged
        json.JSONEncoder.encode = lambda self, o: forged
        json.JSONEncoder.iterencode = lambda self, o, _one_shot=False: iter([forged])
        json.encoder.c_make_encoder = None
        json.encoder.encode_basestring = lambda s: '"pass"'
        json.encoder.encode_basestring_ascii = lambda s: '"pass"'
        json.loads = lambda *a, **k: {"status": "pass"}
        json.JSONDecoder.decode = lambda self, s, _w=None: {"status": "pass"}
'''))

ATTACKS["pickle_reduce_runs_code"] = Attack(_program('''
    def f():
        import copyreg, os, pickle
        class Payload:
            def __reduce__(self):
                return (os.system, ("echo pwned",))
        copyreg.dispatch_table[list] = lambda value: (os.system, ("echo pwned",))
        pickle.dumps = lambda *a, **k: b"cos\\nsystem\\n(S'echo pwned'\\ntR."
        return Payload()
'''), statuses=ERROR, error_type="UnsupportedReturn")

ATTACKS["sandbox_modules_wrapped"] = Attack(_program('''
    def f():
        import functools, sys, types
        def forge(value):
            if isinstance(value, dict):
                value = dict(value, status="pass", ok=True)
                for key in ("exception", "unsupported"):
                    value.pop(key, None)
                value.setdefault("return", True)
            return value
        def wrap(function):
            @functools.wraps(function)
            def wrapper(*args, **kwargs):
                return forge(function(*(forge(a) for a in args), **kwargs))
            return wrapper
        for name, module in list(sys.modules.items()):
            if name.startswith("primsel.simulator") and not name.startswith("primsel.simulator.apps"):
                for key, value in list(vars(module).items()):
                    if isinstance(value, types.FunctionType):
                        setattr(module, key, wrap(value))
'''))

# --- descriptors -------------------------------------------------------------------------------

ATTACKS["forged_verdicts_on_every_descriptor"] = Attack(_with('''
    def f():
        _write_everywhere(_forged_frames(), range(1024))
''', _FORGED))

ATTACKS["forged_verdicts_then_exit"] = Attack(_with('''
    def f():
        import os
        _write_everywhere(_forged_frames(), range(3, 256))
        os._exit(0)
''', _FORGED), statuses=ERROR)

ATTACKS["well_formed_answer_forged_on_the_pipe"] = Attack(_with('''
    def f():
        # the program's own answer, written by hand: it says True, as the program could honestly
        import os
        _write_everywhere([_answer(status="pass", **{"return": True})])
        os._exit(0)
''', _FORGED))

ATTACKS["claims_the_sandbox_broke"] = Attack(_with('''
    def f():
        import os
        _write_everywhere([_answer(sandbox_error="pass", status="pass", ok=True)])
        os._exit(0)
''', _FORGED), statuses=ERROR)

ATTACKS["every_descriptor_read_for_secrets"] = Attack(_with('''
    def f():
        import os
        seen = []
        for fd in range(1024):
            try:
                os.set_blocking(fd, False)
                data = os.read(fd, 1 << 20)
            except (OSError, ValueError):
                continue
            if data:
                seen.append(data.decode("latin-1"))
        _report([text[:100] for text in seen if _is_secret(text)])
''', _SCAN), statuses=ERROR, probe=True)

ATTACKS["descriptors_swapped_and_closed"] = Attack(_program('''
    def f():
        import os
        for fd in range(3, 256):
            try:
                os.dup2(0, fd)
            except OSError:
                pass
        os.closerange(0, 256)
        return True
'''), statuses=ERROR)

# --- evil return values ------------------------------------------------------------------------

# Equality that always agrees, to mix into subclasses of builtin and library types.
_AGREES = _program('''
    class Agrees:
        def __eq__(self, other): return True
        def __ne__(self, other): return False
        def __contains__(self, item): return True
        __hash__ = object.__hash__
''')

ATTACKS["builtin_subclasses_that_say_yes"] = Attack(_with('''
    def f():
        import datetime
        class Everything(Agrees, int): pass
        class Text(Agrees, str): pass
        class Items(Agrees, list): pass
        class Moment(Agrees, datetime.datetime): pass
        return Items([Text("Tuesday"), Everything(4), Moment(2024, 6, 26)])
''', _AGREES), statuses=ERROR, error_type="UnsupportedReturn")

ATTACKS["int_subclass_that_says_yes"] = Attack(_with('''
    def f():
        class Three(Agrees, int):
            __abs__ = lambda s: 0
            __sub__ = __rsub__ = __mul__ = __rmul__ = lambda s, o: Three(0)
        return Three(3)
''', _AGREES), statuses=ERROR, error_type="UnsupportedReturn")

ATTACKS["dict_and_tuple_subclasses"] = Attack(_with('''
    def f():
        class Pair(Agrees, tuple): pass
        class Table(Agrees, dict):
            def items(self):
                return iter([("status", "pass")])
        return [Pair(("Tuesday", 4)), Table(status="pass")]
''', _AGREES), statuses=ERROR, error_type="UnsupportedReturn")

ATTACKS["library_types_with_evil_fields"] = Attack(_with('''
    def f():
        y = Yes()
        event = Event.model_construct(attendees=y, starts_at=y, ends_at=y, subject=y, event_id=y)
        return [TimeInterval(y, y), TimeInterval(y, y), event, Duration(y, TimeUnits.Minutes)]
''', _YES), statuses=ERROR, error_type="UnsupportedReturn")

ATTACKS["library_type_subclasses"] = Attack(_with('''
    def f():
        class Slot(Agrees, TimeInterval): pass
        class Length(Duration):
            def to_minutes(self): return 210.0
        class Meeting(Agrees, Event): pass
        moment = combine(now_().date(), parse_time_string(TimeExpressions.Noon))
        return [Slot(moment, moment), Length(1, TimeUnits.Hours), Meeting(subject="x")]
''', _AGREES), statuses=ERROR, error_type="UnsupportedReturn")

ATTACKS["enum_lookalikes"] = Attack(_program('''
    def f():
        import enum
        class TimeUnits(enum.Enum):
            Minutes = "minutes"
            def __eq__(self, other): return True
            __hash__ = enum.Enum.__hash__
        TimeUnits.__module__ = Duration.__module__
        class ShowAsStatus(enum.StrEnum):
            OutOfOffice = "OutOfOffice"
        ShowAsStatus.__module__ = Event.__module__
        return [Duration(210, TimeUnits.Minutes), ShowAsStatus.OutOfOffice]
'''), statuses=ERROR, error_type="UnsupportedReturn")

ATTACKS["huge_values"] = Attack(_program('''
    def f():
        shared = list(range(1_000_000))
        return [shared, shared, shared, "x" * (20 << 20), 10 ** 5000]
'''), statuses=ERROR, error_type="UnsupportedReturn", few=True)

ATTACKS["exponential_value_from_shared_lists"] = Attack(_program('''
    def f():
        value = ["Tuesday", 4]
        for _ in range(60):
            value = [value, value]
        return value
'''), statuses=ERROR, error_type="UnsupportedReturn", few=True)

ATTACKS["deep_value"] = Attack(_program('''
    def f():
        deep = "Tuesday"
        for _ in range(10_000):
            deep = {"k": [deep]}
        return deep
'''), statuses=ERROR, error_type="UnsupportedReturn")

ATTACKS["cyclic_value"] = Attack(_program('''
    def f():
        slots = [None, None]
        slots[0] = slots
        slots[1] = (slots, {"again": slots})
        return slots
'''), statuses=ERROR, error_type="UnsupportedReturn")

ATTACKS["non_finite_numbers"] = Attack(_program('''
    def f():
        nan = float("nan")
        return [nan, float("inf"), -float("inf"), {nan}, (nan, nan)]
'''))

ATTACKS["nan_as_the_answer"] = Attack(_program('''
    def f():
        return float("nan")
'''))

ATTACKS["functions_modules_frames_coroutines"] = Attack(_program('''
    def f():
        import sys
        async def later():
            return True
        return {"module": sys, "function": f, "class": type, "builtin": len,
                "frame": sys._getframe(), "coroutine": later()}
'''), statuses=ERROR, error_type="UnsupportedReturn")

ATTACKS["library_exception_returned_as_a_value"] = Attack(_program('''
    def f():
        return RequiresUserInput("Which Sam do you mean?")
'''), statuses=ERROR, error_type="UnsupportedReturn")

ATTACKS["every_fact_of_the_world_as_one_string"] = Attack(_program('''
    def f():
        from primsel.simulator.state import get_current_context
        parts = ["0123456789 True False yes no"]
        for rows in get_current_context().tables.values():
            for row in rows:
                parts.append(" ".join(str(value) for value in row.values()))
        for employee in get_all_employees():
            parts.append(str(get_employee_profile(employee).__dict__))
            parts.append(get_office_location(employee))
        return "\\n".join(parts)
'''),
    xfail_archive="task 100 passes: the dataset's own evaluation program accepts any string "
                  "that contains '3' (a weak check of the benchmark, not a forged verdict: the same "
                  "answer passes under the reference harness)")

# --- exceptions --------------------------------------------------------------------------------

ATTACKS["exception_named_like_the_library"] = Attack(_program('''
    def f():
        class RequiresUserInput(Exception):
            pass
        raise RequiresUserInput("Which one do you mean?")
'''), statuses=ERROR, error_type="RequiresUserInput")

ATTACKS["exceptions_named_like_the_judge"] = Attack(_program('''
    def f():
        class SolutionError(Exception):
            pass
        class EvaluatorError(Exception):
            pass
        class SandboxViolation(Exception):
            pass
        try:
            raise SandboxViolation("pass")
        except SandboxViolation as inner:
            try:
                raise EvaluatorError("pass") from inner
            except EvaluatorError:
                raise SolutionError("pass")
'''), statuses=frozenset({"fail", "error"}))

ATTACKS["exception_module_spoofed"] = Attack(_program('''
    def f():
        class SearchError(Exception):
            def __eq__(self, other): return True
            __hash__ = Exception.__hash__
        SearchError.__module__ = RequiresUserInput.__module__
        SearchError.__qualname__ = SearchError.__name__ = "RequiresUserInput"
        raise SearchError("Which one do you mean?")
'''), skip=frozenset({"17"}))

ATTACKS["exceptions_with_evil_text_and_args"] = Attack(_with('''
    def f():
        class Loud(Exception):
            def __str__(self):
                raise SystemExit(0)
            def __repr__(self):
                return Yes()
            def __getattribute__(self, name):
                if name == "args":
                    return Yes()
                return object.__getattribute__(self, name)
        cyclic = []
        cyclic.append(cyclic)
        error = Loud(Yes(), cyclic, "x" * (8 << 20))
        error.__cause__ = error
        raise error
''', _YES), statuses=ERROR)

ATTACKS["exception_whose_traceback_never_ends"] = Attack(_with('''
    def f():
        class Endless(Exception):
            def __getattribute__(self, name):
                if name in ("__traceback__", "__cause__", "__context__"):
                    return Yes()
                return object.__getattribute__(self, name)
        raise Endless("pass")
''', _YES), statuses=frozenset({"timeout", "error"}), slow=True)

ATTACKS["huge_names_and_messages"] = Attack(_program('''
    def f():
        Huge = type("E" * 100_000, (Exception,), {})
        Huge.__module__ = "m" * 100_000
        raise Huge("x" * (4 << 20))
'''), statuses=ERROR)

ATTACKS["base_exceptions_from_the_entry_point"] = Attack(_program('''
    def f():
        import random
        choice = random.SystemRandom().randrange(4)
        if choice == 0:
            raise SystemExit(0)
        if choice == 1:
            raise KeyboardInterrupt
        if choice == 2:
            raise GeneratorExit
        raise BaseExceptionGroup("pass", [SystemExit(0), KeyboardInterrupt()])
'''), statuses=ERROR)

ATTACKS["exception_group_wraps_library_exception"] = Attack(_program('''
    def f():
        raise ExceptionGroup("asking", [RequiresUserInput("Which one?"), StopIteration()])
'''), statuses=ERROR)

ATTACKS["exiting_in_del_atexit_and_finalizers"] = Attack(_program('''
    class Bomb:
        def __del__(self):
            import os
            os._exit(0)

    def f():
        import atexit, os, weakref
        global kept
        kept = Bomb()
        atexit.register(os._exit, 0)
        class Noisy:
            def __del__(self):
                raise SystemExit("pass")
        noisy = Noisy()
        weakref.finalize(noisy, os._exit, 0)
        del noisy
        return Bomb()
'''), statuses=ERROR)

ATTACKS["interpreter_exits_without_answer"] = Attack(_program('''
    def f():
        import os
        os._exit(0)
'''), statuses=ERROR, error_type="ProcessDied")

# --- threads -----------------------------------------------------------------------------------

ATTACKS["threads_outlive_the_call"] = Attack(_with('''
    def f():
        import threading, time
        from primsel.simulator.state import get_current_context
        tables = get_current_context().tables
        def meddle():
            while True:
                for rows in list(tables.values()):
                    rows.append({"status": "pass"})
                    rows.pop()
                _write_everywhere(_forged_frames())
                time.sleep(0)
        for _ in range(4):
            threading.Thread(target=meddle, daemon=True).start()
        time.sleep(0.01)
''', _FORGED))

ATTACKS["threads_spin_after_return"] = Attack(_program('''
    def f():
        import threading
        def spin():
            while True:
                pass
        for _ in range(8):
            threading.Thread(target=spin, daemon=True).start()
        return None
'''), statuses=frozenset({"fail", "error", "timeout"}), slow=True)

# --- signals -----------------------------------------------------------------------------------

ATTACKS["signals_to_other_processes"] = Attack(_program('''
    def f():
        import os, signal
        reached = []
        for target in (os.getppid(), -1, 1):
            if target == os.getpid():  # the first process of a pid namespace is pid 1: itself
                continue
            try:
                os.kill(target, 0)
                reached.append(target)
            except OSError:
                pass
        try:
            os.killpg(os.getpgid(os.getppid()), 0)
            reached.append("the parent's group")
        except OSError:
            pass
        raise ValueError("LEAK %r" % reached if reached else "CLEAN")
'''), statuses=ERROR, probe=True)

ATTACKS["timer_interrupts_the_answer"] = Attack(_program('''
    def f():
        import signal
        def interrupt(signum, frame):
            raise KeyboardInterrupt
        signal.signal(signal.SIGALRM, interrupt)
        signal.signal(signal.SIGVTALRM, interrupt)
        signal.setitimer(signal.ITIMER_REAL, 0.0005, 0.0002)
        signal.setitimer(signal.ITIMER_VIRTUAL, 0.0005, 0.0002)
        return ["Tuesday"] * 400_000
'''), statuses=ERROR)

ATTACKS["stops_itself"] = Attack(_program('''
    def f():
        import signal
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.raise_signal(signal.SIGSTOP)
        return True
'''), slow=True)  # stopped: a timeout; in a pid namespace of its own it ignores its own SIGSTOP

# --- module poisoning --------------------------------------------------------------------------

ATTACKS["library_modules_poisoned"] = Attack(_with('''
    def f():
        import sys, types
        for name, module in list(sys.modules.items()):
            if name.startswith("primsel.simulator.apps") or name.startswith("aspera"):
                for key, value in list(vars(module).items()):
                    if isinstance(value, types.FunctionType):
                        setattr(module, key, lambda *a, **k: Yes())
        Event.__eq__ = lambda s, o: True
        Duration.to_minutes = lambda s: 210.0
        TimeInterval.__eq__ = lambda s, o: True
''', _YES))

ATTACKS["builtins_poisoned"] = Attack(_program('''
    def f():
        import builtins
        builtins.isinstance = lambda *a: True
        builtins.len = lambda *a: 1
        builtins.type = lambda *a: dict
        builtins.str = lambda *a: "pass"
        builtins.repr = lambda *a: "'pass'"
        builtins.getattr = lambda *a: "pass"
        builtins.__build_class__ = None
'''))

ATTACKS["random_poisoned"] = Attack(_with('''
    def f():
        import random, sys, types
        random.setstate((3, tuple([0] * 624) + (624,), None))
        random.getstate = lambda: (3, tuple([2 ** 64] * 624) + (10 ** 9,), Yes())
        random.random = lambda: 0.0
        fake = types.ModuleType("random")
        fake.getstate = random.getstate
        sys.modules["random"] = fake
''', _YES))

ATTACKS["random_state_degenerate_but_valid"] = Attack(_program('''
    def f():
        import random
        random.setstate((3, tuple([0] * 624) + (624,), None))
'''))

ATTACKS["execution_context_poisoned"] = Attack(_with('''
    def f():
        from primsel.simulator import state
        class Lying(dict):
            def items(self):
                return iter([("USER_CALENDAR", [{"status": "pass"}])])
            def __iter__(self):
                return iter(["USER_CALENDAR"])
        context = state.get_current_context()
        context.tables = Lying(context.tables)
        context.tables["EXTRA"] = [Yes()]
        context.query = "pass"
        state.TABLES = ("USER_CALENDAR", "EXTRA")
        state.get_current_context = lambda: context
        state.ExecutionContext.table = lambda self, name: [Yes()]
''', _YES))

ATTACKS["tables_hold_values_of_the_wrong_kind"] = Attack(_program('''
    def f():
        from primsel.simulator.state import get_current_context
        for rows in get_current_context().tables.values():
            for row in rows:
                for key in list(row):
                    row[key] = {"starts_at": "2024-06-26 14:00", "nan": float("nan"), "rows": [1, [2, [3]]]}
            rows.append({"event_id": None})
            rows.append([1, 2, 3])
'''))

ATTACKS["tables_hold_library_objects_and_aware_datetimes"] = Attack(_program('''
    def f():
        import datetime
        from primsel.simulator.state import get_current_context
        me = get_current_user()
        utc = datetime.timezone(datetime.timedelta(hours=14), "far east")
        for row in get_current_context().table("USER_CALENDAR"):
            row["attendees"] = [me]
            row["starts_at"] = datetime.datetime(2024, 6, 26, 14, 0, tzinfo=utc)
            row["ends_at"] = float("nan")
            row["show_as_status"] = "OutOfOffice"
        for row in get_current_context().table("EMPLOYEES"):
            row["team"] = me
            row["reports"] = [me, me]
'''))

ATTACKS["datetime_poisoned"] = Attack(_with('''
    def f():
        import datetime, sys
        class Always(Agrees, datetime.datetime): pass
        class Day(Agrees, datetime.date): pass
        datetime.datetime = Always
        datetime.date = Day
        for module in list(sys.modules.values()):
            if hasattr(module, "now_"):
                module.now_ = lambda: Always(2024, 6, 25, 9, 6)
        return Always(2024, 6, 26, 14, 0)
''', _AGREES))

# --- async def and generators ------------------------------------------------------------------

ATTACKS["async_entry_point"] = Attack(_program('''
    async def f():
        return True
'''), statuses=ERROR, error_type="AsyncEntryPoint")

ATTACKS["generator_entry_point"] = Attack(_program('''
    def f():
        yield "Tuesday"
        yield 4
'''), statuses=ERROR, error_type="UnsupportedReturn")

ATTACKS["async_generator_entry_point"] = Attack(_program('''
    async def f():
        yield True
'''), statuses=ERROR, error_type="AsyncEntryPoint")

# --- state manipulation, judged honestly -------------------------------------------------------

ATTACKS["every_table_emptied"] = Attack(_program('''
    def f():
        from primsel.simulator.state import get_current_context
        for rows in get_current_context().tables.values():
            rows.clear()
'''))

ATTACKS["world_simulated_again_with_setup_tools"] = Attack(_program('''
    def f():
        import importlib
        from primsel.simulator.state import ExecutionContext, set_current_context
        set_current_context(ExecutionContext())
        try:
            tools = importlib.import_module("primsel.simulator.setup_tools.company_directory")
            tools.simulate_org_structure(["Priya", "Sam", "Kofi"])
        except Exception:
            pass
'''))

ATTACKS["emails_blanked_then_any_answer"] = Attack(_program('''
    def f():
        from primsel.simulator.state import get_current_context
        for row in get_current_context().table("EMPLOYEES"):
            row["email_address"] = ""
            row["mobile"] = ""
        return "I do not know."
'''))

ATTACKS["finance_team_disbanded"] = Attack(_program('''
    def f():
        import datetime
        from primsel.simulator.state import get_current_context
        for row in get_current_context().table("EMPLOYEES"):
            if row["team"] == Team.Finance:
                row["team"] = Team.Engineering
        start = datetime.datetime(2024, 6, 26, 16, 0)
        add_event(Event(subject="Finance Q&A", attendees=[get_current_user()], starts_at=start,
                        ends_at=start + datetime.timedelta(minutes=30)))
'''), only=("builtin-26",))

ATTACKS["colleague_calendar_erased"] = Attack(_program('''
    def f():
        import datetime
        from primsel.simulator.state import get_current_context
        get_current_context().table("SHARED_CALENDARS").clear()
        mine = find_events()
        start = datetime.datetime(2024, 6, 27, 10, 0)
        while any(e.starts_at < start + datetime.timedelta(minutes=30) and e.ends_at > start for e in mine):
            start += datetime.timedelta(minutes=30)
        add_event(Event(subject="API design chat", attendees=find_employee("Kofi"), starts_at=start,
                        ends_at=start + datetime.timedelta(minutes=30)))
'''), only=("builtin-22",))

# --- time and resources ------------------------------------------------------------------------

ATTACKS["spins_forever_ignoring_signals"] = Attack(_program('''
    def f():
        import signal
        for name in ("SIGTERM", "SIGINT", "SIGXCPU", "SIGALRM"):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
        while True:
            pass
'''), statuses=frozenset({"timeout"}), slow=True)

ATTACKS["sleeps_in_module_level_code"] = Attack(_program('''
    def f():
        return None

    import time
    time.sleep(30)
'''), statuses=frozenset({"timeout"}), slow=True)

ATTACKS["floods_the_judge_with_output_notes"] = Attack(_with('''
    def f():
        note = b'{"note":"stdout_truncated"}'
        while True:
            _write_everywhere([len(note).to_bytes(4, "big") + note])
''', _FORGED), statuses=frozenset({"timeout"}), slow=True)

ATTACKS["judge_kept_busy_by_a_crowded_meeting"] = Attack(_program('''
    def f():
        # every attendee id costs the judge a scan of the directory: 80,000 scans of 2,000 rows
        import datetime
        from primsel.simulator.apps.work_calendar import _event_to_row
        from primsel.simulator.state import get_current_context
        tables = get_current_context().tables
        me = next(row for row in tables["EMPLOYEES"] if row["is_user"])
        filler = dict(me, is_user=False, reports=[], manager=None, assistant=None)
        tables["EMPLOYEES"][:0] = [dict(filler, employee_id="e%d" % i, name="e%d" % i) for i in range(2_000)]
        row = _event_to_row(Event(subject="x", starts_at=datetime.datetime(2030, 1, 1, 10, 0),
                                  ends_at=datetime.datetime(2030, 1, 1, 11, 0), event_id="crowded"))
        row["attendees"] = [me["employee_id"]] * 80_000
        tables["USER_CALENDAR"].append(row)
'''), statuses=frozenset({"error", "timeout"}), slow=True, only=("builtin-01",))

ATTACKS["memory_bomb"] = Attack(_program('''
    def f():
        hoard = []
        while True:
            hoard.append(bytearray(64 << 20))
'''), statuses=ERROR, few=True)

ATTACKS["recursion_limit_lifted_until_the_stack_breaks"] = Attack(_program('''
    def f():
        import sys
        sys.setrecursionlimit(10 ** 8)
        nested = []
        for _ in range(300_000):
            nested = [nested]
        return repr(nested)
'''), statuses=ERROR, few=True)

ATTACKS["output_flood"] = Attack(_program('''
    def f():
        import os, sys
        chunk = "pass\\n" * 20_000
        for _ in range(100):
            print(chunk)
            sys.stderr.write(chunk)
            sys.stdout.buffer.write(chunk.encode())
            for fd in (1, 2):
                os.write(fd, chunk.encode())
'''))

ATTACKS["processes_and_threads_bomb"] = Attack(_program('''
    def f():
        import os, subprocess, threading, time
        for attempt in (os.fork, lambda: subprocess.run(["true"]), lambda: os.system("true"),
                        lambda: os.execv("/bin/true", ["true"]), lambda: os.posix_spawn("/bin/true", ["true"], {})):
            try:
                attempt()
            except Exception:
                pass
        for _ in range(2000):
            try:
                threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
            except Exception:
                break
'''))

# --- files -------------------------------------------------------------------------------------

ATTACKS["task_files_proc_and_home_read"] = Attack(_program('''
    def f():
        import glob, importlib.resources, os, pathlib, pkgutil
        import primsel.simulator
        root = pathlib.Path(primsel.simulator.__file__).resolve().parents[1]
        found = []
        def attempt(label, read):
            try:
                data = read()
            except Exception:
                return
            if data:
                found.append(label)
        attempt("tasks.nt", lambda: (root / "datasets" / "builtin" / "tasks.nt").read_bytes())
        attempt("listdir", lambda: os.listdir(root / "datasets" / "builtin"))
        attempt("glob", lambda: glob.glob(str(root.parent / "**" / "*.nt"), recursive=True))
        attempt("pkgutil", lambda: pkgutil.get_data("primsel.datasets", "builtin/tasks.nt"))
        package = importlib.resources.files
        attempt("resources", lambda: package("primsel.datasets").joinpath("builtin/tasks.nt").read_bytes())
        attempt("repository", lambda: os.listdir(root.parent))
        for path in ("/proc/self/environ", "/proc/self/cmdline", "/proc/%d/cmdline" % os.getppid(),
                     "/proc/%d/environ" % os.getppid(), "/proc/%d/mem" % os.getppid(), "/proc/self/maps",
                     "/proc/1/environ", os.path.expanduser("~/.bash_history"), "/etc/shadow", "/etc/passwd"):
            attempt(path, lambda path=path: open(path, "rb").read(1 << 16))
        attempt("home", lambda: os.listdir(os.path.expanduser("~")))
        raise ValueError("LEAK %r" % found if found else "CLEAN")
'''), statuses=ERROR, probe=True)


def _builtin_tasks() -> list[Task]:
    return load_builtin_tasks()


def _attack_tasks(attack: Attack, tasks: list[Task], archive: bool) -> list[Task]:
    few = attack.slow or attack.few
    wanted = (ARCHIVE_FEW if few else None) if archive else (attack.only or (FEW if few else None))
    tasks = [t for t in tasks if wanted is None or t.id in wanted]
    return [t for t in tasks if t.id not in attack.skip]


def _run(box: Sandbox, tasks: list[Task], program: str) -> list[ExecutionResult]:
    return list(box.execute_many((task, program, None) for task in tasks))


@pytest.fixture(scope="module", params=[True, False], ids=["audit_hook", "no_audit_hook"])
def audit_hook(request) -> bool:
    """Every attack runs twice: with the audit hook, and without it (the layers beneath must hold)."""
    return request.param


@pytest.fixture(scope="module")
def sandbox(audit_hook):
    with Sandbox(workers=2, timeout=TIMEOUT, audit_hook=audit_hook) as box:
        yield box


@pytest.fixture(scope="module")
def short_sandbox(audit_hook):
    with Sandbox(workers=2, **SHORT, audit_hook=audit_hook) as box:
        yield box


@pytest.fixture(scope="module")
def archive_tasks(asper_path) -> list[Task]:
    from primsel.datasets import load_tasks

    tasks = [t for t in load_tasks(asper_path) if t.id in ARCHIVE_TASKS]
    assert sorted(t.id for t in tasks) == sorted(ARCHIVE_TASKS)
    return tasks


def _summary(results: list[ExecutionResult]) -> list[tuple[str, str, str | None, str]]:
    return [(r.task_id, r.status, r.error_type, (r.message or "")[:200]) for r in results]


def _check(attack: Attack, results: list[ExecutionResult], limits: dict[str, float], hooked: bool = True) -> None:
    summary = _summary(results)
    assert summary
    assert [s for s in summary if s[1] == "pass"] == []
    assert [s for s in summary if s[1] not in attack.statuses] == []
    if attack.error_type is not None and hooked:  # which error, the hook decides; that none passes, not
        assert [s for s in summary if s[1] == "error" and s[2] != attack.error_type] == []
    if attack.probe:
        assert [s for s in summary if s[3] != "CLEAN"] == []
    # no verdict outlives the limits (the task's, the judge's, and the caller's grace)
    bound = limits["timeout"] + limits.get("judge_timeout", 60.0) + 5.0
    assert [(r.task_id, r.seconds) for r in results if r.seconds > bound] == []


def _marked(names, reason_of):
    return [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=reason_of(ATTACKS[n])))
            if reason_of(ATTACKS[n]) else n for n in names]


@pytest.mark.parametrize("name", _marked(ATTACKS, lambda a: a.xfail))
def test_attack_never_passes_a_builtin_task(sandbox, short_sandbox, audit_hook, name):
    attack = ATTACKS[name]
    box, limits = (short_sandbox, SHORT) if attack.slow else (sandbox, {"timeout": TIMEOUT})
    tasks = _attack_tasks(attack, _builtin_tasks(), archive=False)
    _check(attack, _run(box, tasks, attack.program), limits, audit_hook)


ARCHIVE_ATTACKS = [n for n, a in ATTACKS.items() if a.only is None]


@pytest.mark.asper
@pytest.mark.parametrize("name", _marked(ARCHIVE_ATTACKS, lambda a: a.xfail_archive))
def test_attack_never_passes_an_archive_task(sandbox, short_sandbox, audit_hook, archive_tasks, name):
    attack = ATTACKS[name]
    box, limits = (short_sandbox, SHORT) if attack.slow else (sandbox, {"timeout": TIMEOUT})
    tasks = _attack_tasks(attack, archive_tasks, archive=True)
    _check(attack, _run(box, tasks, attack.program), limits, audit_hook)


def test_there_are_at_least_thirty_attacks():
    assert len(ATTACKS) >= 30
    assert len(set(a.program for a in ATTACKS.values())) == len(ATTACKS)


# --- attacks that need the host's side of the check ------------------------------------------


def test_poisoning_attacks_do_not_reach_later_tasks():
    """After poisoning attacks, the reference programs still pass on the same worker."""
    tasks = _builtin_tasks()
    poisoners = ["library_modules_poisoned", "builtins_poisoned", "random_poisoned", "datetime_poisoned",
                 "execution_context_poisoned", "sandbox_modules_wrapped", "json_module_rewritten",
                 "tables_hold_values_of_the_wrong_kind", "threads_outlive_the_call", "descriptors_swapped_and_closed"]
    jobs = [(task, ATTACKS[name].program, None) for name in poisoners for task in tasks[:2]]
    jobs += [(task, task.program, None) for task in tasks]
    with Sandbox(workers=1, timeout=TIMEOUT) as box:
        results = list(box.execute_many(jobs))
    attacked, reference = results[: -len(tasks)], results[-len(tasks):]
    assert [s for s in _summary(attacked) if s[1] == "pass"] == []
    assert [s for s in _summary(reference) if s[1] != "pass"] == []


def test_an_earlier_program_text_is_not_in_a_later_program():
    victim = 'def f():\n    secret = "VICTIM-" + "7c1e"\n    return "VICTIM-7c1e-PROGRAM-TEXT"\n'
    probe = _with('''
        def f():
            hits = [h for h in _reachable_strings() if "VICTIM-" + "7c1e" in h]
            raise ValueError("LEAK %r" % hits if hits else "CLEAN")
    ''', _SCAN.replace("_reachable_secrets", "_reachable_strings").replace(
        'marks = ["Hey, [" + "Assistant]"', 'marks = ["VICTIM-" + "7c1e", "Hey, [" + "Assistant]"'))
    tasks = _builtin_tasks()[:3]
    with Sandbox(workers=1, timeout=TIMEOUT) as box:
        results = list(box.execute_many([(t, victim, None) for t in tasks] + [(t, probe, None) for t in tasks]))
    assert [s for s in _summary(results[3:]) if s[3] != "CLEAN"] == []


def test_a_listening_socket_on_the_host_gets_no_connection(sandbox):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        program = _program(f'''
            def f():
                import _socket, socket
                reached = []
                host = ("127.0.0.1", {port})
                for make in (lambda: socket.create_connection(host, timeout=0.5),
                             lambda: _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM).connect(host),
                             lambda: _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM).sendto(b"x", host),
                             lambda: _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM).connect("\\0primsel")):
                    try:
                        make()
                        reached.append(make)
                    except Exception:
                        pass
                raise ValueError("LEAK %d" % len(reached) if reached else "CLEAN")
        ''')
        results = _run(sandbox, _builtin_tasks()[:2], program)
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert _summary(results) == [(t.id, "error", "ValueError", "CLEAN") for t in _builtin_tasks()[:2]]


def test_signals_do_not_reach_a_host_process(sandbox, sleeper):
    program = _program(f'''
        def f():
            import os, signal
            for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP):
                for send in (os.kill, os.killpg):
                    try:
                        send({sleeper}, sig)
                    except Exception:
                        pass
            raise ValueError("CLEAN")
    ''')
    results = _run(sandbox, _builtin_tasks()[:2], program)
    assert os.waitpid(sleeper, os.WNOHANG) == (0, 0)  # still running: neither killed nor stopped
    with open(f"/proc/{sleeper}/stat") as handle:
        assert handle.read().split(") ")[1][0] in "SR"
    assert [s[1] for s in _summary(results)] == ["error", "error"]


def test_writes_leave_nothing_on_the_host(sandbox, tmp_path):
    targets = [Path(primsel.__file__).parent / "simulator" / "apps" / "adversarial_pwned.py",
               Path(tempfile.gettempdir()) / "primsel-adversarial-pwned", tmp_path / "pwned"]
    program = _program(f'''
        def f():
            import os
            written = []
            for target in {[str(t) for t in targets]!r}:
                for make in (lambda: open(target, "w").write("pwned"),
                             lambda: os.close(os.open(target, os.O_WRONLY | os.O_CREAT)),
                             lambda: os.mkdir(target + ".d"),
                             lambda: os.symlink("/etc/passwd", target + ".link")):
                    try:
                        make()
                        written.append(target)
                    except Exception:
                        pass
            raise ValueError("LEAK %r" % written if written else "CLEAN")
    ''')
    results = _run(sandbox, _builtin_tasks()[:2], program)
    assert [s[3] for s in _summary(results)] == ["CLEAN", "CLEAN"]
    leftovers = [p for t in targets for p in (t, Path(f"{t}.d"), Path(f"{t}.link")) if os.path.lexists(p)]
    assert leftovers == []


@pytest.mark.asper
def test_the_archive_cannot_be_read(sandbox, asper_path):
    program = _program(f'''
        def f():
            import os, tarfile
            found = []
            for read in (lambda: open({str(asper_path)!r}, "rb").read(64),
                         lambda: tarfile.open({str(asper_path)!r}).getnames(),
                         lambda: os.listdir({str(asper_path.parent)!r})):
                try:
                    if read():
                        found.append(read)
                except Exception:
                    pass
            raise ValueError("LEAK %d" % len(found) if found else "CLEAN")
    ''')
    results = _run(sandbox, _builtin_tasks()[:2], program)
    assert [s[3] for s in _summary(results)] == ["CLEAN", "CLEAN"]


@pytest.mark.skipif(not landlock.status()[0], reason="Landlock is not available here")
def test_installed_package_hides_the_builtin_task_files(tmp_path):
    """A regular (non-editable) install: the same probe in a virtual environment holding a copy of primsel."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # the dependencies come from this interpreter's site-packages; primsel is copied in
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    source = Path(primsel.__file__).parent
    subprocess.run([sys.executable, "-c", "import shutil, sys; shutil.copytree(sys.argv[1], sys.argv[2], "
                    "ignore=shutil.ignore_patterns('__pycache__'))", source, site / "primsel"], check=True)
    probe = _program('''
        def f():
            import pathlib
            import primsel.simulator
            root = pathlib.Path(primsel.simulator.__file__).resolve().parents[1]
            try:
                text = (root / "datasets" / "builtin" / "tasks.nt").read_text()
            except OSError:
                raise ValueError("CLEAN")
            raise ValueError("LEAK %d characters, with evaluation programs: %s" % (len(text), "def evaluate_" in text))
    ''')
    driver = textwrap.dedent('''
        import sys
        import primsel
        from primsel.datasets import load_builtin_tasks
        from primsel.simulator.sandbox import Sandbox
        assert primsel.__file__.startswith(sys.prefix), primsel.__file__
        with Sandbox(workers=1, timeout=10) as box:
            result = box.execute(load_builtin_tasks()[0], sys.stdin.read())
        print(result.status, result.error_type, result.message)
    ''')
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run([python, "-P", "-c", driver], input=probe, capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "error ValueError CLEAN"


def test_a_world_edited_by_hand_is_judged_by_what_it_holds(sandbox):
    """Editing the tables directly (no library call) counts exactly as much as the edit is right."""
    template = _program('''
        def f():
            import datetime
            from primsel.simulator.apps.work_calendar import _event_to_row
            from primsel.simulator.state import get_current_context
            start = datetime.datetime(2024, 6, 26, HOUR, 0)
            event = Event(subject="Catch-up", attendees=find_employee("Priya"), starts_at=start,
                          ends_at=start + datetime.timedelta(minutes=45), event_id="written-by-hand")
            get_current_context().table("USER_CALENDAR").append(_event_to_row(event))
    ''')
    task = next(t for t in _builtin_tasks() if t.id == "builtin-01")  # 45 minutes with Priya, tomorrow 2pm
    right, wrong = (template.replace("HOUR", hour) for hour in ("14", "15"))
    assert [(r.status, r.error_type) for r in sandbox.execute_many([(task, right, None), (task, wrong, None)])] == [
        ("pass", None), ("fail", "SolutionError")]


def test_texts_that_cross_are_capped(sandbox):
    results = _run(sandbox, _builtin_tasks()[:2], ATTACKS["huge_names_and_messages"].program)
    assert [(r.status, r.error_type) for r in results] == [("error", "E" * 100)] * 2
    assert [len(r.message) <= 2000 + len("...") for r in results] == [True, True]


# --- the caller ------------------------------------------------------------------------------


def test_program_text_never_crashes_the_caller(sandbox):
    texts = [
        "def f():\n    return " + "(" * 100_000 + "1" + ")" * 100_000 + "\n",
        "def f():\n    return " + "-" * 100_000 + "1\n",
        "def f():\n    return " + "1+" * 100_000 + "1\n",
        "def f():\n    return " + "[" * 5_000 + "]" * 5_000 + "\n",
        "def f():\n    return '\ud800'\n",
        "def f():\n    return 1\x00\n",
        "def f():\n    return 1\n" + "#" * (300 << 10),
        "\ufeffdef f():\n\treturn 1\n  \n",
    ]
    task = _builtin_tasks()[0]
    results = list(sandbox.execute_many((task, text, None) for text in texts))
    parse_errors = {"SyntaxError", "MemoryError", "RecursionError", "UnicodeEncodeError", "ValueError"}
    assert [r.status for r in results] == ["error"] * len(texts)
    assert [r.error_type for r in results if r.error_type not in parse_errors] == ["ProgramTooLarge"]


def test_every_text_of_a_verdict_is_valid_utf8(sandbox):
    program = _with('''
        def f():
            import os
            _write_everywhere([_answer(
                calls=1, trace=[["work_calendar.find_events" + chr(0xD800), 3, "(" + chr(0xDFFF) + ")"]],
                exception={"type": chr(0xD800) + "Error", "module": None, "message": "no", "args": None, "line": 2})])
            os._exit(0)
    ''', _FORGED)
    results = _run(sandbox, _builtin_tasks()[:2], program)
    assert [s[1] for s in _summary(results)] == ["error", "error"]
    for result in results:
        texts = [result.error_type or "", result.message or "", *result.called_primitives]
        texts += [text for entry in result.trace for text in (entry[0], entry[2])]
        for text in texts:
            text.encode("utf-8")
