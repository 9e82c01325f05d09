"""How a character can be written: the Unicode tables behind memkit's one matcher.

Which characters fold to the same letter (any normal form and case, compatibility and
lookalike letters), which are separators between a secret's letters, how each
character is spelled as an escape (JSON, HTML entities, percent codes, backslash
runs), and the separator patterns (tags, comments, escapes) a copy may hold between
two letters. :mod:`memkit.scan.matching` builds each secret's patterns from these.
"""

from __future__ import annotations

import os
import re
import sys
import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

__all__ = ["BACKSLASHES", "BREAKER_BYTES", "SEP_PATTERNS", "SEP_PATTERNS_BYTES", "alnum_fold", "byte_alternatives", "char_chars",
           "char_spellings", "decomposed", "encoded_forms", "escapes",
           "fold", "multi_char_pattern", "sep_bytes", "sep_bytes_plain", "sep_text", "skeleton", "spelling_tables",
           "spellings", "variants_table"]

_SEPARATOR_CATEGORIES = ("Z", "P", "S", "Cf", "Cc", "Mn", "Me")

_INVISIBLE_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")
"""Hangul fillers: letters by category, blank on screen, so separators here."""

def fold(text: str) -> str:
    """NFKC, case fold, NFKC again (the fold can un-normalize)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def fold_each(texts: Sequence[str]) -> list[str]:
    """``[fold(t) for t in texts]`` in one call (none of ``texts`` may hold a NUL): joined
    by NUL, which no normalization composes with or reorders across and which no fold
    yields, the texts fold each as they would alone (``tests/test_scan_spellings.py`` checks
    every code point)."""
    return fold("\0".join(texts)).split("\0") if texts else []


def _is_separator(ch: str) -> bool:
    if ch in _INVISIBLE_LETTERS:
        return True
    if ch.isalnum():
        return False
    return ch.isspace() or unicodedata.category(ch).startswith(_SEPARATOR_CATEGORIES)


_Tables = tuple[dict[str, frozenset[str]], str, dict[str, frozenset[str]], dict[str, str]]


@lru_cache(maxsize=1)
def spelling_tables() -> _Tables:
    """(every code point whose NFKC case fold is one letter or digit, by that
    character, where one is not the character itself; a regex class body of every
    separator; every code point whose fold is 2-3 letters or digits, such as ``ß`` ->
    ``ss``, by that fold; the same as character -> fold). Built by one pass over Unicode (about half a second) and kept
    in memkit's cache directory (:func:`memkit.runtime.cache_dir`), keyed by this
    module's source, the Unicode version and the Python version, so a later process
    loads it in milliseconds (a scan of one file must not pay the pass)."""
    import hashlib
    import pickle

    from memkit.runtime import cache_dir

    key = hashlib.sha256(Path(__file__).read_bytes() + unicodedata.unidata_version.encode()
                         + sys.version.encode()).hexdigest()[:16]
    try:
        path = cache_dir() / f"matching-tables-{key}.pickle"
        with open(path, "rb") as fh:
            return pickle.load(fh)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ValueError):
        pass
    built = _build_tables()
    try:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            pickle.dump(built, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
        for old in path.parent.glob("matching-tables-*.pickle"):  # tables of an older memkit
            if old != path:
                old.unlink(missing_ok=True)
    except (OSError, NameError):  # a read-only cache directory: build each time
        pass
    return built


def _build_tables() -> _Tables:
    """:func:`spelling_tables`, built by one pass over Unicode."""
    variants: dict[str, set[str]] = {}
    multi: dict[str, set[str]] = {}
    seps: list[str] = []
    for cp in range(sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        cat = unicodedata.category(ch)
        if cat in ("Cn", "Co"):
            continue
        folded = fold(ch)
        f = "".join(c for c in folded if c.isalnum())  # İ folds to i + a combining dot, ⒳ to (x)
        latin = _latin_letter(ch)
        if ch in _INVISIBLE_LETTERS:
            seps.append(ch)
        elif latin is not None:  # small capitals, regional indicators, dotless ı ...
            variants.setdefault(latin, set()).add(ch)
        elif ch.isdecimal() and unicodedata.decimal(ch, None) is not None and f == ch:
            # a digit of another script (Arabic-Indic ٥, Devanagari ५) is that digit
            variants.setdefault(str(unicodedata.decimal(ch)), set()).add(ch)
        elif len(f) == 1:
            variants.setdefault(f, set()).add(ch)
        elif 1 < len(f) <= 3:  # ß -> ss, ligatures, ㎏, ⑩
            multi.setdefault(f, set()).add(ch)
        elif _is_separator(ch):
            seps.append(ch)
    # a character whose only spelling is itself is left out (every reader adds it)
    return ({k: frozenset(v) for k, v in variants.items() if v != {k}}, _class_body(seps),
            {k: frozenset(v) for k, v in multi.items()},
            {ch: f for f, chs in multi.items() for ch in chs})


def _class_body(chars: list[str]) -> str:
    """A regex character-class body for ``chars`` as ranges of consecutive code points."""
    cps = sorted(ord(c) for c in chars)
    out, i = [], 0
    while i < len(cps):
        j = i
        while j + 1 < len(cps) and cps[j + 1] == cps[j] + 1:
            j += 1
        lo, hi = chr(cps[i]), chr(cps[j])
        out.append(re.escape(lo) if i == j else f"{re.escape(lo)}-{re.escape(hi)}")
        i = j + 1
    return "".join(out)


@lru_cache(maxsize=1)
def multi_char_pattern() -> re.Pattern[str]:
    """Characters whose fold is several letters or digits (``ß``, ``ﬁ``, ``㎏``, ``⑩``)."""
    return re.compile("[" + _class_body(list(spelling_tables()[3])) + "]")


_LATIN_NAME = re.compile(
    r"^(?:LATIN (?:CAPITAL |SMALL )?LETTER (?:SMALL CAPITAL |DOTLESS )?"
    r"|REGIONAL INDICATOR SYMBOL LETTER |(?:NEGATIVE )?(?:SQUARED|CIRCLED|PARENTHESIZED) LATIN (?:CAPITAL |SMALL )?LETTER )"
    r"([A-Z])$"
)


def _latin_letter(ch: str) -> str | None:
    """The Latin letter a character is named for when its fold is not that letter:
    small capitals (``ᴠ``), dotless ``ı``, regional indicators (``🇽``), squared,
    circled and parenthesized letters; ``None`` otherwise."""
    m = _LATIN_NAME.match(unicodedata.name(ch, ""))
    if m is None:
        return None
    letter = m.group(1).lower()
    return letter if fold(ch) != letter else None


def variants_table() -> dict[str, frozenset[str]]:
    return spelling_tables()[0]


def alnum_fold(text: str) -> str:
    """The letters and digits of ``text``'s NFKC case fold, in order (may be empty)."""
    return "".join(c for c in fold(text) if c.isalnum())


