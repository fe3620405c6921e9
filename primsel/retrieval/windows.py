"""What config.json records of how a specification's ``dense`` retrievers embed the library: for each, the
window counts of its documents (:func:`primsel.retrieval.encoders.window_counts`), so a reader can tell
whether any document was longer than the model's window.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from primsel import spec as specs
from primsel.retrieval.encoders import DEFAULT_MODEL, EncoderLoadError, window_counts

_WINDOWS: dict[tuple[str, str], dict[str, int]] = {}  # (model, digest of the texts) -> counts


def embedding_windows(retriever: Any, library: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """How every ``dense`` retriever in a specification (:func:`primsel.spec.walk`) embeds the library:
    :func:`primsel.retrieval.encoders.window_counts` of its document texts.

    Returns
    -------
    ``{key of the dense specification ("" for itself): {"model", "window_tokens", "texts", "longest_tokens",
    "texts_windowed", "texts_cut"}}``; empty without a ``dense``, or when its model or tokenizer cannot load.
    """
    out: dict[str, dict[str, Any]] = {}
    for key, node in specs.walk(retriever):
        if specs.type_name(node) != "dense":
            continue
        params = node if isinstance(node, Mapping) else {}
        model = params.get("model", DEFAULT_MODEL)
        view, prefix = params.get("view", "full"), params.get("doc_prefix", "")
        try:
            texts = [prefix + p.text(view) for p in library.values()]
        except (ValueError, TypeError):  # a view or prefix the retriever itself will refuse
            continue
        memo = (model, hashlib.sha256("\0".join(texts).encode("utf-8", "surrogatepass")).hexdigest())
        if memo not in _WINDOWS:
            try:
                _WINDOWS[memo] = window_counts(model, texts)
            except EncoderLoadError:
                continue
        out[key] = {"model": model, **_WINDOWS[memo]}
    return out
