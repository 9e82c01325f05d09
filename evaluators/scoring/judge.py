"""An optional LLM judge for answer correctness, and its agreement with the PR rule.

The study scores PR with a rule (cosine > 0.50 or all content words present, see
:func:`evaluators.scoring.metrics.answer_correct`) and validated it against an LLM judge;
disagreements were conservative false negatives ("Deployment-Time Memorization in
Foundation-Model Agents", arXiv 2606.10062, section *Metrics*). This module provides
such a judge: a yes/no prompt per LongMemEval question type, modelled on the structure
of LongMemEval's official answer-check prompts (our own wording), sent to any LangChain
chat model, and :func:`agreement` to compare rule and judge.

The verdict is read without guessing (docs/metrics.md, *LLM judge*): where the model
supports structured output (LangChain ``with_structured_output``) the judge fills
:class:`StructuredVerdict` (``correct: bool``, ``reason: str``); otherwise, or when
that call fails, the reply text is read by :func:`parse_verdict`, which takes the
*final explicit* verdict and returns ``None`` ("unparsed") when there is none. An
unparsed reply is never read as yes.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from pydantic import BaseModel, Field, ValidationError, field_validator
from sklearn.metrics import cohen_kappa_score

from evaluators.scoring.judge_parse import parse_verdict
from memkit.dataset.longmemeval import QUESTION_TYPES as _LME_TYPES

__all__ = [
    "JUDGE_PROMPTS",
    "QUESTION_TYPES",
    "JudgeParseError",
    "JudgeVerdict",
    "StructuredVerdict",
    "agreement",
    "judge_correct",
    "judge_prompt",
    "judge_verdict",
    "parse_verdict",
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

_TEXT_ASK = "Reply with one word: yes or no."
_STRUCTURED_ASK = (
    "Give your verdict as `correct` (true for yes, false for no) and a one-sentence `reason`."
)


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
    *,
    structured: bool = False,
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
        structured: ask for :class:`StructuredVerdict`'s fields instead of one word
            (the prompt's last sentence, "Reply with one word: yes or no.", is replaced).

    Returns:
        The filled prompt text.

    Raises:
        ValueError: an unknown ``question_type`` (and no ``_abs`` id).
    """
    qtype = _question_type(question_type, question_id)
    prompt = JUDGE_PROMPTS[qtype].format(question=question, expected=expected, answer=answer)
    if structured:
        prompt = prompt[: prompt.rindex(_TEXT_ASK)] + _STRUCTURED_ASK
    return prompt


def parse_yes_no(reply: str) -> bool:
    """Read a yes/no verdict from a judge's reply, or raise.

    :func:`parse_verdict` (the final explicit verdict; module
    :mod:`evaluators.scoring.judge_parse` documents the forms), raising when it finds none.

    Args:
        reply: the judge model's text.

    Returns:
        ``True`` for yes, ``False`` for no.

    Raises:
        JudgeParseError: the reply has no clear verdict.
    """
    verdict = parse_verdict(reply)
    if verdict is None:
        raise JudgeParseError(f"judge reply has no yes/no verdict: {reply[:200]!r}")
    return verdict


class StructuredVerdict(BaseModel):
    """The judge's verdict in structured form (the schema given to
    ``with_structured_output``)."""

    correct: bool = Field(description="true if the reply is correct (yes), false if it is not (no)")
    reason: str = Field(description="one sentence saying why")

    @field_validator("correct", mode="before")
    @classmethod
    def _typed(cls, value: object) -> object:
        """Only a boolean, or a string that is exactly yes/no/true/false: pydantic's lax
        bool would read ``1``, ``"on"`` or ``"y"`` as a verdict."""
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("yes", "no", "true", "false"):
            return value.strip().lower() in ("yes", "true")
        raise ValueError(f"correct must be a boolean or yes/no/true/false, got {value!r}")


@dataclass(frozen=True)
class JudgeVerdict:
    """One judge call's outcome.

    Attributes:
        correct: the verdict; ``None`` when the reply had no clear verdict (unparsed).
        method: ``"structured"`` (the model filled :class:`StructuredVerdict`, or its
            reply to the structured prompt was read by :func:`parse_verdict`) or
            ``"text"`` (the one-word prompt, read by :func:`parse_verdict`).
        reply: the model's reply text (for a parsed structured reply, its JSON).
        reason: the structured ``reason``; ``None`` on the text path.
        structured_error: why the structured call failed (exception type and
            message; its reply was then read as text, or the one-word prompt asked),
            else ``None``.
    """

    correct: bool | None
    method: Literal["structured", "text"]
    reply: str
    reason: str | None = None
    structured_error: str | None = None

    @property
    def unparsed(self) -> bool:
        """The reply had no clear verdict."""
        return self.correct is None


def _reply_text(message: object) -> str:
    """The text of a LangChain message (``.text`` joins content blocks), plus the
    arguments of any tool call (a structured reply may come as one)."""
    text = str(getattr(message, "text", "") or "")  # a str in langchain-core >= 1 (content blocks joined)
    for call in getattr(message, "tool_calls", None) or []:
        text += "\n" + json.dumps(call.get("args", {}))
    return text


def _structured(model: BaseChatModel, prompt: str) -> JudgeVerdict:
    """One structured call (``correct`` is ``None`` when neither the provider's parser
    nor :func:`parse_verdict` found a verdict); raises NotImplementedError when the
    model has no structured output, and whatever the provider raises when the call
    fails."""
    runnable = model.with_structured_output(StructuredVerdict, include_raw=True)
    out = runnable.invoke([HumanMessage(content=prompt)])
    parsed, raw = out.get("parsed"), out.get("raw")
    if isinstance(parsed, dict):
        parsed = StructuredVerdict(**parsed)
    if isinstance(parsed, StructuredVerdict):
        return JudgeVerdict(parsed.correct, "structured", parsed.model_dump_json(), parsed.reason)
    text = _reply_text(raw)  # the provider's parser failed: read the reply ourselves
    return JudgeVerdict(parse_verdict(text), "structured", text)


