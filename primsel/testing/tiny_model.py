"""A tiny sentence-transformers model directory with random weights, for tests.

:func:`write_tiny_model` writes a directory that sentence-transformers loads like any model
(a one-layer BERT with a word-level vocabulary, mean pooling), a few hundred kilobytes that load
in a fraction of a second. Its vectors mean nothing; it exists so that tests can load a real
model directory, change its weights in place and load it again, without the default model.

Needs ``torch`` and ``transformers`` (the ``dense`` extra), imported when called.
"""

from __future__ import annotations

import inspect
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

__all__ = ["write_tiny_model"]

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def write_tiny_model(directory: str | os.PathLike[str], texts: Iterable[str], *, dim: int = 16,
                     seed: int = 0) -> Path:
    """Write a sentence-transformers model with random weights to ``directory``.

    Parameters
    ----------
    directory : created if missing; its model files are overwritten.
    texts : texts whose lower-cased words (``[a-z0-9]+``) make the vocabulary; other words
        are ``[UNK]``.
    dim : size of the vectors, even, >= 2.
    seed : seed of the random weights (``torch.manual_seed``).

    Returns
    -------
    The directory: ``config.json``, ``model.safetensors``, the tokenizer files, ``modules.json``,
    ``sentence_bert_config.json`` and ``1_Pooling/config.json``.

    Raises
    ------
    ValueError : ``dim`` odd or < 2.
    ImportError : torch or transformers missing.
    """
    if dim < 2 or dim % 2:
        raise ValueError(f"dim must be even and >= 2, got {dim}")
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from primsel.retrieval.encoders import quiet_transformers

    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    words = sorted({w for text in texts for w in re.findall(r"[a-z0-9]+", text.lower())})
    vocab = root / "vocab.txt"
    vocab.write_text("\n".join([*SPECIAL_TOKENS, *words]) + "\n", encoding="utf-8")
    config = BertConfig(vocab_size=len(SPECIAL_TOKENS) + len(words), hidden_size=dim, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=2 * dim, max_position_embeddings=128)
    torch.manual_seed(seed)
    with quiet_transformers():
        BertModel(config).save_pretrained(root, safe_serialization=True)
        tokens = [*SPECIAL_TOKENS, *words]
        if "vocab" in inspect.signature(BertTokenizerFast.__init__).parameters:
            # transformers 5 ignores vocab_file: every word would be [UNK]
            tokenizer = BertTokenizerFast(vocab={t: i for i, t in enumerate(tokens)}, do_lower_case=True)
        else:
            tokenizer = BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True)
        tokenizer.save_pretrained(root)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    (root / "modules.json").write_text(json.dumps(modules, indent=2), encoding="utf-8")
    (root / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128, "do_lower_case": False}),
                                                    encoding="utf-8")
    (root / "1_Pooling").mkdir(exist_ok=True)
    pooling = {"word_embedding_dimension": dim, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
               "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}
    (root / "1_Pooling" / "config.json").write_text(json.dumps(pooling, indent=2), encoding="utf-8")
    return root
