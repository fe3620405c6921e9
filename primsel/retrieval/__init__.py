"""Retrievers, the selector, cross-validation and TREC run files.

Importing this package imports every module of it, in name order, so every class a module
registers with ``@register("name")`` is registered: a new module in this folder needs no edit
here. The names are listed by ``primsel.available()`` and in the user guide ("Retrievers",
"Registered names"). No module imports torch, faiss, sentence-transformers or openai until a
retriever that needs them is fitted or asks its first question.
"""

import importlib
import pkgutil

from primsel.checks import check_k
from primsel.retrieval.base import BaseRetriever, code_tokens
from primsel.retrieval.cv import cross_validated_run, fold_assignment
from primsel.retrieval.selector import estimate_tokens, select, select_run
from primsel.retrieval.trec import format_run, read_run, write_run
from primsel.types import top_k


def _import_every_module() -> None:
    """Import every module of this package, in name order: registering happens on import."""
    for name in sorted(info.name for info in pkgutil.iter_modules(__path__)):
        importlib.import_module(f"primsel.retrieval.{name}")


_import_every_module()

#: The configuration ``primsel retrieve`` uses without ``--retriever`` (no LLM): a per-primitive
#: logistic regression on the query (TF-IDF + MiniLM embedding) and MiniLM fine-tuned on the
#: training queries and their gold primitives' documentation, both learned from the training
#: folds, fused (weighted sum of min-max normalised scores) with BM25 and dense retrieval over
#: the primitives' documentation, which rank the primitives the training folds say little about.
DEFAULT_RETRIEVER = {
    "type": "hybrid",
    "method": "wsum",
    "members": ["classifier", "finetuned", "bm25", "dense"],
    "weights": [1.0, 1.0, 0.15, 0.15],
}

__all__ = [
    "DEFAULT_RETRIEVER",
    "BaseRetriever",
    "check_k",
    "code_tokens",
    "cross_validated_run",
    "estimate_tokens",
    "fold_assignment",
    "format_run",
    "read_run",
    "select",
    "select_run",
    "top_k",
    "write_run",
]
