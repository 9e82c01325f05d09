"""What a leftover vector reveals: re-identification among decoys and attribute inference.

A vector that outlives its record (:mod:`memkit.residue.vectors`) cannot be read back into
text, but it can be tested against guesses (Ghost Vectors, arXiv 2606.18497). Two
attacks, by an adversary who holds the vector and the embedding model:

* **re-identification**: the adversary knows the *kind* of secret (say, a session
  token) and ranks candidate statements -- the planted sentence with the true value
  and with ``n_decoys`` (>= 100) other values of the same kind
  (:func:`memkit.dataset.facts.decoys`) -- by cosine similarity to the vector. The vector
  re-identifies the secret when the true value ranks first. The adversary does not
  know the rest of the deleted text: only the sentence's template.
* **attribute inference**: which category of item the vector's text held (a PIN, a
  name, a place, a token ...): the category whose centroid of
  :data:`memkit.dataset.facts.PROTOTYPES` phrasings (with drawn values, never the planted
  sentence) is nearest.

Ground truth: a leftover vector is a vector *of a planted item* when its cosine to
the embedding of the turn that item was planted in (as it was fed) is the highest over
every planted turn and at least ``match`` (0.9); other vectors (small talk, summaries)
are counted but not attributed. Rates are over attributed vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memkit.dataset.facts import ATTRIBUTES, PROTOTYPES, decoys, draw_value, sentence_of

__all__ = ["PlantedItem", "VectorWeight", "encode", "summarize", "weigh"]

N_DECOYS = 100
"""Decoys per item: at least 100 (the issue's and Ghost Vectors' setting)."""


@dataclass(frozen=True)
class PlantedItem:
    """One planted item: its ``owner`` (user id), ``value``, ``category``
    (:data:`memkit.dataset.facts.ATTRIBUTES`) and the ``turn`` text it was planted in."""

    owner: str
    value: str
    category: str
    turn: str


@dataclass(frozen=True)
class VectorWeight:
    """What one leftover vector gives away.

    Attributes:
        surface, location: where the vector lies (:class:`memkit.residue.vectors.LeftoverVector`).
        owner, category: the planted item it is a vector of (``None``: of no planted turn).
        match: cosine to that item's turn.
        rank: rank of the true value among it and the decoys (1 = re-identified).
        predicted: the attribute inferred. correct: ``predicted == category``.
    """

    surface: str
    location: str
    owner: str | None
    category: str | None
    match: float
    rank: int | None
    predicted: str
    correct: bool | None


def encode(embedder: Any, texts: Sequence[str]) -> np.ndarray:
    """Unit rows of ``embedder`` (``encode`` or LangChain ``embed_documents``) on ``texts``."""
    texts = list(texts)
    raw = embedder.encode(texts) if hasattr(embedder, "encode") else embedder.embed_documents(texts)
    out = np.asarray(raw, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return out / norms


def _centroids(embedder: Any, seed: int, per: int = 4) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x70726f74]))  # "prot"
    names, rows = [], []
    for a in ATTRIBUTES:
        texts = [p.format(value=draw_value(rng, a)) for p in PROTOTYPES[a] for _ in range(per)]
        c = encode(embedder, texts).mean(axis=0)
        names.append(a)
        rows.append(c / (np.linalg.norm(c) or 1.0))
    return names, np.stack(rows)


def weigh(leftovers: Sequence[Any], items: Sequence[PlantedItem], embedder: Any, *, n_decoys: int = N_DECOYS,
          seed: int = 0, match: float = 0.9) -> list[VectorWeight]:
    """Weigh every leftover vector (module doc).

    Args:
        leftovers: :class:`memkit.residue.vectors.LeftoverVector` objects.
        items: the planted items of every user of the store.
        embedder: the store's embedding model.
        n_decoys: decoys per item (>= 100 for the study's setting).
        seed: seeds the decoys and the prototypes' values.
        match: the least cosine between a vector and a planted turn for the vector to
            count as that turn's.

    Returns:
        One :class:`VectorWeight` per leftover vector, in order. Vectors whose dimension
        is not the embedder's are weighed as of no planted item, predicted ``"?"``.
    """
    if not leftovers:
        return []
    names, cents = _centroids(embedder, seed)
    dim = cents.shape[1]
    turns = list(dict.fromkeys(i.turn for i in items))
    tmat = encode(embedder, turns) if turns else np.zeros((0, dim), dtype=np.float32)
    owners = {t: [i for i in items if i.turn == t] for t in turns}
    ranked: dict[tuple[str, str], np.ndarray] = {}
    out: list[VectorWeight] = []
    for v in leftovers:
        vec = np.asarray(v.vector, dtype=np.float32)
        if vec.shape != (dim,):
            out.append(VectorWeight(v.surface, v.location, None, None, 0.0, None, "?", None))
            continue
        vec = vec / (np.linalg.norm(vec) or 1.0)
        predicted = names[int(np.argmax(cents @ vec))]
        cos = tmat @ vec if len(tmat) else np.zeros(0)
        best = int(np.argmax(cos)) if len(cos) else -1
        if best < 0 or cos[best] < match:
            out.append(VectorWeight(v.surface, v.location, None, None, float(cos[best]) if best >= 0 else 0.0,
                                    None, predicted, None))
            continue
        for item in owners[turns[best]]:
            key = (item.value, item.category)
            if key not in ranked:
                texts = [sentence_of(item.category, item.value)] + [
                    sentence_of(item.category, d) for d in decoys(item.value, item.category, n_decoys, seed)]
                ranked[key] = encode(embedder, texts)
            scores = ranked[key] @ vec
            rank = 1 + int(np.sum(scores[1:] > scores[0]))
            out.append(VectorWeight(v.surface, v.location, item.owner, item.category, float(cos[best]), rank,
                                    predicted, predicted == item.category))
    return out


def summarize(weights: Sequence[VectorWeight], owner: str | None = None) -> dict[str, dict[str, Any]]:
    """Per surface: ``vectors`` (leftover vectors weighed), ``attributed`` (vectors of a
    planted item, of ``owner`` when given), ``reidentified`` (of those, ranked first),
    ``attribute_correct`` and the ``ranks``."""
    out: dict[str, dict[str, Any]] = {}
    seen: set[tuple[str, str]] = set()
    for w in weights:
        row = out.setdefault(w.surface, {"vectors": 0, "attributed": 0, "reidentified": 0,
                                         "attribute_correct": 0, "ranks": []})
        row["vectors"] += (w.surface, w.location) not in seen
        seen.add((w.surface, w.location))
        if w.owner is None or (owner is not None and w.owner != owner):
            continue
        row["attributed"] += 1
        row["reidentified"] += int(w.rank == 1)
        row["attribute_correct"] += int(bool(w.correct))
        row["ranks"].append(w.rank)
    return out
