"""How the report names, formats and colours what it shows.

A *configuration* is what a reader compares: the cells that share every setting except the
cut-off ``k``, type ``closure`` and the dataset (:func:`configuration_key`). Each configuration
keeps one colour in every figure of a report and in the explorer (:class:`Palette`): the colour
belongs to its ranking (the configuration without its ``selector``), so a selector's points take
the colour of the ranking they cut. The recommended default
(:data:`primsel.retrieval.DEFAULT_RETRIEVER`) is drawn in black with a thicker line; the
reference rankings (:data:`REFERENCE_TYPES`: the oracle, a random ranking, the whole library)
are drawn in grey as reference lines, not as competitors.
"""

from __future__ import annotations

import colorsys
import math
import re
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import colorcet
from matplotlib.colors import to_hex

from primsel import spec as specs
from primsel.experiments.labels import generator_label, get_dotted, varied_keys
from primsel.experiments.records import retrieval_key
from primsel.experiments.results import CellResult, Experiment, data_text
from primsel.files import canonical_json
from primsel.retrieval import DEFAULT_RETRIEVER

__all__ = ["DEFAULT_COLOUR", "REFERENCE_TYPES", "Palette", "configuration_key", "configuration_labels",
           "is_default", "is_reference", "num", "other_columns", "p_value", "ranking_colours", "ranking_key",
           "ranking_labels", "ranks_nothing", "short_value", "slug", "title", "wrap"]

#: Retriever types that bound the others rather than compete with them: the oracle (perfect
#: ranking), a random ranking (chance) and the whole library (everything selected).
REFERENCE_TYPES = ("oracle", "random", "all")
#: Colour of the recommended default configuration.
DEFAULT_COLOUR = "#000000"
#: Colours and line styles of the reference rankings, by type.
REFERENCE_STYLE = {"oracle": ("#8c8c8c", "--"), "random": ("#8c8c8c", ":"), "all": ("#8c8c8c", "-.")}
#: The settings that name a ranking (with the data: :func:`primsel.experiments.records.retrieval_key`);
#: the others say how it is cut into a selection, what is done with the selection and what is measured.
RANKING_KEYS = ("retriever", "folds", "seed", "depth")


def num(value: Any, digits: int = 3) -> str:
    """A table value: ``digits`` decimals for a number, ``–`` for None or NaN, else ``str``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.{digits}f}"
    return str(value)


def p_value(value: float | None) -> str:
    """A p-value in a table: three decimals, ``<0.001`` below that, ``–`` for None."""
    if value is None:
        return "–"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def short_value(value: Any) -> str:
    """A setting's value in a label or table cell (specifications by their label)."""
    if isinstance(value, Mapping):
        return specs.label(value)
    if isinstance(value, float):
        return f"{value:g}"
    return "–" if value is None else str(value)


def slug(text: str) -> str:
    """``text`` with every character but letters, digits, ``-`` and ``_`` replaced by ``_``."""
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in str(text))


def title(experiment: Experiment, what: str) -> str:
    """``"<name> on <data> (<n> tasks): <what>"``."""
    return f"{experiment.name} on {data_text(experiment.data)}: {what}"


def wrap(label: str, width: int = 38, max_lines: int = 5) -> str:
    """A legend label broken into lines of at most ``width`` characters at spaces; a word longer
    than two lines (a grid of values) is broken after its ``+`` and ``,``. At most ``max_lines``
    lines, the last ending in " …" when the label is longer (the tables hold it whole)."""
    words = []
    for word in label.split(" "):
        if len(word) <= 2 * width:
            words.append(word)
            continue
        chunk = ""
        for part in re.split(r"(?<=[+,])", word):
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
    """Setting keys (besides retriever, k, closure, dataset) whose values differ between cells.

    The generator is shown by ``generator`` (type and model) when those differ, and by a
    ``generator.<parameter>`` column for each other parameter that differs (``generator.seed``).
    """
    keys = sorted({k for c in cells for k in c.settings} - {"retriever", "k", "closure", "dataset"})
    out = varied_keys([c.settings for c in cells], keys)
    if "generator" in out and len({generator_label(c.settings.get("generator")) for c in cells}) == 1:
        out.remove("generator")
    return [k for k in out if k not in ("generator.type", "generator.model")]


def configuration_key(cell: CellResult) -> tuple[str, str]:
    """What a configuration is: the retriever's label and every other setting except ``k``,
    ``closure`` and the dataset (cells that differ only in those share a ranking)."""
    rest = {k: v for k, v in cell.settings.items() if k not in ("k", "closure", "retriever", "dataset")}
    return cell.retriever, canonical_json(rest)


