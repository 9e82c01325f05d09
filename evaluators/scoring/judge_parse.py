"""Read an LLM judge's yes/no verdict from its reply text: the *final explicit* verdict,
or ``None`` ("unparsed") when the reply has none.

Judges answer in many shapes: they echo the question ("Yes or no: no"), negate a yes
("so I cannot say yes"), reason first and decide last, wrap the verdict in markdown,
or answer in the conversation's language. Taking the first ``yes``/``no`` word reads
yes out of replies that say no; this parse takes only what is stated as a verdict and
the last such statement. Steps of :func:`parse_verdict`, in order:

1. **Reasoning blocks.** ``<think>…</think>`` is removed, an unclosed ``<think>`` up
   to the end, and everything before a ``</think>`` that has no opening tag.
2. **Structured replies.** A reply holding a JSON object (``{"key": …``) or a line
   opening with an unquoted ``correct``/``is_correct`` ``:``/``=`` is structured, and
   only its verdict keys decide: ``correct``/``is_correct``/``verdict``/``answer``
   (quoted; ``correct``/``is_correct`` also unquoted). Each such value must be a
   boolean (``true``/``false``) or a string that is exactly ``yes``/``no``/``true``/
   ``false`` (any case, outer blanks aside), and all of them must agree; anything else
   (``"incorrect"``, ``"yes, wait no"``, ``1``, a value cut short, no verdict key at
   all) makes the reply unparsed. A structured reply is never read from its prose
   (the words of a ``reason`` do not count).
3. **Markup.** Markdown emphasis, code ticks, headings and quotes are removed
   (``**No**``, ``"yes"``, ``\\boxed{no}``); the text is NFKC-normalised.
4. **Echoes.** A pair of verdict words naming the choice (``yes or no``, ``yes/no``,
   ``no or yes``, ``yes and no``, ``oui ou non``, ``sí o no``, ``ja oder nein`` …) is
   removed: it states no verdict.
5. **Negated yes.** ``not``/``never``/``cannot``/``can't``/``won't``/``wouldn't``/
   ``isn't``/``don't``/``doesn't`` up to four words before ``yes``, with no digit,
   punctuation or ``but``/``so``/``yet``/``though``/``however``/``still``/``and``/``or``
   between ("cannot say yes", "not a clear yes", "don't think the answer is yes") is a
   *no* verdict where the ``yes`` stands; a ``no`` negated the same way ("I would not
   say no") is left unread.
6. **Explicit verdict words** (:data:`YES_WORDS`, :data:`NO_WORDS`: English, Spanish,
   Italian, French, German, Portuguese, Dutch, Russian, Japanese, Chinese; a judge that
   answers in the conversation's language): a verdict word counts only where it is
   stated as a verdict, i.e. (a) it starts the text, a line or a sentence, or follows
   a comma, a colon, a bracket, a dash or ``=`` or a lead-in (``so``, ``but``,
   ``thus``, ``therefore``, ``hence``, ``then``, ``is``, ``be``, ``say``, ``answer``,
   ``verdict``, ``judgement``, ``grade``, ``decision``, ``result``, ``final``), and (b)
   it ends the text or is followed by punctuation, a dash, or a word opening a reason
   or clause (``because``, ``since``, ``as``, ``given``, ``the``, ``it``, ``this``,
   ``that``, ``they``, ``there``, ``its``, ``i``, ``we``, ``you``, ``he``, ``she``). A
   sentence-initial ``Yes``/``Sí``/``Oui``/``Ja`` … may be followed by anything (not
   bare ``si``, Spanish "if"). So "No information was given" and "there is no match"
   state no verdict, "No, the reply says 19 days" does.
7. **Labelled words.** After a label (``Answer:``, ``Verdict:``, ``Judgement:``,
   ``Grade:``, ``Final answer:`` …) or as the whole reply, ``correct``/``true``/
   ``right`` are yes and ``incorrect``/``false``/``wrong`` no; "the reply/response/
   answer is [not] correct|incorrect|right|wrong" is a verdict too (a negated
   ``incorrect`` is left unread).
8. The **last** verdict of steps 5–7 in the text decides (a judge that reasons
   and then concludes: "Yes at first sight … but 12 ≠ 9. No."). None → ``None``.

Source: replies of the shapes reported against LLM-judge harnesses; the
prompt it reads is :data:`evaluators.scoring.judge.JUDGE_PROMPTS`.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["NO_WORDS", "YES_WORDS", "parse_verdict"]

YES_WORDS = frozenset({"yes", "yeah", "yep", "yup", "sí", "si", "sì", "oui", "ja", "sim", "да", "はい", "是", "是的", "对"})
"""Words read as a yes verdict (lower-case; English and nine other languages)."""

NO_WORDS = frozenset({"no", "nope", "nah", "non", "nein", "não", "nao", "nee", "нет", "いいえ", "否", "不是"})
"""Words read as a no verdict (lower-case; ``no`` is also Spanish and Italian)."""

_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_THINK_OPEN = re.compile(r"<think>.*\Z", re.S | re.I)
_THINK_CLOSE = re.compile(r"\A.*?</think>", re.S | re.I)
_STRUCTURED = re.compile(
    r"""\{\s*["'][^"'\n]{1,80}["']\s*:|(?:^|[{,])[ \t]*(?:correct|is_correct)[ \t]*[:=]""", re.I | re.M
)
_KEY = re.compile(
    r"""["'](?:correct|is_correct|verdict|answer)["']\s*:\s*|(?:^|[{,])[ \t]*(?:correct|is_correct)[ \t]*[:=][ \t]*""",
    re.I | re.M,
)
_VALUE = re.compile(
    r"""(true|false)(?=\s*(?:[,}\n]|\Z))|"([^"\\\n]*)"|'([^'\\\n]*)'|(yes|no)(?=[ \t]*(?:[,}\n]|\Z))""", re.I
)
_VALUE_WORDS = frozenset({"yes", "no", "true", "false"})
"""The whole values a structured verdict key may hold (besides JSON booleans)."""
_MARKUP = re.compile(r"\*\*|__|`+|^#+\s*|\\boxed|\\text", re.M)
_QUOTE = re.compile(r"""["“”«»„]|(?<!\w)['‘’]|['‘’](?!\w)""")


def _alternation(words: frozenset[str]) -> str:
    return "|".join(sorted((re.escape(w) for w in words), key=len, reverse=True))


_YES = _alternation(YES_WORDS)
_NO = _alternation(NO_WORDS)
_ANY = _alternation(YES_WORDS | NO_WORDS)
_ECHO = re.compile(
    rf"(?<!\w)(?:{_ANY})\s*(?:/|\bor\b|\band\b|\bo\b|\bou\b|\boder\b|\bof\b|\bили\b|\be\b|\bet\b|\bund\b)\s*(?:{_ANY})(?!\w)",
    re.I,
)
_NEGATED_YES = re.compile(
    rf"\b(?:not|never|cannot|can['’]?t|won['’]?t|wouldn['’]?t|couldn['’]?t|shouldn['’]?t|isn['’]?t|"
    rf"don['’]?t|doesn['’]?t)\s+(?:(?!(?:but|so|yet|though|although|however|still|and|or)\b)[^\W\d_]+\s+){{0,4}}?"
    rf"(?:{_YES})(?!\w)",
    re.I,
)
_NEGATED_NO = re.compile(_NEGATED_YES.pattern.replace(f"(?:{_YES})", f"(?:{_NO})"), re.I)
_WORD = re.compile(rf"(?<!\w)({_ANY})(?!\w)", re.I)
_LEAD = re.compile(
    r"(?:\A|[.,!?\n:;(\[{=>\-–—…]|\b(?:so|but|thus|therefore|hence|then|is|be|say|answer|verdict|"
    r"judgement|judgment|grade|decision|result|final))\s*,?\s*\Z",
    re.I,
)
_SENTENCE_START = re.compile(r"(?:\A|[.!?\n]|\.\.\.)\s*\Z")
_FOLLOW = re.compile(
    r"\s*(?:\Z|[.,!?;:)\]}\n—–…]|\s-\s|(?:because|since|as|given|the|it|this|that|they|there|its|i|we|you|he|she)\b)",
    re.I,
)
_LABEL = re.compile(
    r"(?:^|[\s(\[])(?:final\s+)?(?:answer|verdict|judgement|judgment|grade|decision|result|output|label)"
    r"\s*(?:is\s*)?[:=\-]?\s*(correct|incorrect|true|false|right|wrong)\b",
    re.I,
)
_REPLY_IS = re.compile(
    r"\b(?:reply|response|answer)\s+is\s+(not\s+)?(correct|incorrect|right|wrong)\b", re.I
)
_WHOLE = re.compile(r"\W*(correct|incorrect|true|false|right|wrong)\W*", re.I)
_POSITIVE = frozenset({"correct", "true", "right", "yes"})
_FREE_START = frozenset({"yes", "yeah", "yep", "yup", "sí", "sì", "oui", "ja", "sim", "да", "はい", "是的"})
"""Yes words that state a verdict at a sentence start whatever follows ("Yes the reply
matches"); bare ``si`` is also Spanish "if" and needs a following punctuation mark."""


def _strip(reply: str) -> str:
    text = _THINK.sub(" ", reply)
    text = _THINK_OPEN.sub(" ", text)
    text = _THINK_CLOSE.sub(" ", text)
    return text


def _structured_verdict(text: str) -> bool | None:
    """The verdict of a structured reply (step 2): every verdict key's value is a
    boolean or exactly one of :data:`_VALUE_WORDS`, and all agree; else ``None``."""
    verdicts = set()
    for key in _KEY.finditer(text):
        m = _VALUE.match(text, key.end())
        if m is None:
            return None  # a number, null, an object, a value cut short
        value = next(g for g in m.groups() if g is not None).strip().lower()
        if value not in _VALUE_WORDS:
            return None  # "incorrect", "yes, wait no", "probably"
        verdicts.add(value in _POSITIVE)
    return verdicts.pop() if len(verdicts) == 1 else None


def parse_verdict(reply: str) -> bool | None:
    """The final explicit verdict of a judge's reply (module doc, steps 1–8).

    Args:
        reply: the judge model's text.

    Returns:
        ``True`` (yes), ``False`` (no), or ``None`` when the reply states no clear
        verdict ("unparsed": it is never read as yes).

    Raises:
        TypeError: ``reply`` is not a string.

    ``"Yes or no: no"`` → False; ``"The reply gives 12 days, not 9, so I cannot say
    yes. No."`` → False; ``"**Verdict:** yes"`` → True; ``"No information is given."``
    → None.
    """
    if not isinstance(reply, str):
        raise TypeError(f"parse_verdict: reply must be a string, got {type(reply).__name__}")
    text = _strip(reply)
    if _STRUCTURED.search(text):  # a structured reply: its keys decide, never its prose
        return _structured_verdict(text)
    events: list[tuple[int, bool]] = []
    text = unicodedata.normalize("NFKC", text)
    text = _MARKUP.sub("", text)
    text = _QUOTE.sub("", text)
    text = _ECHO.sub(" ", text)
    negated: list[tuple[int, int]] = []
    for m in _NEGATED_YES.finditer(text):
        negated.append(m.span())
        events.append((m.end(), False))
    negated += [m.span() for m in _NEGATED_NO.finditer(text)]  # "would not say no": unread
    for m in _WORD.finditer(text):
        if any(a <= m.start() < b for a, b in negated):
            continue
        word = m.group(1).lower()
        before, after = text[: m.start()], text[m.end():]
        sentence_start = _SENTENCE_START.search(before) is not None
        if not _LEAD.search(before):
            continue
        if not (_FOLLOW.match(after) or (sentence_start and word in _FREE_START)):
            continue
        events.append((m.end(), word in YES_WORDS))
    for m in _LABEL.finditer(text):
        events.append((m.end(), m.group(1).lower() in _POSITIVE))
    for m in _REPLY_IS.finditer(text):
        positive = m.group(2).lower() in _POSITIVE
        if m.group(1) and not positive:
            continue  # "is not incorrect": left unread
        events.append((m.end(), positive != bool(m.group(1))))
    whole = _WHOLE.fullmatch(text.strip())
    if whole:
        events.append((len(text), whole.group(1).lower() in _POSITIVE))
    if not events:
        return None
    return max(events, key=lambda e: e[0])[1]
