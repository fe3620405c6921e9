"""Where ASPERA's source is: a checkout of apple/ml-aspera named by ``$PRIMSEL_ASPERA_SRC`` (or an experiment's
``aspera_src``), checked for the files ASPERA's agents read.

primsel copies nothing of ASPERA: its prompt templates, guidelines, worked examples and library documentation are
read from the checkout when a run needs them, as a user points primsel at their own copy.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

#: The environment variable naming the checkout.
ENV_VAR = "PRIMSEL_ASPERA_SRC"
#: Modules of ``aspera.apps`` ASPERA's PS agent skips (``APP_DENY_LIST`` of ``primitives_selection_agent.py``; it
#: names no module, ``reminder`` being the module's name, so all twelve are asked about).
DENY_LIST = ("reminders",)
#: The agents' guidelines, relative to ``src/aspera``.
GUIDELINES_FILE = Path("configs/agent/guidelines/default.yaml")
#: Files of ``src/aspera`` that the rendering reads or imports (beside the modules of ``apps/``).
REQUIRED = (
    Path("apps/__init__.py"), Path("code_utils/utils.py"), Path("code_utils/code_symbol.py"), Path("parser.py"),
    Path("constants.py"), Path("aliases.py"), Path("scenario.py"),
    Path("prompting/system_turn_templates.py"), Path("prompting/user_turn_templates.py"),
    Path("prompting/primitives_selection_templates.py"), GUIDELINES_FILE,
    Path("examples/work_calendar_query_solution.py"),
)


class AsperaSourceError(ValueError):
    """ASPERA's source cannot be used: no checkout named, or one without a file the agents read."""


def locate(path: str | os.PathLike[str] | None = None) -> Path:
    """The checkout ``path`` names, else ``$PRIMSEL_ASPERA_SRC``, checked.

    Returns
    -------
    The checkout's root (the folder holding ``src/aspera``), resolved.

    Raises
    ------
    AsperaSourceError : neither is given, or the folder is not a checkout of apple/ml-aspera (the message names
        where the path came from and the first file not found).
    """
    origin = "aspera_src"
    if path is None:
        path = os.environ.get(ENV_VAR) or None
        origin = f"${ENV_VAR}"
    if path is None:
        raise AsperaSourceError(
            f"ASPERA's protocol needs its source: set {ENV_VAR} (or aspera_src in the experiment) to a checkout of "
            "https://github.com/apple/ml-aspera")
    root = Path(path).expanduser().resolve()
    try:
        check_source(root)
    except AsperaSourceError as exc:
        raise AsperaSourceError(f"{origin} = {path}: {exc}") from None
    return root


def check_source(root: Path) -> Path:
    """``root/src/aspera``, after checking it holds every file of :data:`REQUIRED`.

    Raises
    ------
    AsperaSourceError : the folder or a required file is missing (the message names it).
    """
    package = root / "src" / "aspera"
    if not root.is_dir():
        raise AsperaSourceError(f"no such folder: {root}")
    if not package.is_dir():
        raise AsperaSourceError(f"not a checkout of apple/ml-aspera: no src/aspera in {root}")
    for relative in REQUIRED:
        if not (package / relative).is_file():
            raise AsperaSourceError(f"not a checkout of apple/ml-aspera: src/aspera/{relative.as_posix()} not found")
    return package


def source_digest(root: Path) -> str:
    """sha256 (first 16 hex characters) of the files the rendering reads: the required files and the modules of
    ``apps/``, by relative path and content. Two checkouts with the same digest give the same requests."""
    package = root / "src" / "aspera"
    files = sorted({*REQUIRED, *(p.relative_to(package) for p in (package / "apps").glob("*.py"))})
    h = hashlib.sha256()
    for relative in files:
        h.update(relative.as_posix().encode() + b"\0" + (package / relative).read_bytes() + b"\0")
    return h.hexdigest()[:16]
