"""PR's default answer rule, ``rule="lme"``: a rule that agrees with LongMemEval's judge.

The study's rule (``rule="study"``, :func:`evaluators.metrics.score_answers`) counts an
answer correct when cosine(answer, reference) > 0.50 or every content word of the
reference is a token of the answer. Checked against LongMemEval's official judging
semantics (``evaluate_qa.py`` of the LongMemEval repository: a yes/no judge per
question type), it is wrong in whole classes of cases: number words are stop words,
a negated mention counts, a confident made-up answer to an abstention question counts,
and a different answer of the same kind passes the cosine. This module holds the
text side of the rule that fixes these classes; :func:`evaluators.metrics.score_answers`
embeds the texts and calls :func:`lme_verdict` with the cosine.

The ``lme`` rule, in order (each step is a function below; docs/metrics.md spells
out every form and cue):

1. **Abstention** (:func:`abstains`): for a question id ending ``_abs`` the answer is
   correct iff it abstains (says the information is not available, was not mentioned,
   was not shared, cannot be found, or that it does not know) and declines to give
   the fact; any specific answer is wrong, and so is a doubt beside a specific value:
   a number, a name, or a guess ("I don't remember exactly, but maybe your cat is
   called Miso."). For other questions an abstaining answer is never rescued by the
   cosine.
2. **Numbers** (:func:`normalize_numbers`): on both sides number words become digits
   (``text2num``'s ``alpha2digit``, threshold 0, piecewise on long texts), ordinals,
   money, percent, ``k``/``million``, ``and a half``, ``a dozen``, signs, clock times
   (24 h), ISO dates, Roman numerals after a capitalised word and ``No. 5`` are put in
   one form, and numbers compare by exact value (``Decimal``). When the reference holds
   numbers, the answer is correct iff every one of them occurs in a non-negated clause
   of the answer *with the reference's unit* (:func:`_number_found`: the word after the
   number, or the noun a "How many …" question counts, is not replaced by another; a
   duration has no extra part), so do the reference's key words (step 4: ``GR`` of
   ``GR-90``); the cosine never decides. For ``temporal-reasoning`` questions a count
   of days may be off by one (LongMemEval's judge tolerates it); other numbers are exact.
3. **Negation** (:func:`affirmed_tokens`): the answer is split into clauses (at ``. ;
   : ! ?``, commas, ``but``/``however``/``although``/``though``/``whereas``/``instead``/
   ``yet`` and ``and now|then|…``); inside a clause every token after a negation cue
   (``not``, ``no``, ``never``, ``n't`` forms, ``without``, ``neither``, ``nor``, and the
   rejections ``instead of``/``rather than``/``except``/``other than``) is negated and
   does not count as a match; a clause ``X was not …``/``X is wrong``/``X? No`` is
   negated whole; idioms (``no doubt``, ``none other than``, ``not only``) and an
   answering ``No,`` do not negate; a cue followed only by stop words is the answer.
4. **Content words** (:func:`key_words`): tokens of the reference minus a stop list
   that keeps answer-bearing words (scikit-learn's list without its number words and
   nouns such as ``bill``, ``fire``, ``name``, ``system``, ``first``, ``last``), compared
   as accent-folded Snowball (Porter2) stems. All present → correct. Otherwise, the same
   kind but a different entity must not pass: the answer is correct only when the
   reference is not a list (no comma, semicolon, ``&``, ``and``, ``or``: every item of a
   list counts), has at least three content words, at most a third of them are
   missing, none of the missing ones is a *key* word (written with a capital letter or
   a digit in the reference: a name, brand, code) or replaced by another content word
   (:func:`_substituted`), and the cosine exceeds the threshold.
5. **Alternatives** (:func:`offers_alternatives`): an answer that steps 2 or 4 would
   accept is wrong when it hedges over several candidates of the reference's kind.
6. **Preference rubrics** (``single-session-preference``, a reference of the form "The
   user would prefer …"): the rubric's own words (content words of its non-negated
   "prefer" sentences, minus the question's words and the rubric's boilerplate) are the
   evidence; the answer is correct iff it uses at least one of them and does not
   abstain (LongMemEval's rubric: the reply need not reflect every point, only recall
   and use the user's information correctly).
7. A reference without content words or numbers: its polar/quantifier word (``yes``,
   ``no``, ``both``, ``none`` …) must be in the answer; then the cosine alone decides.
8. **Knowledge updates** (:func:`stale_value`, checked whenever steps 2 or 4 would say
   correct for a ``knowledge-update`` question): the latest value is the answer, so an
   answer that gives another value as current is wrong even when it mentions the
   reference ("These days you drive a Honda Civic; the Toyota Corolla was your old
   car." for "Toyota Corolla"): a clause with another value of the reference's kind
   outranks (current > plain > past, by cues such as "now"/"these days" and "used
   to"/"your old") every clause that holds the reference.

Source: issues 13 and 26 and LongMemEval's official judging semantics (Wu et al., ICLR 2025,
``src/evaluation/evaluate_qa.py``); the agreement set ``tests/data/pr_agreement.csv``
and ``benchmarks/bench_pr_agreement.py`` measure the agreement.

Why this module is long: the rule is one ordered algorithm whose steps share one
tokenizer, one clause splitter and one negation scope (a number counts only in an
affirmed clause, an abstention only where no value is offered, a stale value only by
its clause's rank). Split into files, each step would import the others' private
patterns; kept together, each step reads next to the helpers it relies on.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache

import snowballstemmer
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
from text_to_num import alpha2digit

__all__ = [
    "ANSWER_BEARING",
    "LmeVerdict",
    "STOP_WORDS",
    "abstains",
    "affirmed_tokens",
    "key_words",
    "lme_verdict",
    "normalize_numbers",
    "number_values",
    "offers_alternatives",
    "stale_value",
]

ANSWER_BEARING = frozenset(
    {
        # number words (digits after normalisation, but kept if a parser leaves one)
        "one", "two", "three", "four", "five", "six", "eight", "nine", "ten", "eleven",
        "twelve", "fifteen", "twenty", "forty", "fifty", "sixty", "hundred", "first",
        "third", "last", "next", "few", "several", "none", "half",
        # nouns and adjectives that answer questions
        "bill", "fire", "system", "name", "front", "back", "top", "bottom", "full",
        "empty", "side", "interest", "detail", "amount", "thick", "thin", "mill", "part",
        "call", "move", "serious", "whole",
    }
)
"""Words in scikit-learn's ``ENGLISH_STOP_WORDS`` that can carry an answer; the
``lme`` rule keeps them as content words."""

STOP_WORDS = frozenset(ENGLISH_STOP_WORDS - ANSWER_BEARING)
"""The ``lme`` rule's stop list: scikit-learn's minus :data:`ANSWER_BEARING`."""

_TOKEN = re.compile(r"(?<![\w.])-\d+(?:[.,]\d+)*|\d+(?:[.,]\d+)*|[^\W\d_]+")
_POSSESSIVE = re.compile(r"(?<=\w)['’]s\b")
_APOSTROPHE = re.compile(r"(?<=\w)['’](?=\w)")
_THOUSANDS = re.compile(r"^\d{1,3}(?:,\d{3})+$")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
_ORDINAL = re.compile(r"\b(\d+)(?:st|nd|rd|th)\b", re.IGNORECASE)
_MONEY = re.compile(r"([$€£])\s?(\d[\d,]*(?:\.\d+)?)")
_CURRENCY = {"$": "dollars", "€": "euros", "£": "pounds"}
_PERCENT = re.compile(r"(\d)\s?%")
_CLAUSE = re.compile(
    r"[.;:!?\n]+(?:\s|$)|,\s|\s[-–—]\s|\b(?:but|however|although|though|whereas|instead|yet)\b"
    r"|\band\s+(?:now|then|later|currently|also)\b",
    re.IGNORECASE,
)
_NEGATION_CUES = frozenset(
    {
        "not", "no", "never", "without", "neither", "nor", "nothing", "none", "nobody",
        "cannot", "cant", "dont", "doesnt", "didnt", "isnt", "wasnt", "arent", "werent",
        "havent", "hasnt", "hadnt", "wont", "wouldnt", "couldnt", "shouldnt", "aint",
    }
)
_TIME_UNITS = frozenset({"second", "minut", "hour", "day", "week", "month", "year", "decad"})
_PREFERENCE = re.compile(r"\bprefer", re.IGNORECASE)
_RUBRIC_BOILERPLATE = frozenset(
    {
        "user", "prefer", "suggest", "suggestion", "response", "recommend", "recommendation",
        "like", "especi", "specif", "particular", "util", "use", "incorpor", "highlight",
        "showcas", "emphas", "emphasi", "focus", "relat", "relev", "includ", "mention",
        "previous", "past", "tailor", "align", "consid", "option", "idea", "tip", "element",
        "experi", "interest", "their", "might", "would", "also", "ingredi", "thing",
        "advic", "approach", "provid", "general", "generic", "recip", "dish", "meal",
    }
)
_ABSTAIN = re.compile(
    r"\b(?:"
    r"(?:do|did|does)\s*n[o']?t\s+(?:know|have|recall|remember|see|find|mention|tell|say|share|specify|"
    r"provide|state|contain|include|appear)"
    r"|(?:don|didn|doesn)['’]?t\s+(?:know|have|recall|remember|see|find|mention|tell|say|share|specify|"
    r"provide|state|contain|include|appear)"
    r"|(?:have|has|had)\s*n[o']?t\s+(?:been\s+)?(?:mentioned|told|shared|said|specified|provided|stated|given|"
    r"discussed|talked)"
    r"|(?:haven|hasn|hadn)['’]?t\s+(?:been\s+)?(?:mentioned|told|shared|said|specified|provided|stated|"
    r"given|discussed|talked)"
    r"|(?:never|not)\s+(?:been\s+)?(?:mentioned|told|shared|said|specified|provided|stated|given|"
    r"discussed|talked|recorded|available)"
    r"|no\s+(?:information|record|records|mention|details?|data|memory|memories|way\s+to\s+know|"
    r"indication|evidence)"
    r"|not\s+enough\s+(?:information|info|detail|details|data|context|to\s+(?:answer|determine|tell|say|know))"
    r"|not\s+(?:sure|certain)(?!\s+(?:that\s+)?(?:you|if\s+you|whether\s+you)\b)|not\s+able"
    r"|not\s+something\s+(?:you(?:'ve|\s+have)?\s+)?(?:shared|mentioned|told|said|discussed)"
    r"|nothing\s+in\s+(?:our|your|the|my)\s+(?:chats?|conversations?|history|messages|notes|records)"
    r"|no\s+knowledge|(?:could|can)(?:\s*n[o']?t|not)\s+find|couldnt\s+find|impossible\s+to\s+(?:tell|say|know|determine)"
    r"|(?:conversations?|chats?|history|messages)\s+(?:do|does|did)\s*(?:n[o']?t|not)\s+"
    r"(?:cover|mention|include|say|contain|show)"
    r"|(?:but|and)\s+not\s+(?:your|the|any|its|their|his|her)\b"
    r"|unable\s+to|can(?:no|['’])t\s+(?:determine|tell|find|say|"
    r"know|answer|recall|confirm)|cannot\s+(?:determine|tell|find|say|know|answer|recall|confirm)"
    r"|(?:is|are|was)\s*n[o']?t\s+(?:mentioned|available|specified|provided|known|recorded|stated|clear)"
    r"|(?:isn|aren|wasn)['’]?t\s+(?:mentioned|available|specified|provided|known|recorded|stated|clear)"
    r"|(?:^|[.!?]\s+)(?:that(?:'s|\s+is)|it(?:'s|\s+is))\s+unknown|insufficient|unclear\s+from|no\s+idea|not\s+have\s+(?:that|this|any|enough)"
    r"|(?:but|and)\s+not\s+(?:how|what|when|where|which|who|whether|the\s+(?:number|amount|exact))"
    r"|(?:was|were|is|are)\s*n[o']?t\s+(?:shared|given|told)|(?:wasn|weren|isn|aren)'t\s+(?:shared|given|told)"
    r")\b",
    re.IGNORECASE,
)


@lru_cache(maxsize=1)
def _stemmer() -> snowballstemmer.stemmer:
    return snowballstemmer.stemmer("english")


_ALPHA2DIGIT_CHUNK = 400
"""Longest piece (characters) handed to ``alpha2digit`` at once: its cost grows with the
square of a run of number words, so long texts are converted piece by piece."""
_NUMBER_SIGN = re.compile(r"\b(?:No|no|NO)\.?\s*(?=\d)")
_PRONOUN_ONE = re.compile(
    r"\b((?:the|this|that|which|another|each|every|any|same|other)\s+(?:[^\W\d_]+\s+)?)one\b"
    r"(?=\s*(?:[.,;:!?)]|$|\b(?:of|that|which|you|i|we)\b))",
    re.IGNORECASE,
)
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MERIDIEM = re.compile(r"\b(\d{1,2})(?::(\d{2}))?\s*([ap])\.?\s?m\b\.?", re.IGNORECASE)
_SCALE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s?(k|K|thousand|million|billion)\b")
_SCALES = {"k": 1000, "K": 1000, "thousand": 1000, "million": 10**6, "billion": 10**9}
_FRACTION = re.compile(r"(\d+)\u2044([1-9]\d*)")
"""``1⁄2`` (fraction slash, what NFKC makes of ``½``) → ``0.5``."""
_BARE_DECIMAL = re.compile(r"(?<![\w.])\.(\d)")
_HALF = re.compile(r"\b(\d+) and a half\b", re.IGNORECASE)
_DOZEN = re.compile(r"\b(?:a|one)\s+dozen\b", re.IGNORECASE)
_MINUS = re.compile(r"\bminus\s+(?=\d)", re.IGNORECASE)
_LETTER_PREFIX = re.compile(r"\b([A-Za-z])-(?=[A-Za-z]{2,})")
_ROMAN = re.compile(r"\b([A-Z][a-z]+ )(?=[IVXL]{2})(L?X{0,3}(?:IX|IV|V?I{0,3}))\b")
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50}


def _roman(m: re.Match) -> str:
    text = m.group(2)
    values = [_ROMAN_VALUES[c] for c in text]
    total = sum(-v if i + 1 < len(values) and v < values[i + 1] else v for i, v in enumerate(values))
    return m.group(1) + str(total)


def _alpha2digit(text: str) -> str:
    """``alpha2digit`` (English, threshold 0) on pieces of at most
    :data:`_ALPHA2DIGIT_CHUNK` characters cut at whitespace."""
    if len(text) <= _ALPHA2DIGIT_CHUNK:
        return alpha2digit(text, "en", threshold=0)
    out, piece = [], []
    size = 0
    for word in re.split(r"(\s+)", text):
        piece.append(word)
        size += len(word)
        if size >= _ALPHA2DIGIT_CHUNK and word.isspace():
            out.append(alpha2digit("".join(piece), "en", threshold=0))
            piece, size = [], 0
    out.append(alpha2digit("".join(piece), "en", threshold=0))
    return "".join(out)


def _iso_date(m: re.Match) -> str:
    try:
        d = _dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return m.group(0)
    return f"{d:%B} {d.day}, {d.year}"


def _meridiem(m: re.Match) -> str:
    hour, minute = int(m.group(1)), int(m.group(2) or 0)
    if not 1 <= hour <= 12:
        return m.group(0)
    hour = hour % 12 + (12 if m.group(3).lower() == "p" else 0)
    return f"{hour}:{minute:02d}"


def _scale(m: re.Match) -> str:
    value = Decimal(m.group(1)) * _SCALES[m.group(2)]
    return _decimal_key(value)


def normalize_numbers(text: str) -> str:
    """``text`` with numbers in one form (module doc, step 2): number words → digits
    (``text2num.alpha2digit``, English, threshold 0, applied piecewise to long texts),
    ``21st`` → ``21``, ``$1,200`` → ``1200 dollars`` (``€`` euros, ``£`` pounds),
    ``42%`` → ``42 percent``, ``1,000`` → ``1000``, ``1.2k`` / ``1.2 million`` →
    ``1200`` / ``1200000``, ``two and a half`` → ``2.5``, ``a dozen`` → ``12``,
    ``minus 5`` → ``-5``, clock times to 24 h (``2:30 pm`` → ``14:30``, ``5 am`` →
    ``5:00``), ISO dates to ``March 15, 2023``, Roman numerals after a capitalised word
    (``World War II`` → ``World War 2``), ``No. 5`` → ``number 5``, ``e-mail`` →
    ``email``, and a pronoun ``one`` (``the blue one``) dropped.

    Args:
        text: any text.

    Raises:
        TypeError: ``text`` is not a string.

    Returns:
        The normalised text (NFKC).
    """
    if not isinstance(text, str):
        raise TypeError(f"expected a string, got {type(text).__name__}")
    text = unicodedata.normalize("NFKC", text)
    text = _NUMBER_SIGN.sub("number ", text)
    text = _PRONOUN_ONE.sub(r"\1", text)
    text = _LETTER_PREFIX.sub(r"\1", text)
    text = _ROMAN.sub(_roman, text)
    text = _DOZEN.sub("12", text)
    text = _FRACTION.sub(lambda m: _decimal_key(Decimal(m.group(1)) / Decimal(m.group(2))), text)
    text = _BARE_DECIMAL.sub(r"0.\1", text)
    text = _SCALE.sub(_scale, text)
    text = _alpha2digit(text)
    text = _HALF.sub(lambda m: f"{m.group(1)}.5", text)
    text = _MINUS.sub("-", text)
    text = _ISO_DATE.sub(_iso_date, text)
    text = _MERIDIEM.sub(_meridiem, text)
    text = _SCALE.sub(_scale, text)
    text = _MONEY.sub(lambda m: f"{m.group(2).replace(',', '')} {_CURRENCY[m.group(1)]}", text)
    text = _PERCENT.sub(r"\1 percent", text)
    return _ORDINAL.sub(r"\1", text)


def _raw_tokens(text: str) -> list[str]:
    """Tokens with their case: possessive ``'s`` dropped, inner apostrophes removed,
    ``1,000`` joined."""
    text = _POSSESSIVE.sub("", text)
    text = _APOSTROPHE.sub("", text)
    return [t.replace(",", "") if _THOUSANDS.match(t) else t for t in _TOKEN.findall(text)]


def _stem(token: str) -> str:
    """Snowball stem of a lower-cased, accent-folded token (NFKD without combining marks:
    ``Café`` and ``Cafe`` share a stem); number tokens become value keys."""
    token = "".join(c for c in unicodedata.normalize("NFKD", token.lower()) if not unicodedata.combining(c))
    if _NUMBER.match(token):
        return _number_key(token)
    return _stemmer().stemWord(token)


def _number_key(token: str) -> str:
    """A number token by value: ``38.0`` and ``38`` → ``"38"``; ``2.50`` → ``"2.5"``."""
    try:
        return _decimal_key(Decimal(token))
    except InvalidOperation:
        return token


def _decimal_key(value: Decimal) -> str:
    """Exact value key of a number: integral values without a fraction, others without
    trailing zeros (exact for any length, unlike ``float``)."""
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def number_values(text: str) -> list[str]:
    """The numbers of ``text`` after :func:`normalize_numbers`, as value keys in order
    (``"I have four, not 38.0"`` → ``["4", "38"]``)."""
    return [_number_key(t) for t in _raw_tokens(normalize_numbers(text)) if _NUMBER.match(t)]


_NOT_NEGATING = re.compile(
    r"\b(?:no\s+(?:doubt|wonder|question)|without\s+(?:a\s+)?(?:doubt|question)"
    r"|(?:none|nobody|no\s+one|nothing)\s+(?:other|else)\s+than|not\s+(?:only|just|merely|to\s+mention)"
    r"|(?:do|does|did|is|was|are|were)(?:n['’]?t|\s+not)\s+(?:only|just|merely))\b",
    re.IGNORECASE,
)
"""Idioms whose negation word does not negate what follows ("no doubt it was Tokyo",
"none other than Tokyo", "not only Tokyo but also Kyoto"): removed before scoping."""
_REJECT_BEFORE = re.compile(r"\b(?:instead\s+of|rather\s+than|except(?:\s+for)?|excluding|other\s+than)\b", re.I)
"""Cues that reject the phrase after them ("Osaka instead of Tokyo"): become ``not``."""
_REJECT_QUESTION = re.compile(r"(?:^|(?<=[.!?;\n]))([^.!?;\n]+)\?\s*(?:no|nope)\b", re.IGNORECASE)
"""A phrase questioned and then denied ("Tokyo? No, Osaka."): the phrase is negated."""
_INTERJECTION_NO = re.compile(
    r"(^|[.!?;]\s+)(?:no|nope)\b(?=\s*,|\s+(?:it|you|that|this|they|we|i|he|she)\b)", re.IGNORECASE
)
"""A clause-initial "No" answering a premise ("No, it was Tokyo."): not a cue."""
_REJECT_AFTER = re.compile(
    r"\b(?:(?:is|was|are|were)\s+(?:not|wrong|incorrect|mistaken)|(?:isn|wasn|aren|weren)['’]?t)\b",
    re.IGNORECASE,
)
"""A copula negated after its subject ("Tokyo was not where you went", "Tokyo is
wrong"): the whole clause is negated."""


def affirmed_tokens(text: str) -> list[str]:
    """Stemmed tokens of ``text`` (after :func:`normalize_numbers`) outside negated
    scope (module doc, step 3), in order.

    A clause is cut at ``. ; : ! ?``, commas, dashes, ``but``/``however``/``although``/
    ``though``/``whereas``/``instead``/``yet`` and ``and now|then|later|currently|also``.
    Inside a clause every token after a negation cue is negated; a cue followed only by
    stop words ("You have none.", "None of them") is itself the affirmed answer.
    Rejections before the word ("instead of", "rather than", "except", "other than"),
    after it ("Tokyo was not …", "Tokyo is wrong", "Tokyo? No, …") negate it; idioms
    (:data:`_NOT_NEGATING`) and an answering "No," / "No it was …" do not negate.

    ``"I don't think you told me about the Ferrari"`` → ``["i"]``;
    ``"Not the Porsche, the Ferrari"`` → ``["ferrari"]`` and stop words are kept.
    """
    return [stem for clause in _scoped_clauses(text) for _, stem, affirmed in clause if affirmed]


def _scoped_clauses(text: str) -> list[list[tuple[str, str, bool]]]:
    """:func:`affirmed_tokens` clause by clause: per clause, ``(token, stem, affirmed)``
    for every token (``token`` with its case, after :func:`normalize_numbers`)."""
    text = normalize_numbers(text)
    text = _NOT_NEGATING.sub(" ", text)
    text = _REJECT_QUESTION.sub(lambda m: f"not {m.group(1)}. ", text)
    text = _INTERJECTION_NO.sub(r"\1", text)
    text = _REJECT_BEFORE.sub(" not ", text)
    out: list[list[tuple[str, str, bool]]] = []
    for clause in _CLAUSE.split(text):
        if clause is None:
            continue
        negated = bool(_REJECT_AFTER.search(clause))
        tokens = _raw_tokens(clause)
        scoped = []
        for i, tok in enumerate(tokens):
            low = tok.lower()
            if low in _NEGATION_CUES:
                # a cue followed only by stop words is the answer ("You have none.")
                scoped.append((tok, _stem(tok), all(t.lower() in STOP_WORDS for t in tokens[i + 1 :])))
                negated = True
                continue
            scoped.append((tok, _stem(tok), not negated))
        out.append(scoped)
    return out


def key_words(reference: str) -> tuple[set[str], set[str]]:
    """Content words of a reference (module doc, step 4) as stems, and the *key* ones
    among them (written with a capital or a digit: names, brands, codes).

    The first token of the reference counts as key only when it is not a stop word and
    is capitalised beyond its first letter or holds a digit (``GR-90``), so a plain
    sentence-initial capital does not make a word key.

    Returns:
        ``(content, key)``, ``key ⊆ content``.
    """
    content: set[str] = set()
    key: set[str] = set()
    for i, tok in enumerate(_raw_tokens(normalize_numbers(reference))):
        if tok.lower() in STOP_WORDS:
            continue
        stem = _stem(tok)
        content.add(stem)
        has_digit = any(c.isdigit() for c in tok)
        capital = tok[:1].isupper() and (i > 0 or any(c.isupper() for c in tok[1:]))
        if has_digit or capital:
            key.add(stem)
    return content, key


_SENTENCE = re.compile(r"[.;!?\n]+(?:\s|$)")
_REPORTING = re.compile(r"\b(?:mention|told|tell|said|say|shar|talk|discuss)", re.IGNORECASE)


_GUESS = re.compile(
    r"\b(?:maybe|perhaps|probably|possibly|likely|presumably|i\s+(?:think|believe|guess|suspect|assume|reckon)"
    r"|my\s+(?:best\s+)?guess|i'?d\s+(?:say|guess)|if\s+i\s+(?:had|have)\s+to\s+guess"
    r"|(?:might|could|may|must)\s+(?:be|have\s+been))\b",
    re.IGNORECASE,
)
"""Cues of a guess ("maybe", "I think", "might be" …): what follows them is offered as
the answer."""
_STATES = re.compile(r"(?:\b(?:is|was|are|were|be|been|called|named)\b|'(?:s|re)\b)", re.IGNORECASE)
"""A verb that states a value ("your cat is called Miso", "it's the blue one", "you're
on the last chapter")."""
_GUESS_OBJECT = re.compile(
    r"^\s*(?:,\s*)?(?:the|a|an|your|around|about|roughly|approximately|some|at\s+least)\b", re.IGNORECASE
)
"""A guess cue followed directly by a noun phrase ("maybe the blue one", "probably
around 100")."""
_WHERE = re.compile(
    r"\s*(?:(?:written|saved|stored|listed|noted|recorded|somewhere)\s+)?(?:in|on|at|inside)\s+"
    r"(?:(?:your|the|our|my|one\s+of\s+(?:your|our|the))\s+)?(?:notes?|messages?|chats?|history|records?|"
    r"conversations?|memor(?:y|ies)|diary|journal|calendar|files?|e-?mails?|phone|papers|documents?)\b",
    re.IGNORECASE,
)
"""After a stating verb, where to look rather than a value ("maybe it's in your notes")."""
_NAME_TOKEN = re.compile(r"(?<![\w'])([A-Z][^\W\d_]*)(?![\w])(?!'(?!s\b))")
"""A capitalised word not inside a contraction ("I'm" is no name; "Miso's" is)."""
_NOT_A_VALUE = frozenset(
    {
        # discourse words that open a sentence, and the vocabulary of not knowing
        "maybe", "perhaps", "probably", "possibly", "likely", "presumably", "sorry",
        "unfortunately", "honestly", "actually", "well", "hmm", "oh", "ah", "yes", "okay",
        "ok", "sure", "based", "according", "however", "still", "now", "currently",
        "today", "remind", "recall", "remember", "know", "certain", "clear", "help", "ask",
        "check", "exactly", "quite", "guess", "think", "believe", "suspect", "assume",
        "reckon", "say", "said", "tell", "told", "mention", "mentioned", "share", "shared",
    }
)
"""Words that are never the offered value of a guess or a hedged answer."""


def _offers_value(clause: str, sentence_guess: bool, question_stems: frozenset[str]) -> bool:
    """Whether a clause that does not itself abstain offers a specific value
    (:func:`abstains`): a number, a name, or a guess stating a value."""

    def value_word(tok: str) -> bool:
        low = tok.lower()
        return (low not in STOP_WORDS and low not in _NOT_A_VALUE and _stem(tok) not in question_stems
                and not _REPORTING.match(low))

    if any(_NUMBER.match(t) and _stem(t) not in question_stems for t in _raw_tokens(clause)):
        return True
    for m in _NAME_TOKEN.finditer(clause):
        initial = not clause[: m.start()].strip()
        if (not initial or sentence_guess) and value_word(m.group(1)):
            return True
    for m in _GUESS.finditer(clause):
        rest = clause[m.end():]
        verb = _STATES.search(rest)
        if verb and not _WHERE.match(rest[verb.end():]) \
                and any(value_word(t) for t in _raw_tokens(rest[verb.end():])):
            return True
        if _GUESS_OBJECT.match(rest) and any(value_word(t) for t in _raw_tokens(rest)):
            return True
    return False


def abstains(text: str, question: str | None = None) -> bool:
    """Whether an answer abstains: says it does not know, that the information was not
    mentioned / is not available / is not enough, or that it cannot determine or find
    it (``_ABSTAIN``: "I don't know", "You didn't mention …", "There is no information
    …", "not enough information", "I'm not sure", "I can't determine …", "That's not
    something you've shared", "Nothing in our chats …", "I couldn't find …",
    "It's impossible to tell", "Our conversations don't cover …"), *and gives no
    specific value* (declines to give the fact).

    An answer that says so and then offers a value anyway is no abstention: a clause
    (sentence punctuation, commas, ``but``/``though``/…) without such a statement that

    - states a number ("You have 120 pages left, though I don't know your reading
      speed"),
    - holds a name, a capitalised word that is not a stop word, not a word of the
      question and not a discourse or memory word (``Maybe``, ``Sorry``, ``remember``
      …; a sentence's first word counts only in a sentence with a guess cue), or
    - guesses: a cue (``maybe``, ``perhaps``, ``probably``, ``possibly``, ``likely``,
      ``I think``/``believe``/``guess``, ``my guess``, ``I'd say``, ``might``/``could``/
      ``may``/``must be``) followed by a stating verb (``is``, ``'s``, ``'re``, ``was``,
      ``called``, ``named`` …) and a content word (not a place to look: "maybe it's in
      your notes" offers none), or directly by a noun phrase
      (``the``, ``a``, ``your``, ``around`` … and a content word): "I don't remember
      exactly, but maybe your cat is called Miso."

    A number or a name in a clause that reports what *was* mentioned ("You mentioned 2
    books but not your progress", "you only told me about your dog, Rex") is no value
    offered, unless the clause guesses.

    Args:
        text: the answer.
        question: the question; its words (stems) and numbers are never an offered
            value ("What is my cat's name?": ``cat``, ``name``).

    LongMemEval counts an abstaining answer correct for an abstention (``_abs``)
    question, including one that names what *was* mentioned instead; any answer that
    gives a specific value, hedged or not, is wrong (issue 26).
    """
    text = unicodedata.normalize("NFKC", text).replace("’", "'")
    if not _ABSTAIN.search(text):
        return False
    question_stems = frozenset(_stem(t) for t in _raw_tokens(normalize_numbers(question or "")))
    for sentence in _SENTENCE.split(normalize_numbers(text)):
        sentence_guess = _GUESS.search(sentence) is not None
        reported = False  # the previous clause of this sentence reports what was mentioned
        for clause in _CLAUSE.split(sentence):
            if not clause or not clause.strip():
                continue
            if _ABSTAIN.search(clause):
                reported = False
                continue
            guess = _GUESS.search(clause) is not None
            reporting = _REPORTING.search(clause) is not None
            appositive = reported and len(_raw_tokens(clause)) <= 3
            if (guess or not (reporting or appositive)) and _offers_value(clause, sentence_guess, question_stems):
                return False
            reported = reporting
    return True


@dataclass(frozen=True)
class LmeVerdict:
    """One answer under the ``lme`` rule.

    Attributes:
        correct: the verdict.
        content_match: every content word and number of the reference occurs,
            non-negated, in the answer (for abstention questions: the answer abstains).
        missing: reference stems / numbers not found (sorted).
        reason: which step decided (``abstention``, ``numbers``, ``words``,
            ``partial``, ``preference``, ``cosine``, ``abstained``, ``missing``,
            ``alternatives``, ``stale``).
    """

    correct: bool
    content_match: bool
    missing: tuple[str, ...]
    reason: str


@lru_cache(maxsize=1)
def _stop_stems() -> frozenset[str]:
    return frozenset(_stem(w) for w in STOP_WORDS)


def _unit_after(tokens: list[str], i: int) -> str | None:
    """The word (stem) right after the number at ``tokens[i]`` when it is a content
    word (a unit, currency or counted noun: ``miles``, ``dollars``, ``cats``), else None."""
    if i + 1 >= len(tokens):
        return None
    nxt = tokens[i + 1]
    if _NUMBER.match(nxt) or nxt in _stop_stems():
        return None
    return nxt


def _number_found(
    have: list[str],
    ref_tokens: list[str],
    value: str,
    ref_values: set[str],
    tolerance: int,
    counted: frozenset[str] = frozenset(),
) -> bool:
    """Whether the answer's affirmed stems ``have`` state ``value`` as the reference does.

    An answer number equal to ``value`` (within ``tolerance``) counts when the word after
    it in the answer is not a different unit/noun than the reference's word after
    ``value`` (the reference's word within the answer's next three tokens also counts),
    and, for a time unit, no further ``[and] N <time unit>`` part the reference lacks
    follows ("2 hours and 30 minutes" does not state "2 hours"). A reference number
    without a word after it takes the question's counted noun (``counted``: the words
    after "How many", e.g. ``bike`` for "How many bikes do I own?").
    """
    ref_units = {u for i, t in enumerate(ref_tokens)
                 if _NUMBER.match(t) and _number_key(t) == value and (u := _unit_after(ref_tokens, i))}
    ref_units = ref_units or set(counted)
    target = Decimal(value)
    for i, t in enumerate(have):
        if not _NUMBER.match(t) or abs(Decimal(_number_key(t)) - target) > tolerance:
            continue
        if not ref_units:
            return True
        nxt = have[i + 1 : i + 4]
        hit = next((j for j, w in enumerate(nxt) if w in ref_units), None)
        if hit is None:
            if _unit_after(have, i) is None:
                return True
            continue
        unit = nxt[hit]
        if unit in _TIME_UNITS:
            rest = have[i + 2 + hit : i + 5 + hit]
            if rest and rest[0] == "and":
                rest = rest[1:]
            if len(rest) >= 2 and _NUMBER.match(rest[0]) and rest[1] in _TIME_UNITS \
                    and _number_key(rest[0]) not in ref_values:
                continue
        return True
    return False


_HOW_MANY = re.compile(r"\bhow\s+many\s+([^?.!;,]*)", re.IGNORECASE)


def _counted_noun(question: str) -> frozenset[str]:
    """Stems of the words a "How many …" question counts, up to the first stop word
    (``"How many pre-1920 American coins do I have?"`` → pre, 1920, american, coin);
    empty for other questions."""
    m = _HOW_MANY.search(normalize_numbers(question))
    if not m:
        return frozenset()
    out = []
    for tok in _raw_tokens(m.group(1)):
        if tok.lower() in STOP_WORDS:
            break
        out.append(_stem(tok))
    return frozenset(out)


_DISJUNCTION = re.compile(r"\b(?:or|either|between|could\s+be|might\s+be)\b", re.IGNORECASE)
_ITEM_SPLIT = re.compile(r",|/|\b(?:or|and|either|between)\b", re.IGNORECASE)


def offers_alternatives(answer: str, reference: str) -> bool:
    """Whether ``answer`` hedges over candidates of the reference's kind (module doc,
    step 0): a sentence that holds the reference's answer also offers another candidate
    of the same kind, joined by ``or``/``either``/``between … and``/"could be"/"might
    be", or, for a single-item reference, in a list of three or more items (commas,
    ``and``) whose other items are short (≤ 2 tokens for numbers, ≤ 3 for names). The
    kind: a number for a numeric reference; a capitalised word for a reference of names
    (a capitalised content word); with a disjunction, any other content word too.
    Items from the first one holding a negation cue on are not offered.

    ``"It could be 35, 36, 37, 38, 39 or 40."`` for ``38`` → True; ``"3 or 4 hours"``
    for ``3-4 hours`` → False (every candidate is the reference's).
    """
    ref_values = set(number_values(reference))
    content, key = key_words(reference)
    ref_is_list = re.search(r",|;|&|\b(?:and|or)\b", reference, re.IGNORECASE) is not None
    # a reference of names (a key word, or a capitalised content word even in first place)
    names = bool(key) or any(t[:1].isupper() and t.lower() not in STOP_WORDS for t in _raw_tokens(reference))
    for sentence in _SENTENCE.split(normalize_numbers(answer)):
        items = [x for x in _ITEM_SPLIT.split(sentence) if x.strip()]
        if len(items) < 2:
            continue
        disjunction = _DISJUNCTION.search(sentence) is not None
        if not disjunction and (len(items) < 3 or ref_is_list):
            continue
        matching = other = 0
        first = True
        negated = False  # a negation cue also rules out the items after it ("not X or Y")
        for item in items:
            toks = _raw_tokens(item)
            if not toks:
                continue
            negated = negated or any(t.lower() in _NEGATION_CUES for t in toks)
            if negated:
                first = False
                continue
            stems = [_stem(t) for t in toks]
            if ref_values:
                nums = {s for s in stems if _NUMBER.match(s)}
                if nums & ref_values:
                    matching += 1
                elif nums and (disjunction or len(toks) <= 2):
                    other += 1
            else:
                if content and content <= set(stems) or (ref_is_list and set(stems) & content):
                    matching += 1
                else:
                    caps = [t for j, t in enumerate(toks) if t[:1].isupper() and not (first and j == 0)
                            and t.lower() not in STOP_WORDS]
                    if names and any(_stem(t) not in content for t in caps) and (disjunction or len(toks) <= 3):
                        other += 1
                    elif disjunction and any(s not in content and s not in _stop_stems() for s in stems):
                        other += 1
            first = False
        if matching and other:
            return True
    return False


def _substituted(have: list[str], reference: str, missing: set[str]) -> bool:
    """Whether a missing reference word was replaced by another content word in the
    answer, aligning the two content-word sequences with ``difflib.SequenceMatcher``:
    "pilates class" for "yoga class" is a different entity, not a dropped word."""
    stop = _stop_stems()
    ref_seq = [_stem(t) for t in _raw_tokens(normalize_numbers(reference)) if t.lower() not in STOP_WORDS]
    ref_set = set(ref_seq)
    ans_seq = [t for t in have if t not in stop]
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ref_seq, ans_seq, autojunk=False).get_opcodes():
        if tag == "replace" and set(ref_seq[i1:i2]) & missing and set(ans_seq[j1:j2]) - ref_set:
            return True
    return False


