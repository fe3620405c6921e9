"""Names of cells and of their settings, as the runner and the report show them, read from settings
as JSON data (:meth:`CellSettings.to_json` or ``config.json``) by top-level or dotted keys (``"k"``,
``"generator.seed"``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from primsel import spec as specs
from primsel.experiments.reflection import REFLECTION_KEYS
from primsel.files import canonical_json


def get_dotted(settings: Mapping[str, Any], key: str) -> Any:
    """A setting by top-level or dotted key, None when absent; ``"reflection.rounds"`` is read as
    ``"generator.rounds"``, ``"reflection"`` is the table of the reflection keys set."""
    top, _, rest = key.partition(".")
    if top == "reflection":
        generator = settings.get("generator")
        table = (
            {k: generator[k] for k in REFLECTION_KEYS if k in generator}
            if isinstance(generator, Mapping)
            else {}
        )
        return get_dotted(table, rest) if rest else (table or None)
    value: Any = settings
    for part in key.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def folder_name(cell_id: str, label: str, settings: Mapping[str, Any]) -> str:
    """The directory name of a cell: ``<label-slug>-<id>`` (:func:`primsel.spec.slug` of its
    ``label``) when a component of its ``settings`` has a ``label``, else the bare id (as every
    cell folder was named before labels)."""
    if not specs.labelled(settings):
        return cell_id
    text = specs.slug(label)
    return f"{text}-{cell_id}" if text else cell_id


def generator_label(gen: Mapping[str, Any] | str | None) -> str:
    """The generator's ``label`` when its table gives one, else ``type`` and, when given,
    ``model`` (``openai:gpt-4o``); "" if None."""
    if not gen:
        return ""
    gen = dict(gen) if isinstance(gen, Mapping) else {"type": gen}
    if isinstance(gen.get("label"), str) and gen["label"]:
        return gen["label"]
    return f"{gen.get('type')}:{gen['model']}" if gen.get("model") else str(gen.get("type"))


def cell_label(settings: Mapping[str, Any], varied: Sequence[str] = ()) -> str:
    """Readable label of a cell: retriever, ``k=..``, ``+closure`` when on, the generator, then
    ``key=value`` for every other key in ``varied`` that the cell sets."""
    shown = [
        "+closure" if settings.get("closure") else "",
        generator_label(settings.get("generator")),
    ]
    parts = [
        specs.label(settings["retriever"]),
        f"k={settings['k']}",
        *(part for part in shown if part),
    ]
    for key in varied:
        if key.split(".", 1)[0] in ("retriever", "k", "closure", "dataset") or key in (
            "generator",
            "generator.type",
            "generator.model",
        ):
            continue  # shown above
        value = get_dotted(settings, key)
        if value is not None:
            parts.append(f"{key}={specs.short(value)}")
    return " ".join(parts)


def varied_keys(settings: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> list[str]:
    """The keys among ``keys`` whose values differ between ``settings``; a varying ``generator``
    is followed by ``generator.<parameter>`` for each of its parameters that differs."""

    def differs(key: str) -> bool:
        """True when the cells' values of ``key`` are not all the same."""
        return len({canonical_json(get_dotted(s, key)) for s in settings}) > 1

    out: list[str] = []
    for key in keys:
        if differs(key):
            out.append(key)
            if key == "generator":
                params = sorted(
                    {p for s in settings if isinstance(s.get(key), Mapping) for p in s[key]}
                )
                out += [
                    f"{key}.{p}"
                    for p in params
                    if f"{key}.{p}" not in keys and differs(f"{key}.{p}")
                ]
    return out


def baseline_label(wanted: str | None, cells: Sequence[tuple[str, Any]]) -> str:
    """The retriever label of an experiment's baseline ``wanted`` (a retriever label, a cell id, or
    a retriever type that exactly one retriever label has; None: the first cell's retriever) among
    ``cells``, the (cell id, retriever specification) of every cell in grid order (non-empty).

    Raises
    ------
    ValueError : ``wanted`` matches nothing, or names a type several retrievers have.
    """
    labels = list(dict.fromkeys(specs.label(spec) for _, spec in cells))
    if wanted is None:
        return labels[0]
    if wanted in labels:
        return wanted
    by_id = {cid: specs.label(spec) for cid, spec in cells}
    if wanted in by_id:
        return by_id[wanted]
    typed = list(
        dict.fromkeys(specs.label(spec) for _, spec in cells if specs.type_name(spec) == wanted)
    )
    if len(typed) == 1:
        return typed[0]
    if typed:
        raise ValueError(
            f"baseline {wanted!r} names several retrievers ({'; '.join(typed)}); "
            "give the label of one of them"
        )
    raise ValueError(
        f"baseline {wanted!r} is neither a retriever label, a retriever type nor a cell id; "
        f"labels: {'; '.join(sorted(labels))}"
    )


def pair_key(settings: Mapping[str, Any], pair_on: Sequence[str] | None) -> str:
    """What a cell and its baseline cell must share: every setting except the retriever (``pair_on``
    None), else the dataset and the ``pair_on`` settings (missing ones as null)."""
    if pair_on is None:
        return canonical_json({k: v for k, v in settings.items() if k != "retriever"})
    return canonical_json(
        {"dataset": settings.get("dataset"), **{k: get_dotted(settings, k) for k in pair_on}}
    )