def ranking_key(cell: CellResult) -> str:
    """What a ranking is: :func:`primsel.experiments.records.retrieval_key` of the cell's
    :data:`RANKING_KEYS` (the store, the Ray backend and the cell record name a retrieval by the
    same function; a figure shows the cells of one dataset); the figures of rankings draw one
    series per ranking key."""
    s = cell.settings
    return retrieval_key(None, s.get("retriever"), s.get("folds"), s.get("seed"), s.get("depth"))


def ranking_labels(cells: Sequence[CellResult]) -> dict[str, str]:
    """Ranking key -> label: the retriever, then ``key=value`` for each setting that changes the
    ranking, varies between ``cells`` and is set."""
    extra = [k for k in other_columns(cells) if k.split(".", 1)[0] in RANKING_KEYS]
    out: dict[tuple[str, str], str] = {}
    for cell in cells:
        values = [(k, get_dotted(cell.settings, k)) for k in extra]
        out.setdefault(ranking_key(cell), " ".join(
            [cell.retriever, *(f"{k}={short_value(v)}" for k, v in values if v is not None)]))
    return out


def configuration_labels(cells: Sequence[CellResult]) -> dict[tuple[str, str], str]:
    """Configuration key -> label: the retriever, then ``key=value`` for each setting that
    varies between ``cells`` and that the configuration sets (an unset setting is left out)."""
    extra = other_columns(cells)
    out: dict[tuple[str, str], str] = {}
    for cell in cells:
        key = configuration_key(cell)
        if key not in out:
            values = [(k, get_dotted(cell.settings, k)) for k in extra]
            out[key] = " ".join([cell.retriever, *(f"{k}={short_value(v)}" for k, v in values if v is not None)])
    return out


def is_reference(cell: CellResult) -> bool:
    """True for a cell of a reference ranking (:data:`REFERENCE_TYPES`)."""
    return specs.type_name(cell.settings.get("retriever")) in REFERENCE_TYPES


def ranks_nothing(cell: CellResult) -> bool:
    """True for the whole library (type ``all``): it selects every primitive, so its order (by
    primitive id) says nothing and its ranking metrics are not shown or drawn."""
    return specs.type_name(cell.settings.get("retriever")) == "all"


def is_default(cell: CellResult) -> bool:
    """True for a cell of the recommended default retriever (any k, closure or selector)."""
    return cell.retriever == specs.label(DEFAULT_RETRIEVER)


def ranking_colours() -> list[str]:
    """The colours rankings take, in order: colorcet's Glasbey palette without its greys and
    its very dark or very light colours (HLS saturation under 0.25, lightness outside 0.3 to
    0.8), which the references (grey) and the default (black) would be confused with or which
    vanish on white."""
    out = []
    for rgb in colorcet.glasbey_category10:
        _, lightness, saturation = colorsys.rgb_to_hls(*rgb)
        if saturation >= 0.25 and 0.3 <= lightness <= 0.8:
            out.append(to_hex(rgb))
    return out


class Palette:
    """One colour per ranking of an experiment, the same in every figure and in the explorer.

    Parameters
    ----------
    cells : the experiment's cells, in grid order; rankings take the colours of colorcet's
        Glasbey palette (matplotlib's tab10 extended with colours chosen to differ most from
        those before; Glasbey et al., Journal of Applied Statistics 2007; see
        :func:`ranking_colours`) in that order, the default and the references excepted.
    """

    def __init__(self, cells: Sequence[CellResult]) -> None:
        self._colours: dict[tuple[str, str], str] = {}
        free = iter(ranking_colours())
        for cell in cells:
            key = ranking_key(cell)
            if key in self._colours:
                continue
            if is_default(cell):
                self._colours[key] = DEFAULT_COLOUR
            elif is_reference(cell):
                self._colours[key] = REFERENCE_STYLE[specs.type_name(cell.settings.get("retriever"))][0]
            else:
                self._colours[key] = next(free)

    def colour(self, cell: CellResult) -> str:
        """The ``#rrggbb`` colour of the cell's ranking.

        Raises
        ------
        KeyError : the cell was not among those the palette was made from.
        """
        return self._colours[ranking_key(cell)]

    @staticmethod
    def line(cell: CellResult) -> dict[str, Any]:
        """Matplotlib line properties besides the colour: thicker for the default, a grey
        dashed or dotted style for a reference."""
        if is_default(cell):
            return {"linewidth": 2.6, "zorder": 5}
        kind = specs.type_name(cell.settings.get("retriever"))
        if kind in REFERENCE_STYLE:
            return {"linestyle": REFERENCE_STYLE[kind][1], "linewidth": 1.3, "zorder": 1}
        return {"linewidth": 1.4, "zorder": 3}
