"""An optional LLM judge for answer correctness, and its agreement with the PR rule.

The study scores PR with a rule (cosine > 0.50 or all content words present, see
:func:`evaluators.metrics.answer_correct`) and validated it against an LLM judge;
disagreements were conservative false negatives (paper-notes "Metrics", PR). This
module provides such a judge: a yes/no prompt per LongMemEval question type, modelled
on the structure of LongMemEval's official answer-check prompts (our own wording),
sent to any LangChain chat model, and :func:`agreement` to compare rule and judge.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Sequence
from typing import Literal

import numpy as np
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from sklearn.metrics import cohen_kappa_score

from memkit.longmemeval import QUESTION_TYPES as _LME_TYPES

__all__ = [
    "JUDGE_PROMPTS",
    "QUESTION_TYPES",
    "JudgeParseError",
    "agreement",
    "judge_correct",
    "judge_prompt",
    "parse_yes_no",
]

QUESTION_TYPES = (*_LME_TYPES, "abstention")
"""LongMemEval question types, plus ``abstention`` (question ids ending ``_abs``)."""

_BASE = (
    "You are grading an assistant's reply against a reference answer.\n"
    "Say yes if the reply gives the reference answer, either in the same words, in "
    "equivalent words, or by working through steps that arrive at it. Say no if the "
    "reply gives a different answer, gives only part of what the reference requires, "
    "or gives no answer.{extra}\n\n"
    "Question: {question}\n\n"
    "Reference answer: {expected}\n\n"
    "Assistant's reply: {answer}\n\n"
    "Does the reply give the reference answer? Reply with one word: yes or no."
)

JUDGE_PROMPTS: dict[str, str] = {
    "single-session-user": _BASE.replace("{extra}", ""),
    "single-session-assistant": _BASE.replace("{extra}", ""),
    "multi-session": _BASE.replace("{extra}", ""),
    "temporal-reasoning": _BASE.replace(
        "{extra}",
        " When the question asks for a count of days, weeks, months or years, accept a "
        "reply that is off by one from the reference (for example 17 or 19 days when "
        "the reference is 18 days).",
    ),
    "knowledge-update": _BASE.replace(
        "{extra}",
        " The user's information changed over time and the reference is the latest "
        "value. A reply that mentions older values is still correct as long as the "
        "answer it gives as current matches the reference.",
    ),
    "single-session-preference": (
        "You are grading whether an assistant's reply is personalised to a user.\n"
        "The rubric below describes what a well-personalised reply does. Say yes if the "
        "reply recalls and uses the user's personal information correctly in the way "
        "the rubric describes; it need not cover every point of the rubric. Say no if "
        "it ignores the user's information or gets it wrong.\n\n"
        "Question: {question}\n\n"
        "Rubric: {expected}\n\n"
        "Assistant's reply: {answer}\n\n"
        "Is the reply personalised as the rubric describes? Reply with one word: yes or no."
    ),
    "abstention": (
        "You are grading an assistant's reply to a question that cannot be answered "
        "from what the user has shared.\n"
        "The explanation below says why it cannot be answered. Say yes if the reply "
        "recognises that the question cannot be answered: for example it says the "
        "information is missing or incomplete, or that what it knows concerns something "
        "else than what was asked. Say no if the reply makes up an answer.\n\n"
        "Question: {question}\n\n"
        "Explanation: {expected}\n\n"
        "Assistant's reply: {answer}\n\n"
        "Does the reply recognise that the question cannot be answered? Reply with one "
        "word: yes or no."
    ),
}
"""Prompt template per question type; fields ``{question}``, ``{expected}``, ``{answer}``."""


class JudgeParseError(ValueError):
    """The judge's reply contains neither a clear yes nor a clear no."""


def _question_type(question_type: str, question_id: str | None) -> str:
    if question_id is not None and str(question_id).endswith("_abs"):
        return "abstention"
    if question_type not in JUDGE_PROMPTS:
        raise ValueError(
            f"unknown LongMemEval question_type {question_type!r}; expected one of "
            f"{', '.join(QUESTION_TYPES)}"
        )
    return question_type


def judge_prompt(
    question: str,
    answer: str,
    expected: str | int | float,
    question_type: str,
    question_id: str | None = None,
) -> str:
    """The judge prompt for one answer.

    Args:
        question: the LongMemEval question.
        answer: the model's answer.
        expected: the reference answer (for ``single-session-preference`` a rubric,
            for abstention an explanation); ints/floats are converted with ``str``.
        question_type: a LongMemEval ``question_type`` (see :data:`QUESTION_TYPES`).
        question_id: the ``question_id``; one ending ``_abs`` selects the abstention
            prompt whatever ``question_type`` says (LongMemEval's convention).

    Returns:
        The filled prompt text.

    Raises:
        ValueError: an unknown ``question_type`` (and no ``_abs`` id).
    """
    qtype = _question_type(question_type, question_id)
    return JUDGE_PROMPTS[qtype].format(question=question, expected=expected, answer=answer)


