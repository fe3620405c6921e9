"""How the report names, formats and colours: a configuration is the cells sharing every setting but ``k``,
``closure`` and the dataset; its colour is its ranking's (no selector), black for the default, grey for references."""

from __future__ import annotations

import colorsys
import math
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import colorcet
from matplotlib.colors import to_hex

from primsel import spec as specs
from primsel.experiments.labels import generator_label, get_dotted, varied_keys
from primsel.experiments.results import CellResult, Experiment, data_text
from primsel.files import canonical_json
from primsel.retrieval import DEFAULT_RETRIEVER
from primsel.retrieval.store import retrieval_key

#: Colour of the recommended default; colour and line style of each reference ranking type.
DEFAULT_COLOUR = "#000000"
REFERENCE_STYLE = {"oracle": ("#8c8c8c", "--"), "random": ("#8c8c8c", ":"), "all": ("#8c8c8c", "-.")}
#: The settings that name a ranking (with the data); the others cut it or use its selection.
RANKING_KEYS = ("retriever", "folds", "seed", "depth")


def num(value: Any, digits: int = 3) -> str:
    """A table value: ``digits`` decimals for a number, ``–`` for None or NaN, else ``str``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return str(value) if isinstance(value, bool) or not isinstance(value, (int, float)) else f"{value:.{digits}f}"


def p_value(value: float | None) -> str:
    """A p-value in a table: three decimals, ``<0.001`` below that, ``–`` for None."""
    return "–" if value is None else "<0.001" if value < 0.001 else f"{value:.3f}"


def or_default(value: float | None, default: float) -> float:
    """``float(value)``, or ``default`` when it is None."""
    return default if value is None else float(value)


def table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str | None = None) -> list[str]:
    """Markdown lines of a table; ``align``: ``l`` or ``r`` per column (default: the first left)."""
    align = align or "l" + "r" * (len(header) - 1)
    lines = ["| " + " | ".join(row) + " |" for row in [header, *rows]]
    return [lines[0], "|" + "|".join("---" if a == "l" else "--:" for a in align) + "|", *lines[1:]]


def short_value(value: Any) -> str:
    """A setting's value in a label or table cell (specifications by their label)."""
    return specs.label(value) if isinstance(value, Mapping) else f"{value:g}" if isinstance(value, float) else \
        "–" if value is None else str(value)


def slug(text: str) -> str:
    """``text`` with every character but letters, digits, ``-`` and ``_`` replaced by ``_``."""
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in str(text))


def title(experiment: Experiment, what: str) -> str:
    """``"<name> on <data>: <what>"``."""
    return f"{experiment.name} on {data_text(experiment.data)}: {what}"


def wrap(label: str, width: int = 38, max_lines: int = 5) -> str:
    """A legend label in lines of at most ``width`` characters, broken at spaces (a word longer
    than two lines after its ``+`` and ``,``); at most ``max_lines``, the last ending " …" when cut."""
    words = []
    for word in label.split(" "):
        chunk = ""
        for part in re.split(r"(?<=[+,])", word) if len(word) > 2 * width else [word]:
            if chunk and len(chunk) + len(part) > width:
                words.append(chunk)
                chunk = ""
            chunk += part
        words.append(chunk)
    lines = textwrap.wrap(" ".join(words), width, break_long_words=False, break_on_hyphens=False) or [label]
    if len(lines) > max_lines:
        lines = [*lines[:max_lines - 1], lines[max_lines - 1] + " …"]
    return "\n".join(lines)


def other_columns(cells: Sequence[CellResult]) -> list[str]:
    """Setting keys besides retriever, k, closure and dataset whose values differ between cells:
    the generator by ``generator`` (type and model) and a ``generator.<parameter>`` per other one."""
    keys = sorted({k for c in cells for k in c.settings} - {"retriever", "k", "closure", "dataset"})
    out = varied_keys([c.settings for c in cells], keys)
    if "generator" in out and len({generator_label(c.settings.get("generator")) for c in cells}) == 1:
        out.remove("generator")
    return [k for k in out if k not in ("generator.type", "generator.model")]


def setting_parts(cell: CellResult, keys: Sequence[str]) -> list[str]:
    """``key=value`` for each of ``keys`` the cell sets."""
    values = [(k, get_dotted(cell.settings, k)) for k in keys]
    return [f"{k}={short_value(v)}" for k, v in values if v is not None]


