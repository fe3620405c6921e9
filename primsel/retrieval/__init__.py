"""Retrievers, the selector, cross-validation and TREC run files.

Importing this package imports none of its retrievers: :data:`COMPONENT_MODULES` names the
module of every class registered with ``@register("name")`` here, and the registry
(:mod:`primsel.registry`) imports that one module when the name is first built or resolved, so
reading a run folder or writing a report loads no retriever. A new retriever module adds its
names to the table (``tests/retrieval/test_conformance.py`` checks that the table and the
``@register`` decorators of the folder agree). The names are listed by
``primsel.available()`` and in the user guide ("Retrievers", "Registered names"). No module
imports torch, faiss, sentence-transformers or openai until a retriever that needs them is
fitted or asks its first question.
"""

from primsel.checks import check_k
from primsel.retrieval.base import BaseRetriever, code_tokens
from primsel.retrieval.cv import cross_validated_run, fold_assignment
from primsel.retrieval.selector import estimate_tokens, select, select_run
from primsel.retrieval.trec import format_run, read_run, write_run
from primsel.types import top_k

#: Kind -> registered name -> the module of this package that registers it.
COMPONENT_MODULES = {
    "retriever": {
        "all": "baselines", "oracle": "baselines", "random": "baselines",
        "aspera_selector": "aspera_selector", "aspera_local_selector": "aspera_selector",
        "bm25": "bm25",
        "cooccurrence": "completion",
        "dense": "dense",
        "finetuned": "finetune",
        "hybrid": "hybrid",
        "classifier": "learned", "expansion": "learned", "knn": "learned",
        "llm_selector": "llm_selector", "local_selector": "llm_selector",
        "prior": "priors",
        "rerank": "rerank",
        "tfidf": "tfidf",
        "tuned": "tuned",
    },
    "selector": {"calibrated": "selector", "positive": "selector", "topk": "selector"},
}

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
    "COMPONENT_MODULES",
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
