"""Prompts of memkit's LLM nodes and the parsers of their outputs (docs/design.md, "The pipeline").

Five LangChain :class:`~langchain_core.prompts.ChatPromptTemplate`\\ s, one per call an
LLM backend makes:

* :data:`FACTS_PROMPT` (S=1 key facts of a session; one fact per line, about the user
  only) and :data:`FACTS_UPDATE_PROMPT` (the same with the prior fact list as context:
  rolling re-summarization, used by the ``raw_plus_resummarize`` forget mode);
* :data:`SUMMARY_PROMPT` (S=2 one-sentence session summary) and
  :data:`SUMMARY_UPDATE_PROMPT` (the same with the prior summary as context);
* :data:`RESPOND_PROMPT` (the responder: ``"Relevant memories:\\n- ...\\n\\nQuestion: ..."``).

Each system message starts with a task marker from :mod:`memkit.models.extractive`
(``[memkit-task:facts]`` ...) and the human message lays its sections out with
:func:`memkit.models.extractive.format_items`, so the model-free
:class:`~memkit.models.extractive.ExtractiveChatModel` can parse the same prompts that an LLM
reads. The markers are a few tokens of noise for an LLM.

Design choices: the prompts ask for *personal* facts stated by the user (the S=1
definition of the study) and do **not** tell the model to drop secrets or
credentials -- the study measures what summarization removes by itself (ΔS), so an
instruction to sanitise would be a different pipeline. Output formats are the
simplest a small model follows (plain lines, one sentence), and the parsers accept
bullets, numbering, bold markers and preambles anyway.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import ChatPromptTemplate

from memkit.models.extractive import (
    FACTS_MARKER,
    MEMORIES_HEADER,
    PRIOR_HEADER,
    QUESTION_HEADER,
    RESPOND_MARKER,
    SUMMARY_MARKER,
    TURNS_HEADER,
    format_items,
)

__all__ = [
    "FACTS_PROMPT",
    "FACTS_UPDATE_PROMPT",
    "RESPOND_PROMPT",
    "SUMMARY_PROMPT",
    "SUMMARY_UPDATE_PROMPT",
    "facts_prompt",
    "format_items",
    "parse_fact_lines",
    "parse_summary",
    "respond_prompt",
    "summary_prompt",
]

_FACTS_SYSTEM = (
    f"{FACTS_MARKER} You extract key personal facts about the user from the user's messages "
    "to an assistant. A key fact is something the user says about themselves: who they are, "
    "what they have, do, like, plan or experienced, with names, numbers and dates. "
    "Write one fact per line as a short sentence about the user. "
    "Do not include questions, requests, advice or anything about the assistant. "
    "If there is no personal fact, write NONE."
)

_FACTS_UPDATE_SYSTEM = (
    f"{FACTS_MARKER} You maintain a list of key personal facts about the user. You are given "
    "the prior list and the user's messages of the conversation. Write the updated list: keep "
    "the prior facts that are still true and add the new facts the user states about "
    "themselves, with names, numbers and dates. One fact per line as a short sentence about "
    "the user; no questions, requests or advice. If there is no fact, write NONE."
)

_SUMMARY_SYSTEM = (
    f"{SUMMARY_MARKER} You summarize what the user said in a conversation with an assistant. "
    "Write exactly one sentence about the user that captures the conversation. "
    "Write only that sentence."
)

_SUMMARY_UPDATE_SYSTEM = (
    f"{SUMMARY_MARKER} You maintain a one-sentence summary of what the user said in a "
    "conversation with an assistant. You are given the prior summary and the user's messages. "
    "Rewrite the summary as exactly one sentence about the user that reflects the messages, "
    "keeping what is still true. Write only that sentence."
)

_RESPOND_SYSTEM = (
    f"{RESPOND_MARKER} You are a helpful personal assistant with a long-term memory of earlier "
    "conversations with this user. Use the relevant memories when they help to answer the "
    "question. Answer briefly."
)

_TURNS = f"{TURNS_HEADER}\n{{turns}}"
_PRIOR = f"{PRIOR_HEADER}\n{{prior}}"

FACTS_PROMPT = ChatPromptTemplate.from_messages([("system", _FACTS_SYSTEM), ("human", _TURNS)])
"""S=1 key facts. Variables: ``turns`` (:func:`format_items` of the user-turn texts)."""

FACTS_UPDATE_PROMPT = ChatPromptTemplate.from_messages(
    [("system", _FACTS_UPDATE_SYSTEM), ("human", f"{_PRIOR}\n\n{_TURNS}")]
)
"""S=1 rolling update. Variables: ``prior`` (formatted prior facts), ``turns``."""

SUMMARY_PROMPT = ChatPromptTemplate.from_messages([("system", _SUMMARY_SYSTEM), ("human", _TURNS)])
"""S=2 one-sentence summary. Variables: ``turns``."""

SUMMARY_UPDATE_PROMPT = ChatPromptTemplate.from_messages(
    [("system", _SUMMARY_UPDATE_SYSTEM), ("human", f"{_PRIOR}\n\n{_TURNS}")]
)
"""S=2 rolling update. Variables: ``prior`` (formatted prior summary), ``turns``."""

RESPOND_PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", _RESPOND_SYSTEM),
        ("human", f"{MEMORIES_HEADER}\n{{memories}}\n\n{QUESTION_HEADER} {{question}}"),
    ]
)
"""Responder. Variables: ``memories`` (:func:`format_items` of the chunk texts), ``question``."""


def facts_prompt(turns: Sequence[str], prior: Sequence[str] | None = None) -> PromptValue:
    """The S=1 prompt filled with ``turns`` (user-turn texts) and, if given, ``prior`` facts.

    ``prior=None`` selects :data:`FACTS_PROMPT`, a list :data:`FACTS_UPDATE_PROMPT`.
    """
    if prior is None:
        return FACTS_PROMPT.invoke({"turns": format_items(turns)})
    return FACTS_UPDATE_PROMPT.invoke({"turns": format_items(turns), "prior": format_items(prior)})


def summary_prompt(turns: Sequence[str], prior: Sequence[str] | None = None) -> PromptValue:
    """The S=2 prompt filled with ``turns`` and, if given, the ``prior`` summary texts.

    ``prior=None`` selects :data:`SUMMARY_PROMPT`, a list :data:`SUMMARY_UPDATE_PROMPT`.
    """
    if prior is None:
        return SUMMARY_PROMPT.invoke({"turns": format_items(turns)})
    return SUMMARY_UPDATE_PROMPT.invoke(
        {"turns": format_items(turns), "prior": format_items(prior)}
    )


def respond_prompt(question: str, memories: Sequence[str]) -> PromptValue:
    """:data:`RESPOND_PROMPT` filled with the ``question`` and the memory texts (retrieval order)."""
    return RESPOND_PROMPT.invoke({"question": question, "memories": format_items(memories)})


# --------------------------------------------------------------------------- output parsers

_BULLET = re.compile(r"^\s*(?:[-*\u2022\u2023\u25e6\u2043\u2219+>]+|\(?\d{1,3}[.):])\s+")
_NONE = re.compile(
    r"^(?:none|n/?a|no (?:key |personal |new )?facts?\b.*|nothing(?: to (?:report|extract|add))?)[.!]?$",
    re.IGNORECASE,
)


def _clean_line(line: str) -> str:
    line = line.strip()
    prev = None
    while prev != line:  # "1. - **fact**" -> "fact"
        prev = line
        line = _BULLET.sub("", line).strip()
        if line.startswith("**") and line.endswith("**") and len(line) > 4:
            line = line[2:-2].strip()
    return line


def parse_fact_lines(text: str) -> list[str]:
    """Parse an S=1 model output into facts.

    One fact per non-empty line. Leading bullets (``-``, ``*``, ``•``, ``+``, ``>``),
    numbering (``1.``, ``2)``, ``(3)``, ``a.``) and surrounding ``**bold**`` are removed;
    lines ending with ``:`` (preambles such as ``"Here are the facts:"``) and lines
    saying there is nothing (``NONE``, ``N/A``, ``No facts ...``) are dropped;
    exact duplicates are dropped (first kept).

    Returns:
        The facts in output order.
    """
    out: list[str] = []
    for raw in text.replace("\r", "\n").split("\n"):
        line = _clean_line(raw)
        if not line or line.endswith(":") or _NONE.match(line) or line in out:
            continue
        out.append(line)
    return out


def parse_summary(text: str) -> str | None:
    """Parse an S=2 model output: its first non-empty line that is not a preamble.

    Bullets, numbering and bold are removed as in :func:`parse_fact_lines`.

    Returns:
        The sentence, or ``None`` when the output holds none.
    """
    facts = parse_fact_lines(text)
    return facts[0] if facts else None
