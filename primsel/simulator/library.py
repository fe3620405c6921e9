"""The standard library of primitives, read from the simulator's app modules.

:func:`build_library` is the one place that hands the app modules of
:mod:`primsel.simulator.apps` to :meth:`primsel.library.Library.from_modules`: the library's
data types and docstring parsing live a layer below and import no app module.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence

from primsel.library import Library
from primsel.simulator.apps import company_directory, exceptions, room_booking, time_utils, work_calendar
from primsel.simulator.layout import APPS

_MODULES = {"exceptions": exceptions, "time_utils": time_utils, "room_booking": room_booking,
            "company_directory": company_directory, "work_calendar": work_calendar}


def app_modules() -> dict[str, types.ModuleType]:
    """The prompt-facing app modules, ``{short name: module}``, in the order of
    :data:`primsel.simulator.layout.APPS`."""
    return {name: _MODULES[name] for name in APPS}


def build_library(names: Mapping[str, Sequence[str]] | None = None) -> Library:
    """The standard library: the prompt-facing symbols of the app modules, introspected.

    Parameters
    ----------
    names : module short name -> symbol names; default :data:`primsel.library.LIBRARY_NAMES`
        (65 symbols).

    Raises
    ------
    ImportError : ``names`` names a module that is not an app module.
    AttributeError : a listed symbol is not defined by its module.
    """
    modules = app_modules()
    unknown = [m for m in (names or {}) if m not in modules]
    if unknown:
        raise ImportError(f"no app module {unknown[0]!r} in primsel.simulator.apps (there are {', '.join(modules)})")
    return Library.from_modules(modules, names)
