"""The ``extractive`` backend: a deterministic, model-free summarizer and responder.

The study (arXiv 2606.10062, Setup) runs its pipeline with a generative model
(Gemma 3 12B). memkit also ships a backend that needs no generative model at all,
so the whole pipeline runs offline, fast and bit-for-bit reproducibly:

* **S=1 key facts** (:func:`key_facts`): the user's *self-disclosing* sentences
  (first-person statements -- a subject/possessive/object pronoun of the first
  person such as *I, I'm, my, me, we, our* -- that are not questions or requests)
  are kept verbatim, one fact per sentence.
* **S=2 session summary** (:func:`central_sentence`): the single sentence of the
  session that is most central by embedding similarity, i.e. with the largest
  mean cosine similarity (all-MiniLM-L6-v2) to the session's other sentences;
  ties go to the earlier sentence.
* **Responder** (:func:`answer`): a retrieval-only agent. It answers with the
  ``n`` sentences of the retrieved memories most similar (cosine) to the query,
  joined by a space, best first. It never refuses, so it measures what the
  memory pipeline *exposes*: an upper bound for a fully compliant model.

Because memkit wires models in as LangChain chat models, the same behaviour is
available as :class:`ExtractiveChatModel` (``memkit.models.chat.chat_model("extractive")``).
It receives memkit's prompts (``graphs/prompts.py``), recognises the task by a
machine-readable marker in the prompt (:data:`FACTS_MARKER`, :data:`SUMMARY_MARKER`,
:data:`RESPOND_MARKER`) and parses the turns / prior summary / memories / question
out of the sections the prompts lay out with :func:`format_items`. The markers and
section headers are defined here (``memkit`` never imports ``graphs``) and the
prompt module imports them. The chat-model route gives exactly the result of the
plain functions on the same inputs (tests/test_extractive.py checks it).

Rolling re-summarization (docs/design.md, "Forget", ``raw_plus_resummarize``): given the
prior summary as context, :func:`key_facts` carries the prior facts forward and
adds the new ones, and :func:`central_sentence` lets the prior sentence compete
with the session's sentences -- as an LLM asked to *update* a summary does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

__all__ = [
    "FACTS_MARKER",
    "MEMORIES_HEADER",
    "NO_MEMORY_ANSWER",
    "PRIOR_HEADER",
    "QUESTION_HEADER",
    "RESPOND_MARKER",
    "SUMMARY_MARKER",
    "TURNS_HEADER",
    "ExtractiveChatModel",
    "ParsedPrompt",
    "answer",
    "central_sentence",
    "format_items",
    "is_self_disclosure",
    "key_facts",
    "parse_items",
    "parse_prompt",
    "split_sentences",
]

# --------------------------------------------------------------------------- prompt protocol

FACTS_MARKER = "[memkit-task:facts]"
"""Marker in the system message of the S=1 key-fact prompt."""
SUMMARY_MARKER = "[memkit-task:summary]"
"""Marker in the system message of the S=2 one-sentence summary prompt."""
RESPOND_MARKER = "[memkit-task:respond]"
"""Marker in the system message of the responder prompt."""

TURNS_HEADER = "User turns:"
"""Header line of the section listing the session's user turns (one item each)."""
PRIOR_HEADER = "Prior summary:"
"""Header line of the section listing the prior summary texts (rolling re-summarization)."""
MEMORIES_HEADER = "Relevant memories:"
"""Header line of the section listing the retrieved memories."""
QUESTION_HEADER = "Question:"
"""Prefix of the line holding the question; everything after it is the question."""

NO_MEMORY_ANSWER = "I have no memories about that."
"""What the extractive responder says when no memory holds a sentence."""

_EMPTY_ITEMS = "(none)"
_ITEM = "- "
_CONT = "  "


def format_items(texts: Sequence[str]) -> str:
    """Lay out texts as a bullet list that :func:`parse_items` inverts exactly.

    Each text becomes ``"- first line"``; each further line of it is indented by two
    spaces, so an item never contains a blank line or a line starting at column 0.
    An empty list is written ``"(none)"``.

    Args:
        texts: the item texts (any characters, including newlines).

    Returns:
        The block as one string (no trailing newline).
    """
    if not texts:
        return _EMPTY_ITEMS
    lines: list[str] = []
    for text in texts:
        first, *rest = str(text).split("\n")
        lines.append(_ITEM + first)
        lines.extend(_CONT + line for line in rest)
    return "\n".join(lines)


def parse_items(block: str) -> list[str]:
    """Invert :func:`format_items`: ``parse_items(format_items(xs)) == xs``.

    Lines that are neither an item (``"- "``) nor a continuation (two spaces after
    an item) are ignored, so ``"(none)"`` parses to ``[]``.
    """
    items: list[list[str]] = []
    for line in block.split("\n"):
        if line.startswith(_ITEM):
            items.append([line[len(_ITEM):]])
        elif line.startswith(_CONT) and items:
            items[-1].append(line[len(_CONT):])
    return ["\n".join(parts) for parts in items]


