"""Numbers in answers as values: number words and numerals, currency, percentages,
times, dates, scales, fractions and Roman numerals normalized to one form
(:func:`normalize_numbers`), and the tokens and stems PR's default rule compares
(:mod:`evaluators.scoring.answer_rule`)."""

from __future__ import annotations

import datetime as _dt
import re
import unicodedata
from decimal import Decimal, InvalidOperation
from functools import lru_cache

import snowballstemmer
from text_to_num import alpha2digit

__all__ = ["NUMBER", "normalize_numbers", "number_key", "number_values", "raw_tokens", "stem_of"]


_TOKEN = re.compile(r"(?<![\w.])-\d+(?:[.,]\d+)*|\d+(?:[.,]\d+)*|[^\W\d_]+")

_POSSESSIVE = re.compile(r"(?<=\w)['’]s\b")

_APOSTROPHE = re.compile(r"(?<=\w)['’](?=\w)")

_THOUSANDS = re.compile(r"^\d{1,3}(?:,\d{3})+$")

NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")

_ORDINAL = re.compile(r"\b(\d+)(?:st|nd|rd|th)\b", re.IGNORECASE)

_MONEY = re.compile(r"([$€£])\s?(\d[\d,]*(?:\.\d+)?)")

_CURRENCY = {"$": "dollars", "€": "euros", "£": "pounds"}

_PERCENT = re.compile(r"(\d)\s?%")

@lru_cache(maxsize=1)
def _stemmer() -> snowballstemmer.stemmer:
    return snowballstemmer.stemmer("english")

_ALPHA2DIGIT_CHUNK = 400
"""Longest piece (characters) handed to ``alpha2digit`` at once: its cost grows with the
square of a run of number words, so long texts are converted piece by piece."""

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

def raw_tokens(text: str) -> list[str]:
    """Tokens with their case: possessive ``'s`` dropped, inner apostrophes removed,
    ``1,000`` joined."""
    text = _POSSESSIVE.sub("", text)
    text = _APOSTROPHE.sub("", text)
    return [t.replace(",", "") if _THOUSANDS.match(t) else t for t in _TOKEN.findall(text)]

def stem_of(token: str) -> str:
    """Snowball stem of a lower-cased, accent-folded token (NFKD without combining marks:
    ``Café`` and ``Cafe`` share a stem); number tokens become value keys."""
    token = "".join(c for c in unicodedata.normalize("NFKD", token.lower()) if not unicodedata.combining(c))
    if NUMBER.match(token):
        return number_key(token)
    return _stemmer().stemWord(token)

def number_key(token: str) -> str:
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
    return [number_key(t) for t in raw_tokens(normalize_numbers(text)) if NUMBER.match(t)]
