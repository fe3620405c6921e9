"""Landlock restrictions for the process that runs an untrusted program (Linux >= 5.13).

Landlock is a Linux security module that an unprivileged process can apply to itself; the
restriction is inherited by its threads and children and cannot be lifted. :func:`restrict`
asks the kernel (system calls ``landlock_create_ruleset`` / ``landlock_add_rule`` /
``landlock_restrict_self``, numbers 444 / 445 / 446 on x86_64 and aarch64, through ``ctypes``)
for, depending on the ABI version the kernel reports:

* file system (ABI >= 1): every access right the ABI defines is handled, and only
  ``READ_FILE`` and ``READ_DIR`` are granted, beneath the given paths. Everything else is
  denied everywhere: reading outside those paths (``/proc``, the home directory, the caller's
  working directory), executing, writing, creating, removing, linking, ``refer`` (ABI 2),
  ``truncate`` (ABI 3) and device ``ioctl`` (ABI 5);
* network (ABI >= 4): TCP ``bind`` and ``connect`` to any port are denied;
* scopes (ABI >= 6): signals to processes outside the sandbox and connections to abstract
  unix sockets created outside it are denied;
* ABI >= 7: denials are not written to the audit log (the program is untrusted, so denials
  are expected and would only flood the log).

Landlock also forbids ptrace-style access (``/proc/<pid>/mem``, ``environ``, ``fd/N``) to any
process outside the sandbox's domain. Files already open stay usable.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import sys
import sysconfig
from collections.abc import Iterable

from primsel import processes

#: System call numbers (shared by x86_64 and aarch64, the generic table).
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
#: File-system access rights added by each ABI version (bits 0..12: execute ... make_sym).
_FS_RIGHTS = {1: (1 << 13) - 1, 2: 1 << 13, 3: 1 << 14, 5: 1 << 15}
#: TCP bind and connect (ABI 4).
_NET_RIGHTS = {4: (1 << 0) | (1 << 1)}
#: Abstract unix socket and signal scopes (ABI 6).
_SCOPES = {6: (1 << 0) | (1 << 1)}
#: ``LANDLOCK_RESTRICT_SELF_LOG_SAME_EXEC_OFF`` (ABI 7).
_LOG_SAME_EXEC_OFF = 1 << 0
#: Highest ABI whose rights this module knows; newer kernels are used at this level.
KNOWN_ABI = 7


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _syscall(number: int, *args: object) -> int:
    """``syscall(number, *args)`` with integers passed as C longs; raises OSError on failure."""
    # Loaded once per process (a fork per program should not pay for dlopen); calling through it
    # from program code is a ``ctypes.call_function`` event the audit hook refuses, and without
    # the hook a program could load the C library itself: the layers beneath do not rely on it.
    libc = processes.libc()
    libc.syscall.restype = ctypes.c_long
    result = libc.syscall(*(ctypes.c_long(a) if isinstance(a, int) else a for a in (number, *args)))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def abi() -> int:
    """The Landlock ABI version of the running kernel; 0 when Landlock is unavailable."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        return _syscall(_SYS_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION)
    except (OSError, AttributeError):  # ENOSYS (old kernel), EOPNOTSUPP (disabled at boot)
        return 0


def status() -> tuple[bool, str]:
    """Whether :func:`restrict` can be applied here, with a short description or the reason not."""
    version = abi()
    if version < 1:
        return False, "Landlock is not available (Linux >= 5.13 with Landlock enabled is needed)"
    parts = ["file system read-only beneath the Python installation and imported packages"]
    if version >= 4:
        parts.append("TCP bind/connect denied")
    if version >= 6:
        parts.append("signals and abstract unix sockets scoped to the sandbox")
    return True, f"Landlock ABI {version}: " + ", ".join(parts)


def _rights(table: dict[int, int], version: int) -> int:
    return sum(bits for since, bits in table.items() if since <= version)


def restrict(readable: Iterable[str]) -> int:
    """Restrict the calling thread (and its future threads) for good.

    Parameters
    ----------
    readable : paths (directories or files) beneath which reading stays allowed; paths that do
        not exist are skipped.

    Returns
    -------
    int : the ABI version applied (capped at :data:`KNOWN_ABI`).

    Raises
    ------
    OSError : Landlock is unavailable (``ENOSYS``) or a step failed.
    """
    handle = ruleset(readable)
    try:
        return enforce(handle)
    finally:
        os.close(handle)