@lru_cache(maxsize=1 << 18)
def skeleton(secret: str) -> str:
    """The letters and digits of ``secret``'s NFKC case fold, in order (cached: an
    engine over many secrets asks for each several times).

    Raises:
        ValueError: the secret has no letter or digit.
    """
    if not isinstance(secret, str):
        raise TypeError(f"secret must be a str, got {type(secret).__name__}")
    out = alnum_fold(secret)
    if not out:
        raise ValueError(f"secret {secret!r} has no letters or digits to match")
    return out


@lru_cache(maxsize=1 << 16)
def decomposed(ch: str) -> frozenset[str]:
    """Multi-code-point spellings of ``ch`` (NFD / NFKD and their case variants);
    cached: every pattern built for a character asks for those of each of its
    spellings."""
    out = set()
    for form in ("NFD", "NFKD"):
        for c in (ch, ch.upper(), ch.lower()):
            d = unicodedata.normalize(form, c)
            # a base character and combining marks (e + U+0301), not a compatibility
            # expansion such as "⒐" -> "9." whose punctuation is no part of the character
            if len(d) > 1 and all(unicodedata.category(x).startswith("M") for x in d[1:]):
                out.add(d)
    return frozenset(out)


def _hexdigits(cp: int) -> str:
    """Regex for ``cp`` in hex, any case, after up to 8 leading zeros."""
    return "0{0,8}" + "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{cp:x}")


