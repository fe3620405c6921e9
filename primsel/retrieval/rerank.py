"""A cross-encoder that re-ranks the first primitives of any retriever, trained on the training folds.

The cross-encoder reads the query and one primitive's documentation together and outputs how
likely the primitive is needed (monoBERT re-ranking: Nogueira & Cho, "Passage Re-ranking with
BERT", 2019). It is initialised from the same offline MiniLM weights as the dense retrievers
(a new one-output head on top) and trained per cross-validation fold with binary
cross-entropy on (query, document) pairs of the training tasks: every gold primitive of a query
is a positive, and the first-stage retriever's best-ranked non-gold primitives for that query
are its hard negatives.

Trained weights are cached on disk (``rerank/<key>/`` below :func:`primsel.files.cache_dir`),
keyed by the base model's content, the training settings, the first stage's specification,
the library's documents and the training tasks (the fold), together with the scores of every
(query, candidates) already re-ranked.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from primsel.checks import check_choice, check_flag, check_number, check_text
from primsel.files import cache_dir, digest, encodable_text
from primsel.registry import build, error_context, register
from primsel.retrieval.base import BaseRetriever, fit_nested, pass_gold
from primsel.retrieval.encoders import DEFAULT_MODEL, quiet_transformers, model_location
from primsel.retrieval.finetune import (VectorStore, freeze_lower_layers, load_trainable, model_content_digest,
                                        save_trainable, training_fingerprint)
from primsel.retrieval.hybrid import min_max
from primsel.types import TEXT_VIEWS, Task, ranking

logger = logging.getLogger(__name__)


@register("rerank")
class RerankRetriever(BaseRetriever):
    """Re-ranks the ``top_n`` primitives of a first-stage retriever with a cross-encoder trained
    on the training folds (see the module docstring).

    The ``top_n`` candidates score ``1 + weight * p + (1 - weight) * s`` (p: the cross-encoder's
    probability, s: the first stage's min-max normalised score), so they stay above the other
    primitives, which keep ``s``. Without training tasks the cross-encoder is untrained: the
    first stage's ranking is returned.

    Parameters
    ----------
    first_stage : retriever specification whose ranking is re-ranked (fitted on the same
        training tasks).
    top_n : candidates re-ranked per query, >= 1.
    model : base model (default: all-MiniLM-L6-v2 of the offline package).
    view : documentation text per primitive.
    negatives : hard negatives per training query (best-ranked non-gold primitives), >= 0.
    epochs : passes over the training pairs, >= 1.
    lr : AdamW learning rate, > 0.
    batch_size : pairs per step, >= 1.
    frozen_layers : lowest transformer layers kept fixed (with the embeddings), >= 0.
    max_seq_length : tokens of query and document together, >= 16 (the document is cut).
    weight : share of the cross-encoder in a candidate's score, in [0, 1].
    seed : seed of the head's initialisation and the batches, >= 0.
    cache : read and write trained weights and scores on disk.

    Raises
    ------
    ValueError : a parameter out of range, or a first stage the registry rejects.
    """

    learns_from_tasks = True

    def __init__(self, first_stage: Any = "classifier", top_n: int = 30, model: str = DEFAULT_MODEL,
                 view: str = "full", negatives: int = 8, epochs: int = 1, lr: float = 5e-5, batch_size: int = 16,
                 frozen_layers: int = 2, max_seq_length: int = 128, weight: float = 1.0, seed: int = 0,
                 cache: bool = True) -> None:
        self.first_stage = dict(first_stage) if isinstance(first_stage, Mapping) else first_stage
        self.top_n = check_number("top_n", top_n, minimum=1, integer=True)
        self.model = check_text("model", model, empty=False)
        self.view = check_choice("view", view, TEXT_VIEWS)
        self.negatives = check_number("negatives", negatives, minimum=0, integer=True)
        self.epochs = check_number("epochs", epochs, minimum=1, integer=True)
        self.lr = check_number("lr", lr, above=0)
        self.batch_size = check_number("batch_size", batch_size, minimum=1, integer=True)
        self.frozen_layers = check_number("frozen_layers", frozen_layers, minimum=0, integer=True)
        self.max_seq_length = check_number("max_seq_length", max_seq_length, minimum=16, integer=True)
        self.weight = check_number("weight", weight, minimum=0, maximum=1)
        self.seed = check_number("seed", seed, minimum=0, integer=True)
        self.cache = check_flag("cache", cache)
        with error_context("first_stage", key=True):
            build(self.first_stage, "retriever")

    def training_settings(self) -> dict[str, Any]:
        """The parameters that change the trained weights."""
        return {k: v for k, v in self.get_params().items() if k not in ("cache", "top_n", "weight")}

    @property
    def folder(self) -> Path:
        """Cache directory of the fitted cross-encoder (set by :meth:`fit`)."""
        return cache_dir() / "rerank" / self._weights_key[:32]

    def set_gold(self, gold: Mapping[str, Any]) -> None:
        """Pass the gold sets on to a first stage that sees gold (only bounds do)."""
        pass_gold(self._first, gold)

    def fit(self, library: Mapping[str, Any], train_tasks: Sequence[Task] = ()) -> RerankRetriever:
        super().fit(library, train_tasks)
        self._first = fit_nested(self.first_stage, "first_stage", library, train_tasks)
        self._docs = {p: library[p].text(self.view) for p in self.ids}
        self._trained = bool(train_tasks)
        self._net: Any = None
        self.fit_seconds = 0.0
        # the hard negatives are part of what identifies the trained model: a first stage that
        # ranks the training tasks otherwise (its code or its own cache changed) trains another one
        negatives = self._hard_negatives(train_tasks) if self._trained else {}
        self._weights_key = digest({"base": model_content_digest(self.model), "settings": self.training_settings(),
                                    "documents": [self._docs[p] for p in self.ids],
                                    "train": training_fingerprint(train_tasks), "negatives": negatives})
        self._scores = VectorStore(self.folder / "scores")
        if not self._trained or (self.cache and (self.folder / "weights.safetensors").is_file()):
            return self
        start = time.perf_counter()
        self._train(train_tasks, negatives)
        self.fit_seconds = time.perf_counter() - start
        logger.info("rerank: trained on %d tasks in %.1f s", len(train_tasks), self.fit_seconds)
        return self

    def _load_base(self) -> tuple[Any, Any]:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        torch.manual_seed(self.seed)
        location = model_location(self.model)
        with quiet_transformers():
            tokenizer = AutoTokenizer.from_pretrained(location)
            net = AutoModelForSequenceClassification.from_pretrained(location, num_labels=1)
        return tokenizer, net

    def _logits(self, tokenizer: Any, net: Any, pairs: Sequence[tuple[str, str]]) -> Any:
        batch = tokenizer([q for q, _ in pairs], [d for _, d in pairs], truncation="only_second",
                          max_length=self.max_seq_length, padding=True, return_tensors="pt")
        return net(**batch).logits.squeeze(-1)

    def _hard_negatives(self, train_tasks: Sequence[Task]) -> dict[str, list[str]]:
        """Task id -> the first stage's best-ranked non-gold primitives (at most ``negatives``)."""
        run = self._first.search({t.id: t.query for t in train_tasks}, len(self.ids))
        return {t.id: [p for p in ranking(run[t.id]) if p not in t.gold][:self.negatives] for t in train_tasks}

    def _train(self, train_tasks: Sequence[Task], negatives: Mapping[str, Sequence[str]]) -> None:
        import torch

        tokenizer, net = self._load_base()
        freeze_lower_layers(net.base_model, self.frozen_layers, self.model)
        trainable = [(n, p) for n, p in net.named_parameters() if p.requires_grad]
        examples: list[tuple[str, str, float]] = []
        for t in train_tasks:
            gold = [p for p in self.ids if p in t.gold]
            query = encodable_text(t.query)  # a lone surrogate as its escape, as search reads it
            examples += [(query, self._docs[p], 1.0) for p in gold]
            examples += [(query, self._docs[p], 0.0) for p in negatives[t.id]]
        rng = np.random.default_rng(self.seed)
        optimiser = torch.optim.AdamW([p for _, p in trainable], lr=self.lr)
        loss_fn = torch.nn.BCEWithLogitsLoss()
        net.train()
        for _ in range(self.epochs):
            order = rng.permutation(len(examples))
            for s in range(0, len(order), self.batch_size):
                chunk = [examples[i] for i in order[s:s + self.batch_size]]
                logits = self._logits(tokenizer, net, [(q, d) for q, d, _ in chunk])
                loss = loss_fn(logits, torch.tensor([y for _, _, y in chunk], dtype=logits.dtype))
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
        net.eval()
        self._net = (tokenizer, net)
        if self.cache:
            save_trainable(self.folder, trainable, {}, {"base": self.model, "settings": self.training_settings()})

    def _network(self) -> tuple[Any, Any]:
        if self._net is None:
            tokenizer, net = self._load_base()
            load_trainable(net, self.folder)
            net.eval()
            self._net = (tokenizer, net)
        return self._net

    def _probabilities(self, query: str, candidates: Sequence[str]) -> np.ndarray:
        key = json.dumps([query, list(candidates)])
        found = self._scores.get([key]) if self.cache else {}
        if key in found:
            return found[key]
        import torch

        tokenizer, net = self._network()
        with torch.no_grad():
            logits = self._logits(tokenizer, net, [(query, self._docs[p]) for p in candidates])
        probs = torch.sigmoid(logits).numpy().astype(np.float32)
        if self.cache:
            self._scores.put([key], probs[None, :])
        return probs

    def score(self, queries: Mapping[str, str]) -> dict[str, Mapping[str, float]]:
        run = self._first.search(queries, len(self.ids))
        out = {}
        for q, text in queries.items():
            first = min_max(run[q])
            if not self._trained:
                out[q] = first
                continue
            candidates = ranking(run[q])[:self.top_n]
            probs = self._probabilities(text, candidates)
            scores = dict(first)
            for p, prob in zip(candidates, probs):
                scores[p] = 1.0 + self.weight * float(prob) + (1.0 - self.weight) * first.get(p, 0.0)
            out[q] = scores
        return out