_PAST = re.compile(
    r"\b(?:used\s+to|use\s+to|previously|formerly|before|earlier|originally|at\s+first|initially|"
    r"no\s+longer|any\s*more|back\s+then|in\s+the\s+past|up\s+from|down\s+from|ago|former|previous|prior|"
    r"last\s+(?:year|month|week|time|summer|winter|spring|fall|autumn)|until|"
    r"(?:your|the|my|his|her|their|an?)\s+old)\b",
    re.IGNORECASE,
)
"""Cues that a clause speaks of a superseded value ("used to", "previously", "your old
car", "up from", "last year")."""
_CURRENT = re.compile(
    r"\b(?i:now|currently|these\s+days|nowadays|today|at\s+the\s+moment|at\s+present|presently|latest|"
    r"most\s+recent(?:ly)?|so\s+far|to\s+date|still|current|newest|updated|up\s+to\s+date)\b"
    r"|\b(?i:your|the|a|my|his|her|their)\s+new\b"
)
"""Cues that a clause states the current value ("now", "these days", "currently", "so
far", "your new car"; ``new`` only in lower case, so "the New York office" is no cue)."""
_AND_NOW = re.compile(r"\band\s+(now|currently|these\s+days|nowadays|today)\b", re.IGNORECASE)
_MONTHS = frozenset(
    {"january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"}
)
_YEAR = re.compile(r"^(?:1[0-9]|2[0-9])\d\d$")
_UPDATE_CUES = frozenset(
    {"now", "currently", "nowadays", "today", "still", "current", "latest", "newest", "updated",
     "previously", "formerly", "earlier", "originally", "initially", "former", "previous", "prior", "old",
     "new", "ago", "until", "before"}
)