def encoded_forms(ch: str) -> list[str]:
    """Regexes for ``ch`` written as an escape: JSON ``\\uXXXX`` (a surrogate pair above
    the BMP; any number of backslashes, taken from the start of their run), an HTML
    numeric entity, and percent-encoded UTF-8."""
    cp = ord(ch)
    if cp > 0xFFFF:
        v = cp - 0x10000
        hi, lo = 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF)
        json_esc = BACKSLASHES + "u" + _hex4(hi) + r"\\{1,64}+u" + _hex4(lo)
    else:
        json_esc = BACKSLASHES + "u" + _hex4(cp)
    pct = "".join("%" + _hex2(byte) for byte in ch.encode("utf-8"))
    return [json_esc, f"&#0{{0,8}}{cp};?", f"&#[xX]{_hexdigits(cp)};?", pct]


def _hex4(cp: int) -> str:
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{cp:04x}")


def _hex2(byte: int) -> str:
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{byte:02x}")


BACKSLASHES = r"\\(?<!\\\\\\)\\{0,63}+"
"""A run of up to 64 backslashes (JSON nested 6 deep), matched only from its first
backslash (the lookbehind) and possessively. It starts with a literal backslash, so
sre can still skip ahead by a first-character set."""


def spellings(chars: set[str], own: frozenset[str] = frozenset()) -> tuple[str, bytes]:
    """Regex alternations (text, UTF-8 bytes) for any of ``chars``: each as itself and
    its decomposed spellings, and written as an escape (:func:`encoded_forms`; for exotic
    forms only when they are in ``own``, the secret's own characters). Every
    alternative starts with a literal, so sre can skip ahead by a first-character set.
    The bytes alternation is :func:`byte_alternatives`, in its order."""
    seqs: set[str] = set()
    for ch in chars:
        seqs |= decomposed(ch)
    lits = sorted(set(chars) | seqs, key=lambda s: (-len(s), s))
    escs = list(escapes(frozenset(chars), frozenset(own)))
    text = "(?:" + "|".join([re.escape(x) for x in lits] + escs) + ")"
    enc, _ = byte_alternatives(frozenset(chars), frozenset(own))
    data = b"(?:" + b"|".join([re.escape(x) for x in enc] + [e.encode("ascii") for e in escs]) + b")"
    return text, data


@lru_cache(maxsize=4096)
def byte_alternatives(chars: frozenset[str], own: frozenset[str]) -> tuple[tuple[bytes, ...], tuple[str, ...]]:
    """The alternatives of :func:`spellings`'s bytes alternation, in the order it tries
    them: the literals (each character and decomposed spelling in UTF-8, longest
    first), then the escapes (:func:`escapes`, regex source)."""
    seqs: set[str] = set()
    for ch in chars:
        seqs |= decomposed(ch)
    enc = sorted({x.encode("utf-8") for x in set(chars) | seqs}, key=lambda b: (-len(b), b))
    return tuple(enc), escapes(chars, own)


def char_chars(c: str, own: frozenset[str] = frozenset()) -> frozenset[str]:
    """The characters :func:`char_spellings` spells skeleton character ``c`` with."""
    return frozenset(set(variants_table().get(c, {c})) | {c} | set(own))


@lru_cache(maxsize=4096)
def escapes(chars: frozenset[str], own: frozenset[str]) -> tuple[str, ...]:
    """Regexes for any of ``chars`` written as an escape (:func:`encoded_forms`), in the
    order :func:`spellings` tries them: JSON escapes of what encoders really escape
    (accents, fullwidth forms, the secret's own characters ``own``); HTML entities and
    percent-encoding of ASCII (the exotic mathematical and enclosed forms are left out,
    which keeps each pattern small); then each decomposed spelling escaped character
    by character."""
    escs: list[str] = []
    for ch in sorted(chars):
        if ord(ch) < 0x80:
            escs += encoded_forms(ch)
        elif ord(ch) < 0x2000 or 0xFF00 <= ord(ch) <= 0xFFEF or ch in own:
            escs.append(encoded_forms(ch)[0])
    seqs: set[str] = set()
    for ch in chars:
        seqs |= decomposed(ch)
    for seq in sorted(seqs):
        escs.append("".join(re.escape(x) if ord(x) <= 0x7F else encoded_forms(x)[0] for x in seq))
    return tuple(escs)


@lru_cache(maxsize=4096)
def char_spellings(c: str, own: frozenset[str] = frozenset()) -> tuple[str, bytes]:
    """:func:`spellings` of skeleton character ``c`` (every code point that folds to it,
    and the secret's own characters ``own`` that do)."""
    return spellings(set(char_chars(c, own)), own)