def _reply_of_error(exc: Exception) -> str | None:
    """The reply text a failed structured call carries, if any: the completion of
    openai's ``LengthFinishReasonError`` (a reply cut by ``max_tokens``; its
    ``"correct"`` key comes first) or the input of pydantic's JSON ``ValidationError``
    (a server that ignored the schema and answered in words). A reply that was JSON
    but broke the schema (``"correct": "incorrect"``) gives none: its field's value is
    no reply to read."""
    completion = getattr(exc, "completion", None)
    if completion is not None:
        try:
            return str(completion.choices[0].message.content or "")
        except (AttributeError, IndexError, TypeError):
            return None
    if isinstance(exc, ValidationError):
        for err in exc.errors():  # the whole reply, not one field's value ("incorrect")
            if err.get("type") == "json_invalid" and not err.get("loc") and isinstance(err.get("input"), str):
                return err["input"]
    return None


def judge_verdict(
    model: BaseChatModel,
    question: str,
    answer: str,
    expected: str | int | float,
    question_type: str,
    question_id: str | None = None,
    *,
    structured: bool | None = None,
) -> JudgeVerdict:
    """Ask an LLM judge for its verdict on ``answer``; never guesses an unclear reply.

    With ``structured`` not ``False`` the judge is asked through
    ``model.with_structured_output(StructuredVerdict, include_raw=True)`` (the provider's
    JSON schema / tool calling) with :func:`judge_prompt` ``(structured=True)``. A
    structured reply the provider could not parse (JSON cut by ``max_tokens``, a server
    that ignored the schema and answered in words) is read by :func:`parse_verdict`
    (a JSON reply by its verdict keys alone, each a boolean or exactly yes/no/true/
    false; a reply in words by its final explicit yes/no). The schema's ``correct``
    takes only a boolean or those words (:class:`StructuredVerdict`). A model
    without structured output (``NotImplementedError``), or a structured call that
    fails with no verdict to read (a server that rejects the schema, a reply with no
    clear verdict), is asked again with the one-word prompt, and that reply is read by
    :func:`parse_verdict`.

    Args:
        model: any LangChain chat model (Ollama, OpenAI-compatible, llama.cpp …).
        question, answer, expected, question_type, question_id: as :func:`judge_prompt`.
        structured: ``None`` (default) tries structured output first; ``True`` the same;
            ``False`` uses the one-word prompt only.

    Returns:
        A :class:`JudgeVerdict`; ``correct`` is ``None`` for a reply with no clear verdict.

    Raises:
        ValueError: unknown ``question_type``.
        Exception: whatever the model raises on the one-word prompt (e.g. a server
            that does not answer): errors of the structured call alone are not raised.
    """
    error = None
    if structured is not False:
        prompt = judge_prompt(question, answer, expected, question_type, question_id, structured=True)
        try:
            v = _structured(model, prompt)
            if v.correct is not None:
                return v
            error = f"no clear verdict in the structured reply {v.reply[:200]!r}"
        except NotImplementedError:
            error = None  # no structured output for this model: the documented fallback
        except Exception as exc:  # noqa: BLE001 - any failure of the structured call falls back
            error = f"{type(exc).__name__}: {str(exc)[:300]}"
            raw = _reply_of_error(exc)
            if raw is not None and (verdict := parse_verdict(raw)) is not None:
                return JudgeVerdict(verdict, "structured", raw, structured_error=error)
    prompt = judge_prompt(question, answer, expected, question_type, question_id)
    reply = _reply_text(model.invoke([HumanMessage(content=prompt)]))
    return JudgeVerdict(parse_verdict(reply), "text", reply, structured_error=error)


def judge_correct(
    model: BaseChatModel,
    question: str,
    answer: str,
    expected: str | int | float,
    question_type: str,
    question_id: str | None = None,
    *,
    on_unparsed: Literal["raise", "false"] = "raise",
    structured: bool | None = None,
) -> bool:
    """Ask an LLM judge whether ``answer`` is correct (:func:`judge_verdict`).

    Args:
        model: any LangChain chat model (Ollama, OpenAI-compatible, llama.cpp …).
        question, answer, expected, question_type, question_id: as
            :func:`judge_prompt`.
        on_unparsed: ``"raise"`` (default) raises :class:`JudgeParseError` when the
            reply has no clear verdict; ``"false"`` counts it as incorrect. (To count
            unparsed replies apart, use :func:`judge_verdict`.)
        structured: as :func:`judge_verdict`.

    Returns:
        The judge's verdict.

    Raises:
        ValueError: unknown ``question_type``.
        JudgeParseError: unparseable reply with ``on_unparsed="raise"``.

    Source: the study validated its PR rule against an LLM judge (arXiv 2606.10062,
    *Metrics*); prompt structure after LongMemEval's official evaluation
    (``src/evaluation/evaluate_qa.py``).
    """
    v = judge_verdict(model, question, answer, expected, question_type, question_id, structured=structured)
    if v.correct is None:
        if on_unparsed == "false":
            return False
        raise JudgeParseError(f"judge reply has no yes/no verdict: {v.reply[:200]!r}")
    return v.correct


def agreement(rule: Sequence[bool], judge: Sequence[bool]) -> dict[str, float | int]:
    """Agreement between the PR rule and an LLM judge over the same answers.

    Args:
        rule: rule verdicts (:func:`evaluators.scoring.metrics.answers_correct`).
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