def _update_rank(words: list[str]) -> int:
    """2: the clause states a current value (a :data:`_CURRENT` cue and no :data:`_PAST`
    cue); 0: a superseded one (a past cue, no current cue); 1: neither or both."""
    text = " ".join(words)
    current = _CURRENT.search(text) is not None
    past = _PAST.search(text) is not None
    return 2 if current and not past else 0 if past and not current else 1


def _update_clauses(answer: str, split_and: bool) -> list[list[tuple[str, str, bool]]]:
    """The answer's clauses for :func:`stale_value`: :func:`_scoped_clauses`, with
    "and now"/"and currently" kept as the cue of the next clause, and cut at ``and``
    too when ``split_and``."""
    out: list[list[tuple[str, str, bool]]] = []
    for clause in _scoped_clauses(_AND_NOW.sub(r"; \1", answer)):
        part: list[tuple[str, str, bool]] = []
        for item in clause:
            if split_and and item[0].lower() == "and":
                out.append(part)
                part = []
            else:
                part.append(item)
        out.append(part)
    return [c for c in out if c]


def _other_number(stems: list[str], ref_values: set[str], units: set[str], skip: set[str]) -> bool:
    """Whether a clause's affirmed stems state a number of the reference's kind other
    than the reference's (:func:`stale_value`)."""
    months = {_stem(m) for m in _MONTHS}
    year_ok = any(_YEAR.match(v) for v in ref_values)
    for i, t in enumerate(stems):
        if not _NUMBER.match(t) or t in ref_values or t in skip:
            continue
        if (_YEAR.match(t) and not year_ok) or (i and stems[i - 1] in months):
            continue  # a date
        if i + 1 < len(stems) and stems[i + 1] == "of":
            continue  # a part ("2 of them")
        unit = _unit_after(stems, i)
        if unit is None or not units or unit in units:
            return True
    return False


