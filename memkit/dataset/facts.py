"""Planted facts: a second personal item per user, of a category a user would name.

A forget request in words ("forget my doctor's name", "olvida mi dirección") concerns
an item of some *category*; so does what a leftover vector reveals (Ghost Vectors,
arXiv 2606.18497: names, places, ages). Beside its canary (:mod:`memkit.dataset.canaries`),
each user can get one planted fact of a :data:`CATEGORIES` category, drawn and woven
into another eligible user turn with its own seeded stream, so the canary's turn and
value are exactly those :func:`memkit.dataset.canaries.plant` gives without it.

:data:`ATTRIBUTES` are every item category memkit plants (the canary kinds and the
fact categories); :func:`decoys` draws other values of one category (re-identification
among decoys of the same kind, :mod:`memkit.residue.weigh`) and :data:`PROTOTYPES`
phrases each category differently from the planted sentences (attribute inference).
"""

from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass

import numpy as np

from memkit.dataset.canaries import SENTENCES, draw_secret, eligible_turns, pick, plant_sentence
from memkit.dataset.longmemeval import Instance

__all__ = ["ATTRIBUTES", "CATEGORIES", "PROTOTYPES", "FactRecord", "decoys", "draw_value", "plant_fact",
           "sentence_of"]

_FIRST = ("Ilsabet", "Torvald", "Anouk", "Radomir", "Seraphine", "Kwabena", "Ottoline", "Benedikt", "Maelis",
          "Teodora", "Augustin", "Folasade", "Lorcan", "Zuzanna", "Evander", "Marisol", "Yevgenia", "Mateus")
_LAST = ("Halvorsen", "Okonkwo", "Varga", "Castellanos", "Lindqvist", "Nakamura", "Ferreira", "Brennan",
         "Kowalczyk", "Adeyemi", "Moreau", "Santangelo", "Thorsdottir", "Abernathy", "Quispe", "Delacroix")
_STREETS = ("Calle Mayor", "Linden Avenue", "Rua das Flores", "Harbour Road", "Birch Lane", "Kastanienallee",
            "Via Roma", "Orchard Street", "Mill Lane", "Rue Cler", "Sunset Terrace", "Quarry Hill")
_CITIES = ("Trondheim", "Arequipa", "Maribor", "Launceston", "Cremona", "Tartu", "Sucre", "Sligo", "Braga",
           "Dresden", "Kagoshima", "Marquette")

CATEGORIES: dict[str, str] = {
    "pin": "my bank card PIN is {value}",
    "name": "my doctor's name is {value}",
    "place": "I live at {value}",
}
"""Fact categories and the sentence each is planted in."""

ATTRIBUTES: tuple[str, ...] = (*SENTENCES, *CATEGORIES)
"""Every planted item's category: the canary kinds and the fact categories."""

PROTOTYPES: dict[str, tuple[str, ...]] = {
    "token": ("here is the login token for my account: {value}", "use this access code to sign in: {value}"),
    "email": ("you can write to me at {value}", "send the documents to {value}"),
    "phone": ("call me on {value}", "my mobile is {value}"),
    "card": ("charge it to the card {value}", "my credit card reads {value}"),
    "api_key": ("the developer key for the service is {value}", "authenticate with {value}"),
    "pin": ("the four digits I type at the cash machine are {value}", "unlock it with {value}"),
    "name": ("I have an appointment with {value} next week", "the person who treats me is {value}"),
    "place": ("send my mail to {value}", "my flat is at {value}"),
}
"""Phrasings of each category other than the planted sentences (attribute inference)."""


@dataclass(frozen=True)
class FactRecord:
    """Where and what fact was planted (fields as :class:`memkit.dataset.canaries.Canary`;
    ``category`` is one of :data:`CATEGORIES`)."""

    question_id: str
    session_id: str
    session_index: int
    turn_index: int
    value: str
    category: str
    sentence: str
    offset: int


