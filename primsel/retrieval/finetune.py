"""A bi-encoder fine-tuned on the training tasks: (query, gold primitive document) pairs.

The sentence model (all-MiniLM-L6-v2 from the offline package by default) is trained per
cross-validation fold on the training tasks' queries and the documentation of their gold
primitives, as in dense passage retrieval (Karpukhin et al., EMNLP 2020) and tool retrievers
fine-tuned on in-domain requests (ToolBench's API retriever, Qin et al., ICLR 2024). Two losses:

* ``"mnrl"``: sentence-transformers' ``MultipleNegativesRankingLoss`` (Henderson et al. 2017,
  "Efficient Natural Language Response Suggestion for Smart Reply") over batches of
  (query, gold document) pairs, the other documents of the batch being the negatives. A batch
  never holds the same query or document twice; another query's gold document may still be a
  negative that is in fact gold for this query (the usual in-batch false negative).
* ``"library"``: the same softmax cross-entropy, but each query is contrasted with every
  library document that is not gold for it (the library has 65 documents, so all of them fit
  in a batch) and each of its gold documents is a positive: no false negatives.

What is trained is chosen by ``frozen_layers`` (the token embeddings and the lowest transformer
layers stay fixed, which makes a CPU epoch several times cheaper) and ``doc_vectors``:
``"encoder"`` (documents pass through the trained encoder, a symmetric bi-encoder),
``"frozen"`` (documents keep the base model's vectors; only the query side learns) or
``"learned"`` (one vector per primitive, initialised with the base model's vector of its
documentation and trained with the encoder; a primitive no training query needs keeps its
documentation vector, so it is still found by similarity).

Trained weights are cached on disk (``finetuned/<key>/`` below :func:`primsel.files.cache_dir`):
the trained parameters (safetensors), the document vectors and the vectors of every query
already encoded. The key covers the content of the base model's files, the training settings,
the library's documents and the training tasks (ids, queries, gold sets), i.e. the fold. A
warm run reads the query vectors, or loads the base model and the trained parameters, without
training.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from primsel.checks import check_choice, check_flag, check_number, check_text
from primsel.files import cache_dir, digest, encodable_text, write_atomic
from primsel.progress import counted
from primsel.registry import register
from primsel.retrieval.base import BaseRetriever
from primsel.retrieval.encoders import (
    DEFAULT_MODEL,
    EMBEDDING_SCHEME,
    SentenceEncoder,
    l2_normalise,
    model_digest,
    model_files,
    model_location,
    quiet_transformers,
)
from primsel.types import TEXT_VIEWS, Task, task_sort_key

logger = logging.getLogger(__name__)

LOSSES = ("mnrl", "library")
DOC_VECTORS = ("encoder", "frozen", "learned")

# model location -> (size and mtime of its files, digest): the content digest is computed once
# per process and model directory state.
_MODEL_DIGESTS: dict[str, tuple[tuple[Any, ...], str]] = {}


def model_content_digest(model: str) -> str:
    """sha256 (hex) of a sentence model's content (:func:`primsel.retrieval.encoders.model_digest`
    of its directory, :func:`primsel.retrieval.encoders.model_location`).

    Memoised per process by the files' paths, sizes and modification times, so editing the
    weights in place changes the digest.

    Raises
    ------
    EncoderLoadError : the model is neither a directory nor in the local Hugging Face cache, or
        a model file cannot be read.
    """
    location = Path(model_location(model))
    state = tuple((str(p.relative_to(location)), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in model_files(location))
    known = _MODEL_DIGESTS.get(str(location))
    if known is not None and known[0] == state:
        return known[1]
    value = model_digest(location)
    _MODEL_DIGESTS[str(location)] = (state, value)
    return value


def training_fingerprint(train_tasks: Sequence[Task]) -> list[list[Any]]:
    """What a fold's training contributes to a cache key: ``[id, query, sorted gold]`` per task,
    in id order (so the same fold gives the same key whatever order the tasks come in)."""
    rows = [[t.id, t.query, sorted(t.gold)] for t in train_tasks]
    return sorted(rows, key=lambda r: task_sort_key(r[0]))


class VectorStore:
    """One float32 vector per text in a directory, ``<sha256 of text>.npy`` (a cache: a file
    that cannot be written or read is skipped)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def get(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """``{text: vector}`` for the texts found."""
        out = {}
        for text in dict.fromkeys(texts):
            path = self.folder / f"{hashlib.sha256(text.encode()).hexdigest()}.npy"
            if path.is_file():
                try:
                    out[text] = np.load(path)
                except (OSError, ValueError):
                    continue
        return out

    def put(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Store ``vectors[i]`` for ``texts[i]``."""
        for text, vec in zip(texts, vectors):
            buffer = io.BytesIO()
            np.save(buffer, np.asarray(vec, dtype=np.float32))
            try:
                write_atomic(self.folder / f"{hashlib.sha256(text.encode()).hexdigest()}.npy",
                             buffer.getvalue(), durable=False)
            except OSError:
                return


def freeze_lower_layers(transformer: Any, frozen_layers: int, model: str) -> None:
    """Keep the token embeddings and the lowest ``frozen_layers`` layers of a BERT-style
    transformer (``embeddings``, ``encoder.layer``) fixed: their parameters stop requiring
    gradients. 0 freezes nothing.

    Raises
    ------
    ValueError : the model has no such modules, or fewer layers than ``frozen_layers``.
    """
    if not frozen_layers:
        return
    layers = getattr(getattr(transformer, "encoder", None), "layer", None)
    embeddings = getattr(transformer, "embeddings", None)
    if layers is None or embeddings is None:
        raise ValueError(f"frozen_layers: the model {model!r} has no BERT-style embeddings and encoder.layer "
                         "to freeze; use frozen_layers = 0")
    if frozen_layers > len(layers):
        raise ValueError(f"frozen_layers must be <= {len(layers)} (the model's layers), got {frozen_layers}")
    for module in [embeddings, *list(layers)[:frozen_layers]]:
        for p in module.parameters():
            p.requires_grad_(False)


def save_trainable(folder: Path, named: Sequence[tuple[str, Any]], extra: Mapping[str, np.ndarray],
                   settings: Mapping[str, Any]) -> None:
    """Write trained parameters (``weights.safetensors``), arrays (``<name>.npy``) and the
    settings (``settings.json``) into ``folder``; a cache that cannot be written only logs a
    warning."""
    from safetensors.torch import save_file

    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, array in extra.items():
            buffer = io.BytesIO()
            np.save(buffer, array)
            write_atomic(folder / f"{name}.npy", buffer.getvalue(), durable=False)
        tmp = folder / ".weights.safetensors.tmp"
        save_file({n: p.detach().contiguous() for n, p in named}, str(tmp))
        tmp.replace(folder / "weights.safetensors")
        write_atomic(folder / "settings.json", json.dumps(dict(settings), sort_keys=True), durable=False)
    except OSError as exc:
        logger.warning("cannot cache trained weights in %s: %s", folder, exc)


def load_trainable(module: Any, folder: Path) -> None:
    """Load ``weights.safetensors`` of ``folder`` into ``module`` (parameters not in the file
    keep their base values).

    Raises
    ------
    RuntimeError : the file names parameters the module does not have.
    """
    from safetensors.torch import load_file

    state = load_file(str(folder / "weights.safetensors"))
    missing = set(state) - {n for n, _ in module.named_parameters()}
    if missing:
        raise RuntimeError(f"cached weights in {folder} do not fit the model ({sorted(missing)[:3]}); "
                           "remove that directory")
    module.load_state_dict(state, strict=False)


def pair_batches(pairs: Sequence[tuple[int, int]], batch_size: int, rng: np.random.Generator) -> list[list[int]]:
    """Batches of (query, document) pair indices in which no query and no document repeats.

    The pairs are shuffled with ``rng``; each batch takes, in that order, the pending pairs
    whose query and document it does not hold yet, up to ``batch_size`` (the no-duplicates
    batching of sentence-transformers). Every pair is in exactly one batch.

    Parameters
    ----------
    pairs : ``(query index, document index)`` per training pair.
    batch_size : >= 2.
    rng : numpy random generator.

    Returns
    -------
    lists of positions in ``pairs``.
    """
    pending = [int(i) for i in rng.permutation(len(pairs))]
    batches = []
    while pending:
        queries: set[int] = set()
        docs: set[int] = set()
        batch, rest = [], []
        for i in pending:
            q, d = pairs[i]
            if len(batch) < batch_size and q not in queries and d not in docs:
                batch.append(i)
                queries.add(q)
                docs.add(d)
            else:
                rest.append(i)
        batches.append(batch)
        pending = rest
    return batches


@register("finetuned")
class FinetunedRetriever(BaseRetriever):
    """Bi-encoder fine-tuned on the training folds' (query, gold primitive documentation) pairs
    (see the module docstring); ranks by cosine similarity of query and primitive vectors.

    Without training tasks it is the base model's dense retrieval.

    Parameters
    ----------
    model : base sentence-transformers model (default: all-MiniLM-L6-v2 of the offline package).
    view : documentation text per primitive (``"full"``, ``"signature"``, ``"name"``).
    loss : ``"library"`` (contrast with every non-gold library document) or ``"mnrl"``
        (sentence-transformers' MultipleNegativesRankingLoss with in-batch negatives).
    doc_vectors : ``"learned"``, ``"frozen"`` or ``"encoder"`` (module docstring).
    frozen_layers : number of the lowest transformer layers kept fixed (with the token
        embeddings); 0 trains every layer, >= 0.
    epochs : passes over the training queries (``"library"``) or pairs (``"mnrl"``), >= 1.
    lr : AdamW learning rate, > 0.
    batch_size : queries (``"library"``) or pairs (``"mnrl"``, >= 2) per step.
    scale : inverse temperature of the softmax over cosine similarities, > 0 (20 as
        sentence-transformers).
    max_seq_length : tokens per text the encoder reads, >= 8 (documents are cut there).
    seed : seed of the initialisation order and the batches, >= 0 (an experiment passes its seed).
    cache : read and write the trained weights and vectors on disk.

    Raises
    ------
    ValueError : a parameter out of its range or of the wrong type (the message names it).
    primsel.retrieval.encoders.EncoderLoadError : (from ``fit``) the base model cannot be loaded.
    """

    learns_from_tasks = True

    def __init__(self, model: str = DEFAULT_MODEL, view: str = "full", loss: str = "library",
                 doc_vectors: str = "learned", frozen_layers: int = 3, epochs: int = 6, lr: float = 1e-4,
                 batch_size: int = 16, scale: float = 20.0, max_seq_length: int = 64, seed: int = 0,
                 cache: bool = True) -> None:
        self.model = check_text("model", model, empty=False)
        self.view = check_choice("view", view, TEXT_VIEWS)
        self.loss = check_choice("loss", loss, LOSSES)
        self.doc_vectors = check_choice("doc_vectors", doc_vectors, DOC_VECTORS)
        self.frozen_layers = check_number("frozen_layers", frozen_layers, minimum=0, integer=True)
        self.epochs = check_number("epochs", epochs, minimum=1, integer=True)
        self.lr = check_number("lr", lr, above=0)
        self.batch_size = check_number("batch_size", batch_size, minimum=2 if loss == "mnrl" else 1, integer=True)
        self.scale = check_number("scale", scale, above=0)
        self.max_seq_length = check_number("max_seq_length", max_seq_length, minimum=8, integer=True)
        self.seed = check_number("seed", seed, minimum=0, integer=True)
        self.cache = check_flag("cache", cache)

    # -- what identifies a trained model ------------------------------------------------------
    def training_settings(self) -> dict[str, Any]:
        """The parameters that change the trained weights (``cache`` aside)."""
        return {k: v for k, v in self.get_params().items() if k != "cache"}

    def _key(self, train_tasks: Sequence[Task]) -> str:
        # the learned document vectors start from the base model's, computed by the encoder's
        # scheme: weights trained from vectors of another scheme are another model
        return digest({"base": model_content_digest(self.model), "settings": self.training_settings(),
                       "documents": self._doc_texts, "train": training_fingerprint(train_tasks),
                       "embedding": EMBEDDING_SCHEME})

    @property
    def folder(self) -> Path:
        """Cache directory of the fitted model (set by :meth:`fit`)."""
        return cache_dir() / "finetuned" / self._weights_key[:32]

    # -- fit -----------------------------------------------------------------------------------
    def fit(self, library: Mapping[str, Any], train_tasks: Sequence[Task] = ()) -> FinetunedRetriever:
        super().fit(library, train_tasks)
        self._doc_texts = [library[p].text(self.view) for p in self.ids]
        self._trained = bool(train_tasks)
        self._net: Any = None
        self.fit_seconds = 0.0
        self._weights_key = self._key(train_tasks)
        # "-alone": query vectors computed one text at a time (those of "queries", from batches,
        # depended on which queries were encoded together, so they are not read)
        self._queries = VectorStore(self.folder / "queries-alone")
        if not self._trained:  # the base model's dense retrieval
            self._docs = l2_normalise(self._base_doc_vectors())
            return self
        docs_path = self.folder / "documents.npy"
        if self.cache and docs_path.is_file() and (self.folder / "weights.safetensors").is_file():
            try:
                self._docs = np.load(docs_path)  # stored normalised: normalising again may move the last bit
                if self._docs.shape[0] == len(self.ids):
                    logger.debug("finetuned: weights found in %s", self.folder)
                    return self
            except (OSError, ValueError):
                pass
        start = time.perf_counter()
        self._train(train_tasks)
        self.fit_seconds = time.perf_counter() - start
        logger.info("finetuned: trained on %d tasks in %.1f s", len(train_tasks), self.fit_seconds)
        return self

    def _base_doc_vectors(self) -> np.ndarray:
        return np.asarray(SentenceEncoder(self.model).encode(self._doc_texts), dtype=np.float32)

    def _load_base(self) -> Any:
        """A fresh copy of the base model (its weights are changed by training)."""
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from sentence_transformers import SentenceTransformer

        with quiet_transformers():
            net = SentenceTransformer(model_location(self.model), device="cpu")
        net.max_seq_length = self.max_seq_length
        return net

    def _trainable(self, net: Any) -> list[tuple[str, Any]]:
        """Freeze the lowest layers (``frozen_layers``); the (name, parameter) pairs left to train."""
        freeze_lower_layers(getattr(net[0], "auto_model", None), self.frozen_layers, self.model)
        return [(n, p) for n, p in net.named_parameters() if p.requires_grad]

    def _train(  # noqa: C901 (one training loop; each option of the class is a branch of it)
        self, train_tasks: Sequence[Task]
    ) -> None:
        import torch

        torch.manual_seed(self.seed)
        rng = np.random.default_rng(self.seed)
        net = self._load_base()
        trainable = self._trainable(net)
        column = {p: j for j, p in enumerate(self.ids)}
        queries = [encodable_text(t.query) for t in train_tasks]  # a lone surrogate as its escape
        gold = np.zeros((len(train_tasks), len(self.ids)), dtype=np.float32)
        for i, t in enumerate(train_tasks):
            for p in t.gold:
                if p in column:
                    gold[i, column[p]] = 1.0
        doc_table = None
        if self.doc_vectors != "encoder":
            base = torch.tensor(l2_normalise(self._base_doc_vectors()))
            doc_table = torch.nn.Parameter(base.clone(), requires_grad=self.doc_vectors == "learned")
        params = [p for _, p in trainable] + ([doc_table] if self.doc_vectors == "learned" else [])
        optimiser = torch.optim.AdamW(params, lr=self.lr)
        tokenize = getattr(net, "preprocess", None) or net.tokenize  # renamed in sentence-transformers 6

        def embed(texts: list[str]) -> Any:
            return torch.nn.functional.normalize(net(dict(tokenize(texts)))["sentence_embedding"], dim=-1)

        def documents(index: Any = None) -> Any:
            if doc_table is not None:
                table = torch.nn.functional.normalize(doc_table, dim=-1)
                return table if index is None else table[index]
            return embed([self._doc_texts[i] for i in (range(len(self.ids)) if index is None else index.tolist())])

        if self.loss == "mnrl":
            from sentence_transformers.losses import MultipleNegativesRankingLoss

            mnrl = MultipleNegativesRankingLoss(net, scale=self.scale)
            pairs = [(i, j) for i in range(len(queries)) for j in np.flatnonzero(gold[i])]
        y = torch.tensor(gold)
        net.train()
        for _ in counted(range(self.epochs), desc="fine-tuning", unit="epoch"):
            if self.loss == "mnrl":
                for batch in pair_batches(pairs, self.batch_size, rng):
                    q_idx = [pairs[b][0] for b in batch]
                    d_idx = torch.tensor([pairs[b][1] for b in batch])
                    loss = mnrl.compute_loss_from_embeddings([embed([queries[i] for i in q_idx]), documents(d_idx)],
                                                             labels=None)
                    optimiser.zero_grad()
                    loss.backward()
                    optimiser.step()
            else:
                order = rng.permutation(len(queries))
                for s in range(0, len(order), self.batch_size):
                    b = order[s:s + self.batch_size]
                    sims = self.scale * embed([queries[i] for i in b]) @ documents().T
                    loss = library_contrastive_loss(sims, y[b])
                    optimiser.zero_grad()
                    loss.backward()
                    optimiser.step()
        net.eval()
        self._net = net
        with torch.no_grad():
            docs = documents().detach().numpy()
        self._docs = l2_normalise(docs)
        if self.cache:
            self._save(trainable)

    def _save(self, trainable: Sequence[tuple[str, Any]]) -> None:
        save_trainable(self.folder, trainable, {"documents": self._docs},
                       {"base": self.model, "settings": self.training_settings()})

    def _network(self) -> Any:
        """The trained encoder (loaded from the cache when this instance did not train it)."""
        if self._net is None:
            net = self._load_base()
            if self._trained:
                load_trainable(net, self.folder)
            net.eval()
            self._net = net
        return self._net

    def _encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        found = self._queries.get(texts) if self.cache else {}
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            if not self._trained:
                vectors = SentenceEncoder(self.model).encode(missing)
            else:
                import torch

                net = self._network()
                with torch.no_grad():  # one text at a time: a vector never depends on its batch mates
                    vectors = np.stack([net.encode([text], show_progress_bar=False, convert_to_numpy=True)[0]
                                        for text in missing])
            vectors = np.asarray(vectors, dtype=np.float32)
            if self.cache and self._trained:
                self._queries.put(missing, vectors)
            found.update(zip(missing, vectors))
        return np.stack([found[t] for t in texts])

    def score(self, queries: Mapping[str, str]) -> dict[str, Sequence[float]]:
        qids = list(queries)
        sims = l2_normalise(self._encode_queries([queries[q] for q in qids])) @ self._docs.T
        return {q: sims[row].tolist() for row, q in enumerate(qids)}


def library_contrastive_loss(sims: Any, gold: Any) -> Any:
    """Mean over (query, gold document) pairs of the softmax cross-entropy of the gold document
    against the query's non-gold documents.

    ``loss = mean_{(i, j): gold_ij} [ -s_ij + log(exp(s_ij) + sum_{k: not gold_ik} exp(s_ik)) ]``

    Parameters
    ----------
    sims : ``(n_queries, n_documents)`` torch tensor of scaled similarities.
    gold : same shape, 1 for a gold document, else 0; every row needs a gold document.

    Returns
    -------
    scalar torch tensor.
    """
    import torch

    negatives = sims.masked_fill(gold > 0, float("-inf"))
    log_negatives = torch.logsumexp(negatives, dim=1, keepdim=True)
    per_pair = torch.logaddexp(sims, log_negatives) - sims
    return (per_pair * gold).sum() / gold.sum().clamp(min=1.0)