def configuration_key(cell: CellResult) -> tuple[str, str]:
    """The retriever's label and every other setting but ``k``, ``closure`` and the dataset."""
    rest = {k: v for k, v in cell.settings.items() if k not in ("k", "closure", "retriever", "dataset")}
    return cell.retriever, canonical_json(rest)


def ranking_key(cell: CellResult) -> str:
    """:func:`primsel.retrieval.store.retrieval_key` of the cell's :data:`RANKING_KEYS` (a figure series per key)."""
    return retrieval_key(None, *(cell.settings.get(key) for key in RANKING_KEYS))


def _labels(cells: Sequence[CellResult], keys: Sequence[str], key: Callable[[CellResult], Any]) -> dict[Any, str]:
    firsts: dict[Any, CellResult] = {}
    for c in cells:
        firsts.setdefault(key(c), c)
    return {k: " ".join([c.retriever, *setting_parts(c, keys)]) for k, c in firsts.items()}


def ranking_labels(cells: Sequence[CellResult]) -> dict[str, str]:
    """Ranking key -> the retriever, then ``key=value`` per set setting that changes the ranking
    and varies between ``cells``."""
    return _labels(cells, [k for k in other_columns(cells) if k.split(".", 1)[0] in RANKING_KEYS], ranking_key)


def configuration_labels(cells: Sequence[CellResult]) -> dict[tuple[str, str], str]:
    """Configuration key -> the retriever, then ``key=value`` per set setting that varies."""
    return _labels(cells, other_columns(cells), configuration_key)


def short_labels(cells: Sequence[Any]) -> dict[str, str]:
    """Cell id -> the settings that vary between the cells (``generator.feedback=trace``), or the
    cell's label when none does."""
    settings = [dict(c.settings) for c in cells]
    keys = sorted({k for s in settings for k in s} - {"dataset"})
    varied = [k for k in varied_keys(settings, keys) if k != "generator"]
    return {c.id: " ".join(f"{k}={short_value(get_dotted(c.settings, k))}" for k in varied) or c.label for c in cells}


def _kind(cell: CellResult) -> str:
    return specs.type_name(cell.settings.get("retriever"))


def is_reference(cell: CellResult) -> bool:
    """True for a cell of a reference ranking (the oracle, random, the whole library)."""
    return _kind(cell) in REFERENCE_STYLE


def ranks_nothing(cell: CellResult) -> bool:
    """True for the whole library (type ``all``): its order says nothing, so its ranking metrics
    are neither shown nor drawn."""
    return _kind(cell) == "all"


def is_default(cell: CellResult) -> bool:
    """True for a cell of the recommended default retriever (any k, closure or selector)."""
    return cell.retriever == specs.label(DEFAULT_RETRIEVER)


class Palette:
    """One colour per ranking of ``cells`` (an experiment's, in grid order), the same in every figure and in the
    explorer: colorcet's Glasbey colours in that order, without greys and very dark or light ones (HLS saturation
    under 0.25, lightness outside 0.3 to 0.8); the default black, the references grey."""

    def __init__(self, cells: Sequence[CellResult]) -> None:
        hls = [(rgb, colorsys.rgb_to_hls(*rgb)) for rgb in colorcet.glasbey_category10]
        free = iter([to_hex(rgb) for rgb, (_, light, sat) in hls if sat >= 0.25 and 0.3 <= light <= 0.8])
        self._colours: dict[str, str] = {}
        for cell in cells:
            key = ranking_key(cell)
            if key not in self._colours:
                self._colours[key] = DEFAULT_COLOUR if is_default(cell) else \
                    REFERENCE_STYLE[_kind(cell)][0] if is_reference(cell) else next(free)

    def colour(self, cell: CellResult) -> str:
        """The ``#rrggbb`` colour of the cell's ranking; KeyError for a cell the palette lacks."""
        return self._colours[ranking_key(cell)]

    @staticmethod
    def line(cell: CellResult) -> dict[str, Any]:
        """Matplotlib line properties besides the colour (thick default, dashed grey references)."""
        if is_default(cell):
            return {"linewidth": 2.6, "zorder": 5}
        if is_reference(cell):
            return {"linestyle": REFERENCE_STYLE[_kind(cell)][1], "linewidth": 1.3, "zorder": 1}
        return {"linewidth": 1.4, "zorder": 3}