def ruleset(readable: Iterable[str]) -> int:
    """A Landlock ruleset allowing reads beneath ``readable`` only, as a descriptor.

    Built once, it can be enforced by many processes forked afterwards (:func:`enforce`); the
    caller closes it. Paths that do not exist are skipped.

    Raises
    ------
    OSError : Landlock is unavailable (``ENOSYS``) or a step failed.
    """
    version = min(abi(), KNOWN_ABI)
    if version < 1:
        raise OSError(errno.ENOSYS, "Landlock is not available")
    attr = _RulesetAttr(_rights(_FS_RIGHTS, version), _rights(_NET_RIGHTS, version), _rights(_SCOPES, version))
    size = 8 if version < 4 else 16 if version < 6 else 24  # the struct grew with ABIs 4 and 6
    handle = _syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), size, 0)
    try:
        for path in readable:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
                rule = _PathBeneathAttr(FS_READ_FILE | FS_READ_DIR if is_dir else FS_READ_FILE, fd)
                _syscall(_SYS_ADD_RULE, handle, _RULE_PATH_BENEATH, ctypes.byref(rule), 0)
            finally:
                os.close(fd)
    except BaseException:
        os.close(handle)
        raise
    return handle


def enforce(handle: int) -> int:
    """Restrict the calling thread (and its future threads) for good with a ruleset descriptor.

    Returns
    -------
    int : the ABI version applied (capped at :data:`KNOWN_ABI`).

    Raises
    ------
    OSError : the kernel refused.
    """
    version = min(abi(), KNOWN_ABI)
    libc = processes.libc()
    libc.prctl(*(ctypes.c_ulong(v) for v in (_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)))  # required unless privileged
    flags = _LOG_SAME_EXEC_OFF if version >= 7 else 0
    _syscall(_SYS_RESTRICT_SELF, handle, flags)
    return version


def without(paths: Iterable[str], hidden: Iterable[str]) -> list[str]:
    """``paths`` with everything beneath ``hidden`` left out, expressed with allow rules only.

    Landlock can only allow, never carve out: a path that contains a hidden one is replaced by
    its entries (recursively, down to the hidden path), so the hidden path and what lies beneath
    it are not covered while everything beside it still is.

    Parameters
    ----------
    paths : absolute, resolved paths (as :func:`runtime_paths` returns them).
    hidden : absolute, resolved paths to leave out.
    """
    return _without(list(paths), [h.rstrip("/") for h in hidden], set())


def _without(paths: list[str], hidden: list[str], expanded: set[str]) -> list[str]:
    kept: list[str] = []
    for path in paths:
        inside = [h for h in hidden if h == path or h.startswith(path.rstrip("/") + "/")]
        if not inside:
            kept.append(path)
        elif path not in inside and path not in expanded:  # (a symbolic link may lead back up)
            expanded.add(path)
            try:
                entries = sorted(os.path.realpath(e.path) for e in os.scandir(path))
            except OSError:
                continue
            kept.extend(_without(entries, hidden, expanded))
    return kept


def runtime_paths() -> list[str]:
    """Paths the Python runtime and the imported packages need to read, without redundancy.

    The Python installation (``sys.prefix``, ``sys.base_prefix``, ``sys.exec_prefix``, the
    standard library and site-packages directories), the directory (or file) of every imported
    top-level package that lives elsewhere (e.g. a source checkout of primsel, not its parent),
    the directories of the loaded shared libraries and ``/etc/ld.so.cache`` (so extension
    modules can still load their libraries), and the time-zone database (``zoneinfo``). The
    file-system root, ``/proc`` and the home directory itself are never included.
    """
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, "/etc/ld.so.cache"}
    paths.update(sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib"))
    paths.update((sysconfig.get_config_var("TZPATH") or "").split(os.pathsep))
    for name, module in list(sys.modules.items()):
        if "." in name or module is None:
            continue
        locations = list(getattr(module, "__path__", None) or ())  # a package: its directories
        file = getattr(module, "__file__", None)
        if not locations and isinstance(file, str):
            locations = [file]
        paths.update(p for p in locations if isinstance(p, str) and os.path.isabs(p))
    paths.update(_shared_library_dirs())
    forbidden = {"/", "/proc", os.path.realpath(os.path.expanduser("~"))}
    resolved = sorted({os.path.realpath(p) for p in paths if p and os.path.exists(p)} - forbidden)
    kept: list[str] = []
    for path in resolved:  # sorted, so a directory comes before what lies beneath it
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def _shared_library_dirs() -> set[str]:
    """Directories of the shared libraries mapped into this process (Linux; empty elsewhere)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as handle:
            files = {line.split(maxsplit=5)[-1].strip() for line in handle if "/" in line}
    except OSError:
        return set()
    return {os.path.dirname(f) for f in files if f.startswith("/") and ".so" in os.path.basename(f)}
