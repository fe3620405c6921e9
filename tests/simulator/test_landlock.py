"""Landlock on its own, in a throwaway interpreter, and the paths the sandbox leaves readable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from primsel.simulator import landlock

needs_landlock = pytest.mark.skipif(landlock.abi() < 1, reason="Landlock is not available here")

PROBE = textwrap.dedent(
    """\
    import errno, json, os, socket, sys
    from primsel.simulator import landlock

    allowed, secret = sys.argv[1], sys.argv[2]
    version = landlock.restrict([*landlock.runtime_paths(), allowed])

    def attempt(function):
        try:
            function()
            return "ok"
        except OSError as exc:
            return errno.errorcode[exc.errno]

    def bind():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))

    outcomes = {
        "read allowed": attempt(lambda: open(os.path.join(allowed, "data.txt")).read()),
        "list allowed": attempt(lambda: os.listdir(allowed)),
        "read outside": attempt(lambda: open(secret).read()),
        "write allowed": attempt(lambda: open(os.path.join(allowed, "new.txt"), "w")),
        "parent environ": attempt(lambda: open(f"/proc/{os.getppid()}/environ", "rb").read()),
        "parent mem": attempt(lambda: open(f"/proc/{os.getppid()}/mem", "rb")),
        "own status": attempt(lambda: open("/proc/self/status").read()),
        "home": attempt(lambda: os.listdir(os.path.expanduser("~"))),
        "import json.tool": attempt(lambda: __import__("json.tool")),
        "tcp bind": attempt(bind) if version >= 4 else "EACCES",
        "signal parent": attempt(lambda: os.kill(os.getppid(), 0)) if version >= 6 else "EPERM",
    }
    print(json.dumps(outcomes))
    """
)


@needs_landlock
def test_restrict_allows_reading_only_beneath_the_given_paths(tmp_path):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "data.txt").write_text("ok")
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    out = subprocess.run(
        [sys.executable, str(probe), str(allowed), str(secret)], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == {
        "read allowed": "ok",
        "list allowed": "ok",
        "read outside": "EACCES",
        "write allowed": "EACCES",
        "parent environ": "EACCES",
        "parent mem": "EACCES",
        "own status": "EACCES",
        "home": "EACCES",
        "import json.tool": "ok",
        "tcp bind": "EACCES",
        "signal parent": "EPERM",
    }
    assert sorted(p.name for p in allowed.iterdir()) == ["data.txt"]


def test_runtime_paths_cover_the_installation_but_not_home_proc_or_cwd(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    paths = landlock.runtime_paths()

    def covered(path: str) -> bool:
        real = os.path.realpath(path)
        return any(real == p or real.startswith(p.rstrip("/") + "/") for p in paths)

    for key in ("stdlib", "platstdlib", "purelib"):
        assert covered(sysconfig.get_paths()[key]), key
    import primsel

    assert covered(primsel.__file__)
    assert covered(json.__file__)
    assert not covered(str(tmp_path))
    assert not covered("/proc/self/environ")
    assert os.path.realpath(os.path.expanduser("~")) not in paths
    assert "/" not in paths
    package_root = str(Path(primsel.__file__).resolve().parents[1])
    assert package_root not in paths or package_root in (sys.prefix, sys.base_prefix)
    assert paths == sorted(set(paths))  # no duplicates, nothing nested twice
    assert not any(a != b and b.startswith(a.rstrip("/") + "/") for a in paths for b in paths)


def test_abi_is_zero_or_a_version():
    assert landlock.abi() >= 0
    available, detail = landlock.status()
    assert available == (landlock.abi() >= 1)
    assert detail
