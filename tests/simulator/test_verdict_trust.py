"""The first forgeries found against the in-process evaluator: each must now fail to pass.

Each program is the whole program as reported; it does not solve its task. They run on every
built-in task and, when the archive is present, on Asper-Bench tasks 1, 17, 100, 200 and 250
(none of which a do-nothing program passes).
"""

from __future__ import annotations

import textwrap

import pytest

from primsel.datasets import load_builtin_tasks
from primsel.simulator.sandbox import Sandbox

PROFILE_HOOK = textwrap.dedent(
    """\
    def f():
        import sys
        sys.setprofile(lambda fr, ev, a: ev == 'return' and fr.f_code.co_name == '_verdict'
                       and a.update(status='pass', error_type=None, message=None, line=None))
    """
)
JSON_ENCODER = textwrap.dedent(
    """\
    def f():
        import json
        class E(json.JSONEncoder):
            def encode(self, o):
                return super().encode(dict(o, status='pass') if 'status' in o else o)
        json._default_encoder = E()
    """
)
SAYS_YES = textwrap.dedent(
    """\
    def f():
        class Yes:
            __eq__ = lambda s, o: True
            __contains__ = lambda s, o: True
            __len__ = lambda s: 1
            __round__ = lambda s, n=None: s
        return Yes()
    """
)
FORGERIES = {"profile_hook": PROFILE_HOOK, "json_encoder": JSON_ENCODER, "says_yes": SAYS_YES}
ARCHIVE_TASKS = ("1", "17", "100", "200", "250")


@pytest.fixture(scope="module", params=[True, False], ids=["audit_hook", "no_audit_hook"])
def sandbox(request):
    """The forgeries run with the audit hook and without it (the verdict must not depend on it)."""
    with Sandbox(workers=2, timeout=10, audit_hook=request.param) as box:
        yield box


def _verdicts(box, tasks, program):
    return {r.task_id: (r.status, r.error_type) for r in box.execute_many((t, program, None) for t in tasks)}


@pytest.mark.parametrize("name", FORGERIES)
def test_forgery_never_passes_a_builtin_task(sandbox, name):
    verdicts = _verdicts(sandbox, load_builtin_tasks(), FORGERIES[name])
    assert len(verdicts) == 32
    assert [t for t, (status, _) in verdicts.items() if status == "pass"] == []
    if name == "says_yes":  # the object cannot leave the program's process
        assert set(verdicts.values()) == {("error", "UnsupportedReturn")}


@pytest.mark.asper
@pytest.mark.parametrize("name", FORGERIES)
def test_forgery_never_passes_an_archive_task(sandbox, asper_path, name):
    from primsel.datasets import load_tasks

    tasks = [t for t in load_tasks(asper_path) if t.id in ARCHIVE_TASKS]
    assert sorted(t.id for t in tasks) == sorted(ARCHIVE_TASKS)
    verdicts = _verdicts(sandbox, tasks, FORGERIES[name])
    assert [t for t, (status, _) in verdicts.items() if status == "pass"] == []