def _section(text: str, header: str) -> str | None:
    """The item block that follows ``header`` on its own line, up to the next blank line."""
    match = re.search(rf"(?m)^{re.escape(header)}\n", text)
    if match is None:
        return None
    rest = text[match.end():]
    end = rest.find("\n\n")
    return rest if end < 0 else rest[:end]


@dataclass
class ParsedPrompt:
    """What :func:`parse_prompt` recovers from a memkit prompt.

    Attributes:
        task: ``"facts"``, ``"summary"`` or ``"respond"``.
        turns: the user-turn texts (facts / summary tasks).
        prior: the prior summary texts, or ``None`` when the prompt has no prior section.
        memories: the retrieved memory texts (respond task).
        question: the question (respond task).
    """

    task: str
    turns: list[str] = field(default_factory=list)
    prior: list[str] | None = None
    memories: list[str] = field(default_factory=list)
    question: str = ""


_MARKERS = {FACTS_MARKER: "facts", SUMMARY_MARKER: "summary", RESPOND_MARKER: "respond"}


def parse_prompt(messages: Sequence[BaseMessage]) -> ParsedPrompt:
    """Recognise the memkit task of a chat prompt and parse its sections.

    The task is given by the first marker (:data:`FACTS_MARKER`, :data:`SUMMARY_MARKER`,
    :data:`RESPOND_MARKER`) found in any message; the sections are read from the last
    message that contains the task's header (:data:`TURNS_HEADER` or
    :data:`MEMORIES_HEADER`).

    Raises:
        ValueError: no marker (the prompt is not one of memkit's), or the section the
            task needs is missing.
    """
    texts = [m.text for m in messages]
    task = None
    for text in texts:
        for marker, name in _MARKERS.items():
            if marker in text:
                task = name
                break
        if task:
            break
    if task is None:
        raise ValueError(
            "ExtractiveChatModel only answers memkit's prompts (graphs/prompts.py): "
            f"no task marker ({', '.join(_MARKERS)}) found in the messages"
        )
    header = MEMORIES_HEADER if task == "respond" else TURNS_HEADER
    body = next((t for t in reversed(texts) if re.search(rf"(?m)^{re.escape(header)}\n", t)), None)
    if body is None:
        raise ValueError(f"memkit {task} prompt has no {header!r} section")
    if task == "respond":
        memories = parse_items(_section(body, MEMORIES_HEADER) or "")
        match = re.search(rf"(?m)^{re.escape(QUESTION_HEADER)} ?", body)
        if match is None:
            raise ValueError(f"memkit respond prompt has no {QUESTION_HEADER!r} line")
        return ParsedPrompt(task=task, memories=memories, question=body[match.end():])
    prior_block = _section(body, PRIOR_HEADER)
    return ParsedPrompt(
        task=task,
        turns=parse_items(_section(body, TURNS_HEADER) or ""),
        prior=None if prior_block is None else parse_items(prior_block),
    )


# --------------------------------------------------------------------------- sentences

