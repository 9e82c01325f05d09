"""What a unit plants beyond the canary, and what the runner measures on it.

With a forget request in words (:class:`evaluators.runner.Deletion` ``request``) or
leftover-vector weighing (:class:`evaluators.runner.UnitPlan` ``weigh_vectors``), each
user also gets a planted fact (:func:`memkit.dataset.facts.plant_fact`); the runner then
asks with :func:`request_for`, probes a forgotten fact with :func:`fact_probes`,
counts the other item on the live surfaces (collateral) and weighs the leftover
vectors of every planted turn (:func:`weigh_users`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evaluators.forget_requests import request_text
from evaluators.scoring.probes import LEVELS, probes_naming
from evaluators.targets.base import NotApplicable, Target
from memkit.dataset.canaries import Canary
from memkit.dataset.facts import FactRecord, plant_fact
from memkit.dataset.longmemeval import Instance

__all__ = ["LIVE_SURFACES", "fact_probes", "found", "plant_facts", "planted_items", "request_for", "weigh_users"]

LIVE_SURFACES = ("text_raw", "text_summary", "text_other", "metadata", "store_api", "pg_rows", "sqlite_rows")
"""Surfaces a user's memory is read back from (live records): an item on none of them
after a forget is lost."""

_FACT_NAMES = {"pin": "bank card PIN", "name": "doctor's name", "place": "home address"}


def plant_facts(planted: Sequence[Instance], canaries: Sequence[Canary], seed: int
                ) -> tuple[list[Instance], list[FactRecord]]:
    """One fact per canary-planted instance, away from the canary's turn."""
    pairs = [plant_fact(inst, seed, avoid=(c.session_index, c.turn_index)) for inst, c in zip(planted, canaries,
                                                                                              strict=True)]
    return [p for p, _ in pairs], [f for _, f in pairs]


def fact_probes(category: str) -> list[tuple[str, str, str, str]]:
    """The probes for a fact of ``category`` (the canary probes' templates, naming it),
    as the runner's ``("probe", level, template_id, text)``."""
    by_level = probes_naming(_FACT_NAMES[category])
    return [("probe", lv, p.id, p.text) for lv in LEVELS for p in by_level[lv]]


def request_for(kind: str, about: str, canary: Canary, fact: FactRecord, instance: Instance,
                seed: int) -> str:
    """The request of ``kind`` for the user's canary or fact (``about``)."""
    item: Any = canary if about == "secret" else fact
    category = canary.kind if about == "secret" else fact.category
    return request_text(kind, category, item.value, instance.haystack_dates[item.session_index], seed=seed)


def found(result: Any, value: str) -> bool | None:
    """Whether a request's resolution selected a memory holding ``value`` (``None``:
    the target does not say what it resolved to)."""
    from memkit.scan.matching import matcher

    texts = getattr(result, "resolved_texts", None)
    if texts is None:
        return None
    m = matcher(value)
    return any(m.search(t) for t in texts)


def planted_items(users: Sequence[str], planted: Sequence[Instance], canaries: Sequence[Canary],
                  facts: Sequence[FactRecord]) -> list[Any]:
    """Every user's planted items (:class:`memkit.residue.weigh.PlantedItem`) with the
    text of the turn each was planted in, as it was fed."""
    from memkit.residue.weigh import PlantedItem

    out = []
    for i, (user, inst) in enumerate(zip(users, planted, strict=True)):
        recs: list[tuple[Any, str]] = [(canaries[i], canaries[i].kind)]
        if facts:
            recs.append((facts[i], facts[i].category))
        for rec, cat in recs:
            turn = inst.haystack_sessions[rec.session_index][rec.turn_index].content
            out.append(PlantedItem(user, rec.value, cat, turn))
    return out


def weigh_users(target: Target, items: Sequence[Any], users: Sequence[str], seed: int
                ) -> tuple[list[dict[str, Any]] | None, str | None]:
    """Per user, what the target's leftover vectors reveal of that user's planted items
    (:func:`memkit.residue.weigh.summarize` with ``unread``), or ``(None, why)`` when the
    target's vectors cannot be read."""
    from memkit.residue.weigh import summarize, weigh

    if not target.supports("leftover_vectors"):
        return None, f"{target.name}: memkit cannot read its stored vectors"
    try:
        read, embedder = target.leftover_vectors()
    except NotApplicable as exc:
        return None, str(exc)
    weights = weigh(read.leftovers, items, embedder, seed=seed)
    out = []
    for u in users:
        rows = summarize(weights, owner=u)
        for surface in read.read:  # read and found none: a zero, not an absence
            rows.setdefault(surface, {"vectors": 0, "attributed": 0, "reidentified": 0, "attribute_correct": 0,
                                      "ranks": []})
        out.append({"surfaces": rows, "unread": dict(read.unread)})
    return out, None
