"""How the report names, formats and colours.

Names: a *configuration* is the cells that share every setting but ``k``, ``closure`` and the
dataset; a *ranking* is named by :data:`RANKING_KEYS` (cells of one ranking differ only in how they
cut it). Formats: one number formatter (:func:`num`), one p-value formatter, one Markdown table
writer (:func:`table`), one plain text table writer (:func:`text_table`) and one CSV writer
(:func:`csv_text`). Colours: a ranking keeps one colour (:class:`Palette`), black for the
recommended default, grey for the references.
"""

from __future__ import annotations

import colorsys
import csv
import io
import math
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import colorcet
from matplotlib.colors import to_hex

from primsel import spec as specs
from primsel.experiments.labels import generator_label, get_dotted, varied_keys
from primsel.experiments.results import LoadedCell, LoadedExperiment, data_text
from primsel.files import canonical_json
from primsel.retrieval import (
    DEFAULT_RETRIEVER,
)  # a table, no retriever: primsel.retrieval loads none
from primsel.retrieval.store import retrieval_key

#: Colour of the recommended default; colour and line style of each reference ranking type.
DEFAULT_COLOUR = "#000000"
REFERENCE_STYLE = {
    "oracle": ("#8c8c8c", "--"),
    "random": ("#8c8c8c", ":"),
    "all": ("#8c8c8c", "-."),
}
#: The settings that name a ranking (with the data); the others cut it or use its selection.
RANKING_KEYS = ("retriever", "folds", "seed", "depth")


def num(value: Any, digits: int = 3, signed: bool = False) -> str:
    """A value as the tables show it: a number with ``digits`` decimals (``signed``: with its sign,
    ``+0.012``), ``–`` for None or NaN, a bool or anything else as ``str``."""
    if value is None:
        return "–"
    if isinstance(value, float) and math.isnan(value):
        return "–"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if signed:
        return f"{value:+.{digits}f}"
    return f"{value:.{digits}f}"


def p_value(value: float | None) -> str:
    """A p-value in a table: three decimals, ``<0.001`` below that, ``–`` for None."""
    if value is None:
        return "–"
    if value < 0.001:
        return "<0.001"
    return f"{value:.3f}"


def or_default(value: float | None, default: float) -> float:
    """``float(value)``, or ``default`` when it is None."""
    if value is None:
        return default
    return float(value)


def table_cell(text: str) -> str:
    """``text`` as a cell of a Markdown table: ``|`` escaped, a line break as a space (either would
    end the cell or the row)."""
    return " ".join(str(text).splitlines()).replace("|", "\\|")