_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_YES_NO = re.compile(r"\b(yes|no)\b", re.I)
_NEGATED_YES = re.compile(r"(?:\bnot|n['’]t)\s+(?:a\s+)?yes\b", re.I)


def parse_yes_no(reply: str) -> bool:
    """Read a yes/no verdict from a judge's reply.

    Rules: ``<think>…</think>`` blocks are removed; markdown and punctuation are
    ignored; the first whole word ``yes`` or ``no`` (case-insensitive) decides
    (``"Yes."``, ``"**No**"``, ``"Answer: yes"``, ``"no, because …"``); "not yes" is
    read as no.

    Args:
        reply: the judge model's text.

    Returns:
        ``True`` for yes, ``False`` for no.

    Raises:
        JudgeParseError: the reply contains neither word.
    """
    text = _THINK.sub(" ", reply)
    if _NEGATED_YES.search(text):
        return False
    match = _YES_NO.search(text)
    if match is None:
        raise JudgeParseError(f"judge reply has no yes/no verdict: {reply[:200]!r}")
    return match.group(1).lower() == "yes"


def judge_correct(
    model: BaseChatModel,
    question: str,
    answer: str,
    expected: str | int | float,
    question_type: str,
    question_id: str | None = None,
    *,
    on_unparsed: Literal["raise", "false"] = "raise",
) -> bool:
    """Ask an LLM judge whether ``answer`` is correct.

    Args:
        model: any LangChain chat model (Ollama, OpenAI-compatible, llama.cpp …);
            invoked once with one human message, :func:`judge_prompt`.
        question, answer, expected, question_type, question_id: as
            :func:`judge_prompt`.
        on_unparsed: ``"raise"`` (default) raises :class:`JudgeParseError` when the
            reply has no yes/no; ``"false"`` counts it as incorrect.

    Returns:
        The judge's verdict.

    Raises:
        ValueError: unknown ``question_type``.
        JudgeParseError: unparseable reply with ``on_unparsed="raise"``.

    Source: paper-notes "Metrics" (the study validated its PR rule against an LLM
    judge); prompt structure after LongMemEval's official evaluation.
    """
    prompt = judge_prompt(question, answer, expected, question_type, question_id)
    reply = model.invoke([HumanMessage(content=prompt)]).text
    try:
        return parse_yes_no(reply)
    except JudgeParseError:
        if on_unparsed == "false":
            return False
        raise


def agreement(rule: Sequence[bool], judge: Sequence[bool]) -> dict[str, float | int]:
    """Agreement between the PR rule and an LLM judge over the same answers.

    Args:
        rule: rule verdicts (:func:`evaluators.metrics.answers_correct`).
        judge: judge verdicts (:func:`judge_correct`), same order and length.

    Returns:
        ``{"n", "accuracy", "kappa", "rule_yes_judge_no", "rule_no_judge_yes"}``:
        ``accuracy`` is the share of equal verdicts; ``kappa`` is Cohen's kappa
        ``(p_o − p_e) / (1 − p_e)`` from ``sklearn.metrics.cohen_kappa_score`` (``nan``
        when ``p_e = 1``, i.e. both raters give one constant label); the two counts are
        the disagreements in each direction (``rule_no_judge_yes`` are the rule's
        false negatives relative to the judge).

    Raises:
        ValueError: empty inputs or different lengths.
    """
    r = np.asarray(list(rule), dtype=bool)
    j = np.asarray(list(judge), dtype=bool)
    if r.shape != j.shape or r.ndim != 1:
        raise ValueError(f"rule has {r.size} verdicts but judge has {j.size}; lengths must match")
    if r.size == 0:
        raise ValueError("agreement: no verdicts given")
    if np.unique(r).size == 1 and np.unique(j).size == 1 and r[0] == j[0]:
        kappa = math.nan  # both raters constant with the same label: p_e = 1, undefined
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kappa = float(cohen_kappa_score(r, j, labels=[False, True]))
    return {
        "n": int(r.size),
        "accuracy": float((r == j).mean()),
        "kappa": kappa,
        "rule_yes_judge_no": int((r & ~j).sum()),
        "rule_no_judge_yes": int((~r & j).sum()),
    }