SEP_PATTERNS = [
    r"\x1b\[[0-?]{0,32}+[ -/]{0,8}+[@-~]",                            # ANSI colour codes
    r"<!--(?:(?!-->)[^\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]){0,500}-->",   # HTML comments
    r"</?[A-Za-z][^<>\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]{0,500}>",        # HTML tags
    r"&(?:[A-Za-z][A-Za-z0-9]{1,31};|(?:nbsp|amp|lt|gt|quot|apos|shy|ndash|mdash|thinsp|ensp|emsp)"
    r"(?![A-Za-z0-9])|#[0-9]{1,7};?|#[xX][0-9A-Fa-f]{1,6};?)",         # HTML entities
    r"%[0-9A-Fa-f]{2}",                                                # percent-encoding
    r"\\{1,64}+(?:u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|x[0-9A-Fa-f]{2}|[ntrbfv0/'\"]|)",  # escapes
]
"""Multi-character separators, tried before the separator characters: encodings a
reader's tools render away. Any of them may stand between a secret's characters, but
never in place of the next one (the separator run stops where the next character's
spelling starts, see :func:`matcher`). A tag or comment holds no control character
other than whitespace and ESC (binary bytes end it), so no copy holds a byte of
:data:`BREAKER_BYTES`."""

_UTF8_UNIT = r"|[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}|[\x80-\xff]"
"""The byte form of one non-ASCII character of a tag or comment body: a UTF-8 sequence,
or any other byte alone (first alternative first, so the parse is the greedy one)."""

SEP_PATTERNS_BYTES = [
    SEP_PATTERNS[0],
    r"<!--(?:(?!-->)(?:[\x09-\x0d\x1b\x20-\x7e]" + _UTF8_UNIT + r")){0,500}+-->",
    r"</?[A-Za-z](?:[\x09-\x0d\x1b\x20-\x3b\x3d\x3f-\x7e]" + _UTF8_UNIT + r"){0,500}+>",
    *SEP_PATTERNS[3:],
]
""":data:`SEP_PATTERNS` over UTF-8 bytes: the same constructs, a tag's or comment's
body counted in characters (UTF-8 sequences), as the text patterns count it, not in
bytes (500 CJK characters are 1,500 bytes), so a byte scan finds whatever a text scan
finds. The count is possessive: a body of more than 500 characters ends no tag."""


@lru_cache(maxsize=1)
def sep_text() -> str:
    return "(?:" + "|".join(SEP_PATTERNS) + "|[" + spelling_tables()[1] + "])"


@lru_cache(maxsize=1)
def _ascii_seps() -> bytes:
    # ASCII separators as one class (ranges: a shorter pattern compiles faster).
    # Control bytes other than whitespace and ESC are left out: binary files are full
    # of NULs, and a short secret's digits would match across them everywhere (they
    # are BREAKER_BYTES).
    return _class_body([chr(c) for c in range(0x80)
                        if _is_separator(chr(c)) and chr(c).encode() not in BREAKER_BYTES]).encode()


@lru_cache(maxsize=1)
def sep_bytes() -> bytes:
    # Any non-ASCII UTF-8 character may separate in bytes (a superset of the text
    # separators, so a byte scan finds whatever text finds).
    return (b"(?:" + "|".join(SEP_PATTERNS_BYTES).encode() + b"|[" + _ascii_seps()
            + b"]|[\xc2-\xf4][\x80-\xbf]{1,3})")


@lru_cache(maxsize=1)
def sep_bytes_plain() -> bytes:
    """:func:`sep_bytes` less the separators that are window tokens (ANSI codes and
    comments, :data:`WINDOW_TOKENS`), in the same order (:func:`plain_match`)."""
    return (b"(?:" + "|".join(SEP_PATTERNS_BYTES[2:]).encode() + b"|[" + _ascii_seps()
            + b"]|[\xc2-\xf4][\x80-\xbf]{1,3})")


BREAKER_BYTES = frozenset(bytes([c]) for c in [*range(0x00, 0x09), *range(0x0E, 0x1B),
                                               *range(0x1C, 0x20), 0x7F])
"""Bytes no copy holds in a byte scan: control characters other than whitespace
(tab, newline, vertical tab, form feed, carriage return) and ESC, and DEL. They are
neither a spelling nor a separator, and tags and comments end at them
(:data:`SEP_PATTERNS`); so a copy lies between two of them
(:mod:`memkit.scan.engine` bounds its windows there)."""
