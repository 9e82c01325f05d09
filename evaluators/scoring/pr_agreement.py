"""A labelled agreement set for PR's answer rules, and each rule's agreement with it.

The set (``tests/data/pr_agreement.csv``) holds ``(question_type, question_id,
question, reference, response, label, explanation)`` rows: questions and references
of the real LongMemEval sample, responses written to probe the rule's classes
(numbers, abstention, negation, same kind but wrong entity, preference rubrics),
and a ``yes``/``no`` label decided by LongMemEval's official judging semantics
(``evaluate_qa.py``), explained per row. :func:`rule_agreement` scores the responses
with a PR rule (:func:`evaluators.scoring.metrics.score_answers`) and compares with the
labels through :func:`evaluators.scoring.judge.agreement` (accuracy, Cohen's kappa).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluators.scoring.judge import QUESTION_TYPES, agreement
from evaluators.scoring.metrics import DEFAULT_PR_RULE, score_answers

__all__ = ["AGREEMENT_FIELDS", "LabelledAnswer", "load_agreement_set", "rule_agreement"]

AGREEMENT_FIELDS = ("question_type", "question_id", "question", "reference", "response", "label", "explanation")
"""The CSV's columns, in order."""


@dataclass(frozen=True)
class LabelledAnswer:
    """One row of the agreement set (``label``: the official judge's verdict)."""

    question_type: str
    question_id: str
    question: str
    reference: str
    response: str
    label: bool
    explanation: str


def load_agreement_set(path: str | Path) -> list[LabelledAnswer]:
    """Read and validate an agreement-set CSV (UTF-8, header :data:`AGREEMENT_FIELDS`).

    Args:
        path: the CSV file.

    Returns:
        The rows in file order.

    Raises:
        ValueError: a missing column, or a row with an empty field, a label other than
            ``yes``/``no`` or an unknown question type; the message names the file,
            the row (1-based, header excluded) and the field.
    """
    path = Path(path)
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [f for f in AGREEMENT_FIELDS if f not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
        out = []
        for n, row in enumerate(reader, start=1):
            for f in AGREEMENT_FIELDS:
                if not (row.get(f) or "").strip():
                    raise ValueError(f"{path}: row {n}: field {f!r} is empty")
            label = row["label"].strip().lower()
            if label not in ("yes", "no"):
                raise ValueError(f"{path}: row {n}: field 'label' is {row['label']!r}; expected yes or no")
            if row["question_type"] not in QUESTION_TYPES:
                raise ValueError(
                    f"{path}: row {n}: field 'question_type' is {row['question_type']!r}; "
                    f"expected one of {', '.join(QUESTION_TYPES)}"
                )
            out.append(LabelledAnswer(
                row["question_type"], row["question_id"], row["question"], row["reference"],
                row["response"], label == "yes", row["explanation"],
            ))
    return out


def rule_agreement(
    rows: list[LabelledAnswer], *, rule: str = DEFAULT_PR_RULE, embeddings: Any = None
) -> dict[str, Any]:
    """Agreement of a PR rule with the labels.

    Args:
        rows: from :func:`load_agreement_set`.
        rule: a PR rule name (:data:`evaluators.scoring.metrics.PR_RULES`).
        embeddings: the PR embedder; default ``memkit.models.chat.embeddings()``.

    Returns:
        :func:`evaluators.scoring.judge.agreement`'s dict (``n``, ``accuracy``, ``kappa``,
        ``rule_yes_judge_no``, ``rule_no_judge_yes``) plus ``"disagreements"``: one dict
        per disagreeing row (its fields, ``rule_verdict``, ``cosine``, ``reason``).
    """
    scores = score_answers(
        [r.response for r in rows], [r.reference for r in rows], embeddings=embeddings, rule=rule,
        question_ids=[r.question_id for r in rows],
        # abstention rows are recognised by their _abs id; the type column names them
        question_types=[None if r.question_type == "abstention" else r.question_type for r in rows],
        questions=[r.question for r in rows],
    )
    out: dict[str, Any] = agreement([s.correct for s in scores], [r.label for r in rows])
    out["rule"] = rule
    out["disagreements"] = [
        {**r.__dict__, "rule_verdict": s.correct, "cosine": round(s.cosine, 4), "reason": s.reason}
        for r, s in zip(rows, scores, strict=True)
        if s.correct != r.label
    ]
    return out