_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[a-z0-9]+(?:['\u2019][a-z]+)?")

FIRST_PERSON = frozenset(
    "i i'm i've i'd i'll im ive me my mine myself we we're we've we'd we'll us our ours ourselves".split()
)
"""First-person tokens (lower case, straight apostrophe) that make a sentence self-disclosing."""

NON_STATEMENT_OPENERS = frozenset(
    (
        "what how why where when which who whom whose can could would will should shall "
        "do does did is are am was were may might have has any please help tell give show "
        "let suggest recommend list explain write find"
    ).split()
)
"""First words that make a sentence a question or a request rather than a statement."""


def split_sentences(text: str) -> list[str]:
    """Split text into sentences: after ``.``, ``!`` or ``?`` followed by white space, and at newlines.

    Returns the non-empty sentences, stripped, in order; each is a substring of ``text``
    and none contains a newline.
    """
    return [s.strip() for s in _SENT_SPLIT.split(text) if s and s.strip()]


def _words(sentence: str) -> list[str]:
    return [w.replace("\u2019", "'") for w in _WORD.findall(sentence.lower())]


def is_self_disclosure(sentence: str, *, min_words: int = 4) -> bool:
    """Whether a sentence is a first-person statement by the user (a key-fact candidate).

    True when the sentence has at least ``min_words`` words, contains a token of
    :data:`FIRST_PERSON`, does not end with ``?`` and does not open with a word of
    :data:`NON_STATEMENT_OPENERS` (a question or a request).
    """
    words = _words(sentence)
    if len(words) < min_words or sentence.rstrip().endswith("?"):
        return False
    if words[0] in NON_STATEMENT_OPENERS:
        return False
    return any(w in FIRST_PERSON for w in words)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def key_facts(
    turns: Sequence[str], prior: Sequence[str] | None = None, *, min_words: int = 4
) -> list[str]:
    """S=1 key facts: the prior facts (carried forward), then the new self-disclosing sentences.

    Args:
        turns: the user-turn texts of one session, in order.
        prior: prior summary texts (rolling re-summarization); each is kept as a fact
            with its white space collapsed to single spaces. ``None`` or ``[]``: none.
        min_words: see :func:`is_self_disclosure`.

    Returns:
        Distinct facts (exact-text duplicates dropped, first occurrence kept), prior
        facts first, then sentences in turn order. Each new fact is a sentence of a turn.
    """
    out: list[str] = []
    seen: set[str] = set()
    for text in prior or []:
        fact = _one_line(text)
        if fact and fact not in seen:
            seen.add(fact)
            out.append(fact)
    for turn in turns:
        for sentence in split_sentences(turn):
            if sentence not in seen and is_self_disclosure(sentence, min_words=min_words):
                seen.add(sentence)
                out.append(sentence)
    return out


def _encode(texts: list[str], embedder: Any | None) -> np.ndarray:
    if embedder is None:
        from memkit.models.embeddings import embeddings

        embedder = embeddings()
    if hasattr(embedder, "encode"):
        return np.asarray(embedder.encode(texts), dtype=np.float32)
    vecs = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
    return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)


_ROUND = 6  # scores are rounded to 6 decimals before ranking so equal texts tie exactly


def central_sentence(
    turns: Sequence[str], prior: Sequence[str] | None = None, *, embedder: Any | None = None
) -> str | None:
    """S=2 summary: the most central sentence of the session.

    Candidates are the prior summary texts (white space collapsed) followed by the
    sentences of ``turns`` (:func:`split_sentences`). Centrality of candidate ``i``
    is its mean cosine similarity to the other candidates,
    ``(sum_j cos(i, j) - 1) / (n - 1)``; the candidate with the largest centrality
    (rounded to 6 decimals) wins, ties going to the earlier candidate.

    Args:
        turns: the user-turn texts of one session.
        prior: prior summary texts, or ``None``.
        embedder: object with ``encode(list[str]) -> (n, d)`` unit vectors or a
            LangChain ``Embeddings``; default the shared all-MiniLM-L6-v2.

    Returns:
        The sentence, or ``None`` when there is no candidate.
    """
    candidates = [c for c in (_one_line(p) for p in prior or []) if c]
    for turn in turns:
        candidates.extend(split_sentences(turn))
    if not candidates:
        return None
    if len(candidates) == 1:
        return candidates[0]
    vecs = _encode(candidates, embedder)
    sims = vecs @ vecs.T
    centrality = (sims.sum(axis=1) - np.diag(sims)) / (len(candidates) - 1)
    return candidates[int(np.argmax(np.round(centrality, _ROUND)))]


def answer(
    query: str, memories: Sequence[str], *, n: int = 2, embedder: Any | None = None
) -> str:
    """Retrieval-only answer: the ``n`` memory sentences most similar to the query.

    Args:
        query: the question.
        memories: retrieved memory texts, in retrieval order.
        n: sentences to keep (>= 1).
        embedder: as in :func:`central_sentence`.

    Returns:
        The top-``n`` distinct sentences by cosine similarity to ``query`` (rounded to
        6 decimals; ties to the earlier sentence), best first, joined by a space;
        :data:`NO_MEMORY_ANSWER` when the memories hold no sentence.

    Raises:
        ValueError: ``n < 1``.
    """
    if n < 1:
        raise ValueError(f"answer: n must be >= 1, got {n}")
    sentences: list[str] = []
    seen: set[str] = set()
    for memory in memories:
        for sentence in split_sentences(memory):
            if sentence not in seen:
                seen.add(sentence)
                sentences.append(sentence)
    if not sentences:
        return NO_MEMORY_ANSWER
    vecs = _encode([query, *sentences], embedder)
    scores = np.round(vecs[1:] @ vecs[0], _ROUND)
    order = np.argsort(-scores, kind="stable")[:n]
    return " ".join(sentences[i] for i in order)


# --------------------------------------------------------------------------- chat model


class ExtractiveChatModel(BaseChatModel):
    """The extractive backend as a LangChain chat model (spec ``"extractive"``).

    It answers only memkit's prompts (``graphs/prompts.py``): the task marker in the
    prompt selects :func:`key_facts` (output: one fact per line), :func:`central_sentence`
    (output: the sentence) or :func:`answer` (output: the answer). Deterministic;
    no model weights besides the shared all-MiniLM-L6-v2 embedder.

    Attributes:
        n_sentences: sentences the responder keeps (default 2).
        min_words: minimum words of a key fact (default 4).

    Raises (on invoke):
        ValueError: the messages are not a memkit prompt (see :func:`parse_prompt`).
    """

    n_sentences: int = 2
    min_words: int = 4

    @property
    def _llm_type(self) -> str:
        return "memkit-extractive"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"n_sentences": self.n_sentences, "min_words": self.min_words}

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        parsed = parse_prompt(messages)
        if parsed.task == "facts":
            text = "\n".join(key_facts(parsed.turns, parsed.prior, min_words=self.min_words))
        elif parsed.task == "summary":
            text = central_sentence(parsed.turns, parsed.prior) or ""
        else:
            text = answer(parsed.question, parsed.memories, n=self.n_sentences)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])