def draw_value(rng: np.random.Generator, category: str) -> str:
    """A value of ``category``: a canary kind (:func:`memkit.dataset.canaries.draw_secret`) or a
    fact category (``pin``: 4 digits; ``name``: first and last name; ``place``: house
    number, street and city).

    Raises:
        ValueError: an unknown category.
    """
    if category in SENTENCES:
        return draw_secret(rng, category)
    if category == "pin":
        return "".join(string.digits[int(i)] for i in rng.integers(10, size=4))
    if category == "name":
        return f"{pick(rng, _FIRST)} {pick(rng, _LAST)}"
    if category == "place":
        return f"{int(rng.integers(2, 200))} {pick(rng, _STREETS)} in {pick(rng, _CITIES)}"
    raise ValueError(f"unknown category {category!r}; expected one of {ATTRIBUTES}")


def sentence_of(category: str, value: str) -> str:
    """The sentence an item of ``category`` is planted in (without the lead-in)."""
    return (SENTENCES.get(category) or CATEGORIES[category]).format(value=value)


def decoys(value: str, category: str, n: int, seed: int) -> list[str]:
    """``n`` distinct values of ``category``, none equal to ``value``, drawn from a
    stream seeded by ``seed`` and ``value``.

    Raises:
        ValueError: an unknown category, or a category with fewer than ``n`` other values
            drawable in ``50 * n`` tries.
    """
    digest = hashlib.sha256(f"{category}\0{value}".encode()).digest()
    rng = np.random.default_rng(np.random.SeedSequence([seed, *digest[:8]]))
    out: list[str] = []
    for _ in range(50 * n):
        v = draw_value(rng, category)
        if v != value and v not in out:
            out.append(v)
            if len(out) == n:
                return out
    raise ValueError(f"{category}: fewer than {n} distinct decoys")


def _fact_rng(seed: int, question_id: str) -> np.random.Generator:
    digest = hashlib.sha256(question_id.encode("utf-8")).digest()
    words = [int.from_bytes(digest[i:i + 4], "big") for i in range(0, 16, 4)]
    return np.random.default_rng(np.random.SeedSequence([seed, *words, 0x66616374]))  # "fact"


def plant_fact(instance: Instance, seed: int, *, avoid: tuple[int, int] | None = None,
               category: str | None = None) -> tuple[Instance, FactRecord]:
    """Plant one fact into a copy of ``instance`` (module doc): ``"Also, <sentence>."``
    at a sentence boundary of an eligible user turn other than ``avoid`` (the canary's
    ``(session_index, turn_index)``) when there is one.

    Args:
        instance: the (canary-planted) instance.
        seed: the run seed; the fact's stream is its own (module doc).
        avoid: a turn not to use when another is eligible.
        category: the category (default drawn from :data:`CATEGORIES`).

    Raises:
        memkit.dataset.canaries.CanaryError: no eligible user turn.
        ValueError: an unknown category.
    """
    from memkit.dataset.canaries import CanaryError

    rng = _fact_rng(seed, instance.question_id)
    cat = category if category is not None else pick(rng, tuple(CATEGORIES))
    if cat not in CATEGORIES:
        raise ValueError(f"unknown fact category {cat!r}; expected one of {tuple(CATEGORIES)}")
    turns = eligible_turns(instance)
    if avoid is not None and len(turns) > 1:
        turns = [t for t in turns if t != tuple(avoid)]
    if not turns:
        raise CanaryError(f"instance {instance.question_id!r}: no eligible user turn for a fact")
    s, t = turns[int(rng.integers(len(turns)))]
    value = draw_value(rng, cat)
    sentence = "Also, " + CATEGORIES[cat].format(value=value) + "."
    planted, offset = plant_sentence(instance, s, t, sentence, rng)
    return planted, FactRecord(instance.question_id, instance.haystack_session_ids[s], s, t, value, cat,
                               sentence, offset)