def stale_value(answer: str, reference: str, question: str | None = None) -> bool:
    """Whether a knowledge-update answer gives another value than the reference as
    current (module doc, step 8), whether or not it also mentions the reference.

    The answer is cut into clauses (:func:`affirmed_tokens`' clauses, and at ``and``
    unless the reference is a list); a clause is *current* (rank 2) with a cue like
    "now", "these days", "currently", "still", "so far", "your new …" and no past cue,
    *past* (rank 0) with a cue like "used to", "previously", "before", "earlier", "your
    old …", "up from", "last year" and no current cue, *plain* (rank 1) otherwise. The
    reference's rank is the lowest, over its numbers (each stated with its unit,
    :func:`_number_found`) or content words, of the highest rank of a clause holding
    it non-negated. Another value of the reference's kind is, for a numeric reference,
    a number with no unit or the reference's unit, not in the question, not a year or
    a day of a month, not a part ("2 of them"); for a reference of names, a capitalised
    content word that is not the reference's or the question's (nor a month or a
    discourse word); otherwise any content word, and then only when the reference
    stands in past clauses alone. The answer is stale when a clause with another value
    outranks every clause of the reference:
    ``"These days you drive a Honda Civic; the Toyota Corolla was your old car."`` for
    ``"Toyota Corolla"`` → True; ``"You used to have 37, but now you have 38."`` for
    ``"38"`` → False.

    Args:
        answer: the model's answer.
        reference: the reference (latest) value.
        question: the question; its words and numbers are never another value.

    Returns:
        True when the answer is stale; False also when the reference is not stated
        whole in the answer (the other steps decide then).

    Source: LongMemEval's knowledge-update judge (``evaluate_qa.py``): a reply that
    mentions older values is correct as long as the answer it gives as current is the
    reference; issue 26.
    """
    is_list = re.search(r",|;|&|\b(?:and|or)\b", reference, re.IGNORECASE) is not None
    clauses = _update_clauses(answer, split_and=not is_list)
    ranks = [_update_rank([t for t, _, _ in c]) for c in clauses]
    affirmed = [[st for _, st, ok in c if ok] for c in clauses]
    q_stems = {_stem(t) for t in _raw_tokens(normalize_numbers(question or ""))}
    ref_numbers = number_values(reference)

    def rank_of(found) -> int | None:
        hits = [r for r, c in zip(ranks, affirmed, strict=True) if found(c)]
        return max(hits) if hits else None

    if ref_numbers:
        ref_tokens = [_stem(t) for t in _raw_tokens(normalize_numbers(reference))]
        ref_values = set(ref_numbers)
        counted = _counted_noun(question or "")
        units = {u for i, t in enumerate(ref_tokens) if _NUMBER.match(t) and (u := _unit_after(ref_tokens, i))}
        units = units or set(counted)
        gold = [rank_of(lambda c, v=v: _number_found(c, ref_tokens, v, ref_values, 0, counted))
                for v in dict.fromkeys(ref_numbers)]
        other = [_other_number(c, ref_values, units, q_stems) for c in affirmed]
    else:
        content, key = key_words(reference)
        names = bool(key) or any(t[:1].isupper() and t.lower() not in STOP_WORDS for t in _raw_tokens(reference))
        gold = [rank_of(lambda c, w=w: w in c) for w in content]
        skip = content | q_stems | {_stem(w) for w in _UPDATE_CUES | _NOT_A_VALUE | _MONTHS}
        other = []
        for c in clauses:
            words = [t for t, st, ok in c if ok and st not in skip and not _NUMBER.match(st)
                     and t.lower() not in STOP_WORDS]
            other.append(any(t[:1].isupper() for t in words) if names else bool(words))
    if not gold or any(g is None for g in gold):
        return False
    gold_rank = min(g for g in gold if g is not None)
    if not ref_numbers and not names and gold_rank > 0:
        return False  # plain words: only a reference left in the past is stale
    outranking = [r for r, o in zip(ranks, other, strict=True) if o and r > gold_rank]
    return bool(outranking)


