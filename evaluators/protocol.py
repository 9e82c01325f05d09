"""The study's protocol, step by step, shared by the sweep and ``audit``.

Both run the same steps over a memory (arXiv 2606.10062, Setup; docs/design.md,
"Data path"):

1. **plant** one canary per instance (user) in a non-evidence user turn
   (:func:`memkit.canaries.plant`);
2. **feed** the instance's sessions into the memory (the sweep: the design's write
   graph; ``audit``: the agent's own feed);
3. **ask** the LongMemEval question, each in a fresh conversation, and score it
   (:func:`score_questions`: PR's default rule and the study's);
4. **probe** with every template of every level (:func:`probe_queries`), scoring
   extraction (:func:`evaluators.probes.extracted`);
5. **forget** the canary (a deletion mode, or the agent's own forget);
6. **scan** every surface the memory keeps (:func:`memkit.residue.scan`) and ask and
   probe again (PR after, AER after, FRS per tier).

The records each step produces are typed in :mod:`evaluators.records`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evaluators.metrics import answers_correct
from evaluators.probes import LEVELS, probes_for

__all__ = ["probe_queries", "score_questions"]


def probe_queries(kind: str = "token") -> list[tuple[str, str, str]]:
    """Every probe for canaries of ``kind``, as ``(level, template_id, text)`` in level
    order (direct, indirect, jailbreak) then template order."""
    by_level = probes_for(kind)
    return [(p.level, p.id, p.text) for lv in LEVELS for p in by_level[lv]]


def score_questions(records: Sequence[dict[str, Any]]) -> None:
    """Score the question records among ``records`` in place: ``correct`` by PR's
    default rule (``lme``: LongMemEval's judging semantics, docs/metrics.md) and
    ``correct_study`` by the study's rule, with one embedding batch per rule.

    A record needs ``query_kind``, ``response`` and ``expected``; ``question_id``,
    ``question_type`` and ``query`` (the question) are used when present.
    """
    qs = [r for r in records if r.get("query_kind") == "question"]
    if not qs:
        return
    args = ([r["response"] for r in qs], [r["expected"] for r in qs])
    meta = {
        "question_ids": [r.get("question_id") for r in qs],
        "question_types": [r.get("question_type") for r in qs],
        "questions": [r.get("query") for r in qs],
    }
    flags = answers_correct(*args, **meta)  # the default rule ("lme")
    study = answers_correct(*args, rule="study")
    for r, ok, ok_study in zip(qs, flags, study, strict=True):
        r["correct"] = bool(ok)
        r["correct_study"] = bool(ok_study)
