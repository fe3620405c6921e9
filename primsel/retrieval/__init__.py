"""Retrievers, the selector, cross-validation and TREC run files.

Importing this package registers the built-in retrievers: lexical ``bm25`` and ``tfidf``,
``dense``, the fusion ``hybrid``, the learned ``prior``, ``knn``, ``expansion``, ``classifier``,
the fine-tuned bi-encoder ``finetuned`` and cross-encoder ``rerank``, the set completion
``cooccurrence``, the nested cross-validation wrapper ``tuned``, and the bounds ``oracle``,
``all`` and ``random``; and the selectors ``topk`` and ``calibrated``. No module imports torch,
faiss or sentence-transformers until a retriever that needs them is fitted.
"""

from primsel.retrieval import (  # noqa: F401  (registration)
    baselines, bm25, completion, dense, finetune, hybrid, learned, priors, rerank, tfidf, tuned,
)
from primsel.retrieval import llm_selector  # noqa: F401  (registration; openai is imported on first request)
from primsel.checks import check_k
from primsel.retrieval.base import BaseRetriever, code_tokens
from primsel.retrieval.cv import cross_validated_run, fold_assignment
from primsel.retrieval.selector import estimate_tokens, select, select_run
from primsel.retrieval.trec import format_run, read_run, write_run
from primsel.types import top_k

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