def table(
    header: Sequence[str], rows: Sequence[Sequence[str]], align: str | None = None
) -> list[str]:
    """The Markdown lines of a table, every cell through :func:`table_cell`.

    Parameters
    ----------
    header : the column headers.
    rows : the rows, a text per column.
    align : ``l`` (left) or ``r`` (right) per column; default: the first left, the others right.
    """
    if align is None:
        align = "l" + "r" * (len(header) - 1)
    rule = "|" + "|".join("---" if a == "l" else "--:" for a in align) + "|"
    lines = ["| " + " | ".join(table_cell(text) for text in row) + " |" for row in (header, *rows)]
    return [lines[0], rule, *lines[1:]]


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> list[str]:
    """A plain text table: columns separated by two spaces, padded to their widest text, the first
    ``left`` columns aligned left and the others right, trailing spaces cut."""
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = []
    for row in (header, *rows):
        cells = [
            text.ljust(width) if i < left else text.rjust(width)
            for i, (text, width) in enumerate(zip(row, widths))
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


def csv_text(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """CSV text with a header line (lines end in ``\\n``)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def short_value(value: Any) -> str:
    """A setting's value in a label or table cell: a specification by its label, a float by ``%g``,
    None as ``–``."""
    if isinstance(value, Mapping):
        return specs.label(value)
    if isinstance(value, float):
        return f"{value:g}"
    if value is None:
        return "–"
    return str(value)


def slug(text: str) -> str:
    """``text`` with every character but letters, digits, ``-`` and ``_`` replaced by ``_``."""
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in str(text))


def title(experiment: LoadedExperiment, what: str) -> str:
    """``"<name> on <data>: <what>"``."""
    return f"{experiment.name} on {data_text(experiment.data)}: {what}"


def figure_text(text: str) -> str:
    """``text`` as matplotlib shows it as written: every ``$`` escaped (two would start mathematical
    text, and a mistake in it raises when the figure is saved), and a leading ``_`` kept (matplotlib
    leaves a legend label starting with ``_`` out) behind a zero-width space."""
    text = str(text).replace("$", "\\$")
    if text.startswith("_"):
        return "\u200b" + text
    return text


def wrap(label: str, width: int = 38, max_lines: int = 5) -> str:
    """A legend label in lines of at most ``width`` characters, broken at spaces (a word longer than
    two lines after its ``+`` and ``,``); at most ``max_lines``, the last ending " …" when cut."""
    words = []
    for word in label.split(" "):
        chunk = ""
        for part in re.split(r"(?<=[+,])", word) if len(word) > 2 * width else [word]:
            if chunk and len(chunk) + len(part) > width:
                words.append(chunk)
                chunk = ""
            chunk += part
        words.append(chunk)
    lines = textwrap.wrap(
        " ".join(words), width, break_long_words=False, break_on_hyphens=False
    ) or [label]
    if len(lines) > max_lines:
        lines = [*lines[: max_lines - 1], lines[max_lines - 1] + " …"]
    return "\n".join(lines)


def other_columns(cells: Sequence[LoadedCell]) -> list[str]:
    """Setting keys besides retriever, k, closure and dataset whose values differ between cells: the
    generator by ``generator`` (type and model) and a ``generator.<parameter>`` per other one."""
    keys = sorted({k for c in cells for k in c.settings} - {"retriever", "k", "closure", "dataset"})
    out = varied_keys([c.settings for c in cells], keys)
    if (
        "generator" in out
        and len({generator_label(c.settings.get("generator")) for c in cells}) == 1
    ):
        out.remove("generator")
    return [k for k in out if k not in ("generator.type", "generator.model")]


def setting_parts(cell: LoadedCell, keys: Sequence[str]) -> list[str]:
    """``key=value`` for each of ``keys`` the cell sets."""
    values = [(k, get_dotted(cell.settings, k)) for k in keys]
    return [f"{k}={short_value(v)}" for k, v in values if v is not None]


def configuration_key(cell: LoadedCell) -> tuple[str, str]:
    """The retriever's label and every other setting but ``k``, ``closure`` and the dataset."""
    rest = {
        k: v for k, v in cell.settings.items() if k not in ("k", "closure", "retriever", "dataset")
    }
    return cell.retriever, canonical_json(rest)


def ranking_key(cell: LoadedCell) -> str:
    """:func:`primsel.retrieval.store.retrieval_key` of the cell's :data:`RANKING_KEYS` (a figure
    series per key)."""
    return retrieval_key(None, *(cell.settings.get(key) for key in RANKING_KEYS))


def _labels(
    cells: Sequence[LoadedCell], keys: Sequence[str], key: Callable[[LoadedCell], Any]
) -> dict[Any, str]:
    """``key(cell)`` -> the retriever of its first cell, then ``key=value`` for each of ``keys`` it
    sets."""
    firsts: dict[Any, LoadedCell] = {}
    for c in cells:
        firsts.setdefault(key(c), c)
    return {k: " ".join([c.retriever, *setting_parts(c, keys)]) for k, c in firsts.items()}


def ranking_labels(cells: Sequence[LoadedCell]) -> dict[str, str]:
    """Ranking key -> the retriever, then ``key=value`` per set setting that changes the ranking
    and varies between ``cells``."""
    return _labels(
        cells, [k for k in other_columns(cells) if k.split(".", 1)[0] in RANKING_KEYS], ranking_key
    )


def configuration_labels(cells: Sequence[LoadedCell]) -> dict[tuple[str, str], str]:
    """Configuration key -> the retriever, then ``key=value`` per set setting that varies."""
    return _labels(cells, other_columns(cells), configuration_key)


def short_labels(cells: Sequence[Any]) -> dict[str, str]:
    """Cell id -> the settings that vary between the cells (``generator.feedback=trace``), or the
    cell's label when none does."""
    settings = [dict(c.settings) for c in cells]
    keys = sorted({k for s in settings for k in s} - {"dataset"})
    varied = [k for k in varied_keys(settings, keys) if k != "generator"]
    return {
        c.id: " ".join(f"{k}={short_value(get_dotted(c.settings, k))}" for k in varied) or c.label
        for c in cells
    }


def _kind(cell: LoadedCell) -> str:
    """The type of the cell's retriever (``bm25``, ``hybrid``, ``oracle``)."""
    return specs.type_name(cell.settings.get("retriever"))


def is_reference(cell: LoadedCell) -> bool:
    """True for a cell of a reference ranking (the oracle, random, the whole library)."""
    return _kind(cell) in REFERENCE_STYLE


def ranks_nothing(cell: LoadedCell) -> bool:
    """True for the whole library (type ``all``): its order says nothing, so its ranking metrics
    are neither shown nor drawn."""
    return _kind(cell) == "all"


def is_default(cell: LoadedCell) -> bool:
    """True for a cell of the recommended default retriever (any k, closure or selector, under
    any label)."""
    retriever = specs.without_labels(cell.settings.get("retriever"))
    return specs.label(retriever) == specs.label(DEFAULT_RETRIEVER)


class Palette:
    """One colour per ranking of ``cells`` (an experiment's, in grid order), the same in every
    figure and in the explorer: colorcet's Glasbey colours in that order, without greys and very
    dark or light ones (HLS saturation under 0.25, lightness outside 0.3 to 0.8); the default black,
    the references grey."""

    def __init__(self, cells: Sequence[LoadedCell]) -> None:
        """Give each ranking of ``cells`` its colour, in the order the cells come."""
        hls = [(rgb, colorsys.rgb_to_hls(*rgb)) for rgb in colorcet.glasbey_category10]
        free = iter(
            [to_hex(rgb) for rgb, (_, light, sat) in hls if sat >= 0.25 and 0.3 <= light <= 0.8]
        )
        self._colours: dict[str, str] = {}
        for cell in cells:
            key = ranking_key(cell)
            if key in self._colours:
                continue
            if is_default(cell):
                self._colours[key] = DEFAULT_COLOUR
            elif is_reference(cell):
                self._colours[key] = REFERENCE_STYLE[_kind(cell)][0]
            else:
                self._colours[key] = next(free)

    def colour(self, cell: LoadedCell) -> str:
        """The ``#rrggbb`` colour of the cell's ranking; KeyError for a cell the palette lacks."""
        return self._colours[ranking_key(cell)]

    @staticmethod
    def line(cell: LoadedCell) -> dict[str, Any]:
        """Matplotlib line properties besides the colour (thick default, dashed grey references)."""
        if is_default(cell):
            return {"linewidth": 2.6, "zorder": 5}
        if is_reference(cell):
            return {"linestyle": REFERENCE_STYLE[_kind(cell)][1], "linewidth": 1.3, "zorder": 1}
        return {"linewidth": 1.4, "zorder": 3}