_ZERO_WORDS = frozenset({"none", "noth", "nobodi"})
"""Stems of an affirmed "none"/"nothing"/"nobody" answer: the count zero."""

_POLAR = frozenset(
    {"yes", "no", "both", "neither", "either", "all", "none", "nothing", "everything", "something",
     "anything", "nobody", "everyone", "everybody", "someone", "somebody", "always", "never",
     "sometimes", "once", "twice"}
)
"""Stop words that are whole answers (yes/no, quantifiers): a reference without content
words must have them in the answer."""


def lme_verdict(
    answer: str,
    reference: str,
    cosine: float,
    *,
    question_id: str | None = None,
    question_type: str | None = None,
    question: str | None = None,
    threshold: float = 0.50,
) -> LmeVerdict:
    """Score one answer under the ``lme`` rule (module doc, steps 1–8).

    Args:
        answer: the model's answer.
        reference: the reference answer as text (``"38"``, never ``"38.0"``, though
            numbers compare by value anyway).
        cosine: cosine(answer, reference) of the PR embedder, in [-1, 1].
        question_id: LongMemEval id; a ``_abs`` suffix makes it an abstention question.
        question_type: LongMemEval question type (``temporal-reasoning`` tolerates a
            day count off by one; ``single-session-preference`` scores a rubric;
            ``knowledge-update`` rejects a stale value given as current).
        question: the question text (its words are not rubric evidence, nor a value
            an abstention or an update offers).
        threshold: cosine threshold of the partial-match and fallback steps (strict ``>``).

    Returns:
        An :class:`LmeVerdict`.

    Raises:
        TypeError: ``answer`` or ``reference`` is not a string (e.g. ``None``).
    """
    for name, value in (("answer", answer), ("reference", reference)):
        if not isinstance(value, str):
            raise TypeError(f"lme_verdict: {name} must be a string, got {type(value).__name__}")
    abst = abstains(answer, question)
    if question_id is not None and question_id.endswith("_abs"):
        return LmeVerdict(abst, abst, () if abst else ("<abstention>",), "abstention")
    have = affirmed_tokens(answer)
    have_set = set(have)
    update = question_type == "knowledge-update"

    if question_type == "single-session-preference" and _PREFERENCE.search(reference):
        q_words = {_stem(t) for t in _raw_tokens(normalize_numbers(question or ""))}
        evidence: set[str] = set()
        for sentence in re.split(r"(?<=[.!?])\s+", reference):
            if not _PREFERENCE.search(sentence) or re.search(r"\bnot\s+prefer", sentence, re.I):
                continue
            content, _ = key_words(sentence)
            evidence |= content - q_words - _RUBRIC_BOILERPLATE
        if evidence:
            used = evidence & have_set
            ok = bool(used) and not abst
            return LmeVerdict(ok, len(used) == len(evidence), tuple(sorted(evidence - used)), "preference")

    ref_numbers = number_values(reference)
    if ref_numbers:
        ref_tokens = [_stem(t) for t in _raw_tokens(normalize_numbers(reference))]
        ref_values = set(ref_numbers)
        # numbers of codes (``GR-90``, ``B12``) are names, not quantities with a unit
        codes = {_number_key(m) for m in re.findall(r"(?<=[^\W\d_])-?(\d+)", normalize_numbers(reference))}
        counted = _counted_noun(question or "")
        day_question = re.search(r"\bhow\s+many\s+days\b", question or "", re.I) is not None
        missing = []
        for value in dict.fromkeys(ref_numbers):
            tolerance = 0
            if question_type == "temporal-reasoning":
                units = {ref_tokens[i + 1] for i, t in enumerate(ref_tokens[:-1])
                         if _NUMBER.match(t) and _number_key(t) == value}
                if "day" in units or (not units and len(ref_values) == 1 and day_question):
                    tolerance = 1
            units_of = [] if value in codes else ref_tokens
            if value == "0" and have_set & _ZERO_WORDS:
                continue
            if not _number_found(have, units_of, value, ref_values, tolerance, counted):
                missing.append(value)
        # the reference's names and codes beside its numbers (``GR`` of ``GR-90``)
        content, key = key_words(reference)
        missing += sorted((key - ref_values) - have_set)
        if not missing and offers_alternatives(answer, reference):
            return LmeVerdict(False, True, (), "alternatives")
        if not missing and update and stale_value(answer, reference, question):
            return LmeVerdict(False, True, (), "stale")
        ok = not missing
        return LmeVerdict(ok, ok, tuple(sorted(missing)), "numbers")

    content, key = key_words(reference)
    if not content:
        polar = {t.lower() for t in _raw_tokens(reference)} & _POLAR
        answer_words = {t.lower() for t in _raw_tokens(normalize_numbers(answer))}
        if polar and not polar <= answer_words:
            return LmeVerdict(False, False, tuple(sorted(polar - answer_words)), "missing")
        ok = cosine > threshold and not abst
        return LmeVerdict(ok, False, (), "cosine")
    missing_words = content - have_set
    if not missing_words:
        if offers_alternatives(answer, reference):
            return LmeVerdict(False, True, (), "alternatives")
        if update and stale_value(answer, reference, question):
            return LmeVerdict(False, True, (), "stale")
        return LmeVerdict(True, True, (), "words")
    is_list = re.search(r",|;|&|\b(?:and|or)\b", reference, re.IGNORECASE) is not None
    if (
        not is_list
        and len(content) >= 3
        and 3 * len(missing_words) <= len(content)
        and not (missing_words & key)
        and cosine > threshold
        and not abst
        and not _substituted(have, reference, missing_words)
        and not offers_alternatives(answer, reference)
        and not (update and stale_value(answer, reference, question))
    ):
        return LmeVerdict(True, False, tuple(sorted(missing_words)), "partial")
    return LmeVerdict(False, False, tuple(sorted(missing_words)), "abstained" if abst else "missing")
