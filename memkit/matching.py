r"""What counts as a copy of a secret: the one matcher forget, redaction, the residue
scanner, the LLM cache and the probe detectors share (DESIGN.md, Verdicts and surfaces).

A copy of a secret is its *skeleton* — the letters and digits of its NFKC,
case-folded form, in order — with any number of *separators* between them. Each
skeleton character matches every spelling a store or a model can write for it:

* any Unicode normal form and case: ``X``, ``x``, fullwidth ``Ｘ``, mathematical ``𝐗``
  (every code point whose NFKC case fold is that character), and a base letter
  followed by combining marks (``e`` + U+0301 for ``é``);
* JSON string escapes of any of those (``\\u00e9``, ``\\uFF38``, a surrogate pair
  ``\\ud835\\udc17``), with one or more backslashes (JSON inside JSON), as SQLite text,
  chroma's ``embeddings_queue`` JSON, LangGraph store values and LangChain-serialised
  prompts hold them.

Separators: every character of Unicode categories Z (spaces), P (punctuation: ``-``
``_`` ``.`` ``/``, the dashes U+2010–U+2015, fullwidth forms ...), S (symbols: U+2212
minus, ``*`` of markdown emphasis ...), Cf (format: soft hyphen, zero-width U+200B–U+200D,
U+2060, U+FEFF ...) and Cc (control: ``\n``, ``\t`` ...), and any whitespace; not ``"``
(it ends a JSON string) nor ``\`` (it starts an escape). In text, any JSON string
escape (``\n``, ``\t``, ``\u2013`` ..., one or more backslashes) may also separate; in
bytes, any non-ASCII UTF-8 character may (a superset of the text separators, so a
byte scan finds whatever a text scan of the decoded bytes finds).

A match is ``exact`` when it is the secret verbatim, else ``normalized``. Text
patterns work on ``str``; byte patterns on UTF-8 bytes (files on disk, blobs).
Patterns are compiled once per secret (cached).

Matching is deliberately generous: a reader who sees ``x q 7 violet 3829`` has the
secret, so a verdict of "clean" must not count that as absent.
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

__all__ = [
    "alnum_fold",
    "SecretMatcher",
    "contains_secret",
    "matcher",
    "redact_json",
    "redact_text",
    "secret_bytes_regex",
    "secret_regex",
    "skeleton",
]

_SEPARATOR_CATEGORIES = ("Z", "P", "S", "Cf", "Cc", "Mn", "Me")

_INVISIBLE_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")
"""Hangul fillers: letters by category, blank on screen, so separators here."""

_MARKUP = (
    r"&(?:[A-Za-z][A-Za-z0-9]{1,31}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});"  # HTML entities
    r"|%[0-9A-Fa-f]{2}"                                                     # percent-encoding
    r"|</?[A-Za-z][^<>]{0,64}>"                                             # HTML tags
)
"""Encodings a reader's tools render away: any of them may stand between a secret's
characters (``XQ7&nbsp;VIOLET``, ``XQ7%2DVIOLET``, ``XQ7<b>VIOLET</b>``)."""


def _fold(text: str) -> str:
    """NFKC, case fold, NFKC again (the fold can un-normalize)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def _is_separator(ch: str) -> bool:
    if ch in _INVISIBLE_LETTERS:
        return True
    if ch.isalnum():
        return False
    return ch.isspace() or unicodedata.category(ch).startswith(_SEPARATOR_CATEGORIES)


@lru_cache(maxsize=1)
def _tables() -> tuple[dict[str, frozenset[str]], str, dict[str, frozenset[str]], dict[str, str]]:
    """(every code point whose NFKC case fold is one letter or digit, by that
    character; a regex class body of every separator; every code point whose fold is
    2-3 letters or digits, such as ``ß`` -> ``ss``, by that fold; the same as
    character -> fold). Built once per process by one pass over Unicode (about a
    second)."""
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
        fold = _fold(ch)
        f = "".join(c for c in fold if c.isalnum())  # İ folds to i + a combining dot
        if ch in _INVISIBLE_LETTERS:
            seps.append(ch)
        elif len(f) == 1 and (ch.isalnum() or f == fold):
            variants.setdefault(f, set()).add(ch)
        elif 1 < len(f) <= 3 and (ch.isalnum() or f == fold):  # ß -> ss, ligatures, ㎏, ⑩
            multi.setdefault(f, set()).add(ch)
        elif _is_separator(ch):
            seps.append(ch)
    return ({k: frozenset(v) for k, v in variants.items()}, _class_body(seps),
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
def _multi_chars() -> re.Pattern[str]:
    """Characters whose fold is several letters or digits (``ß``, ``ﬁ``, ``㎏``, ``⑩``)."""
    return re.compile("[" + _class_body(list(_tables()[3])) + "]")


def _variants_table() -> dict[str, frozenset[str]]:
    return _tables()[0]


def alnum_fold(text: str) -> str:
    """The letters and digits of ``text``'s NFKC case fold, in order (may be empty)."""
    return "".join(c for c in _fold(text) if c.isalnum())


def skeleton(secret: str) -> str:
    """The letters and digits of ``secret``'s NFKC case fold, in order.

    Raises:
        ValueError: the secret has no letter or digit.
    """
    if not isinstance(secret, str):
        raise TypeError(f"secret must be a str, got {type(secret).__name__}")
    out = alnum_fold(secret)
    if not out:
        raise ValueError(f"secret {secret!r} has no letters or digits to match")
    return out


def _decomposed(ch: str) -> set[str]:
    """Multi-code-point spellings of ``ch`` (NFD / NFKD and their case variants)."""
    out = set()
    for form in ("NFD", "NFKD"):
        for c in (ch, ch.upper(), ch.lower()):
            d = unicodedata.normalize(form, c)
            # a base character and combining marks (e + U+0301), not a compatibility
            # expansion such as "⒐" -> "9." whose punctuation is no part of the character
            if len(d) > 1 and all(unicodedata.category(x).startswith("M") for x in d[1:]):
                out.add(d)
    return out


def _json_escapes(ch: str) -> list[str]:
    """``\\uXXXX`` spellings of one character (a surrogate pair above the BMP)."""
    cp = ord(ch)
    if cp > 0xFFFF:
        v = cp - 0x10000
        return [f"\\u{0xD800 + (v >> 10):04x}\\u{0xDC00 + (v & 0x3FF):04x}"]
    return [f"\\u{cp:04x}"]


_BACKSLASHES = r"\\\\*"
"""One or more backslashes, written so a pattern's alternatives start with a literal
(sre then skips ahead by a first-character set instead of trying every position)."""


def _escape_regex(esc: str) -> str:
    """Regex for a JSON escape: one or more backslashes, hex digits in any case."""
    parts = esc.split("\\")[1:]
    out = []
    for p in parts:
        # p is "uXXXX" or a one-letter escape
        body = "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() and c != "u" else re.escape(c) for c in p)
        out.append(_BACKSLASHES + body)
    return "".join(out)


def _char_alternatives(c: str) -> tuple[list[str], list[str]]:
    """(literal spellings, regex fragments for escapes) of skeleton character ``c``."""
    lits = set(_variants_table().get(c, {c})) | {c}
    seqs: set[str] = set()
    for ch in list(lits):
        seqs |= _decomposed(ch)
    escapes: set[str] = set()
    for ch in lits:
        if ord(ch) > 0x7F:  # an ASCII letter is never written escaped by JSON encoders
            escapes.add(_escape_regex(_json_escapes(ch)[0]))
    for seq in seqs:
        # a decomposed spelling whose characters are escaped one by one (ensure_ascii)
        escapes.add("".join(
            re.escape(x) if ord(x) <= 0x7F else _escape_regex(_json_escapes(x)[0]) for x in seq
        ))
    return sorted(lits | seqs, key=lambda s: (-len(s), s)), sorted(escapes)


_ESCAPE = r"\\\\*(?:u[0-9a-fA-F]{4}|[ntrbf/'])"
"""Any JSON string escape, with one or more backslashes: in JSON text every escaped
character may stand between a secret's characters (a superset of the separators)."""


@lru_cache(maxsize=1)
def _sep_text() -> str:
    return "(?:[" + _tables()[1] + "]|" + _ESCAPE + "|" + _MARKUP + ")"


@lru_cache(maxsize=1)
def _sep_bytes() -> bytes:
    # ASCII separators as one class; any other UTF-8 character may separate in bytes
    # (a superset of the text separators, so a byte scan finds whatever text finds).
    ascii_seps = "".join(re.escape(chr(c)) for c in range(0x80) if _is_separator(chr(c)))
    return (b"(?:[" + ascii_seps.encode() + b"]|[\xc2-\xf4][\x80-\xbf]{1,3}|"
            + _ESCAPE.encode() + b"|" + _MARKUP.encode() + b")")


def _alternation_text(lits: list[str], escs: list[str]) -> str:
    # Every alternative starts with a literal character (no class, no repeat), so
    # that when this is a pattern's first group sre builds a first-character set.
    return "(?:" + "|".join([re.escape(x) for x in lits] + escs) + ")"


def _alternation_bytes(lits: list[str], escs: list[str]) -> bytes:
    enc = sorted({x.encode("utf-8") for x in lits}, key=lambda b: (-len(b), b))
    return b"(?:" + b"|".join([re.escape(x) for x in enc] + [e.encode("ascii") for e in escs]) + b")"


@dataclass(frozen=True)
class SecretMatcher:
    """Compiled patterns for one secret (module doc).

    Attributes:
        secret: the secret as given.
        skeleton: :func:`skeleton` of it.
        text: pattern over ``str``.
        bytes: pattern over UTF-8 bytes.
    """

    secret: str
    skeleton: str
    text: re.Pattern[str]
    bytes: re.Pattern[bytes]

    def search(self, text: str) -> bool:
        """Whether ``text`` holds a copy."""
        if self.text.search(text) is not None:
            return True
        return _multi_chars().search(text) is not None and bool(self._folded_spans(text))

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """``(start, end, kind)`` of every copy in ``text``, in order and not
        overlapping; kind ``exact``/``normalized``."""
        found = [(m.start(), m.end(), "exact" if m.group(0) == self.secret else "normalized")
                 for m in self.text.finditer(text)]
        if _multi_chars().search(text) is not None:
            found += self._folded_spans(text)
        out: list[tuple[int, int, str]] = []
        for s, e, kind in sorted(found):
            if out and s < out[-1][1]:
                ps, pe, pk = out[-1]
                out[-1] = (ps, max(pe, e), pk)
            else:
                out.append((s, e, kind))
        return out

    def _folded_spans(self, text: str) -> list[tuple[int, int, str]]:
        """Copies written with characters that fold to several (``Straße`` for
        ``STRASSE``, ``ﬁ`` for ``fi``): search the text with those characters folded and
        map the spans back."""
        multi = _tables()[3]
        chars: list[str] = []
        origin: list[int] = []
        for i, ch in enumerate(text):
            f = multi.get(ch, ch)
            chars.append(f)
            origin.extend([i] * len(f))
        folded = "".join(chars)
        return [(origin[m.start()], origin[m.end() - 1] + 1, "normalized")
                for m in self.text.finditer(folded)]

    def byte_spans(self, data: Any) -> list[tuple[int, int, str]]:
        """``(start, end, kind)`` of every copy in a bytes-like object (UTF-8)."""
        exact = self.secret.encode("utf-8")
        return [(m.start(), m.end(), "exact" if m.group(0) == exact else "normalized")
                for m in self.bytes.finditer(data)]

    def redact(self, text: str, replacement: str = "[REDACTED]") -> str:
        """``text`` with every copy replaced by ``replacement``, repeated until none is
        left (removing one copy can join the pieces around it into another).

        Raises:
            ValueError: copies keep appearing (a replacement that rebuilds the secret).
        """
        for _ in range(100):
            spans = self.spans(text)
            if not spans:
                return text
            for s, e, _ in reversed(spans):
                text = text[:s] + replacement + text[e:]
        raise ValueError("redact: the text still holds the secret after 100 passes")


@lru_cache(maxsize=256)
def matcher(secret: str) -> SecretMatcher:
    """The :class:`SecretMatcher` of ``secret`` (compiled once, cached).

    Raises:
        TypeError: not a string. ValueError: no letter or digit in the secret.
    """
    sk = skeleton(secret)
    sep_t, sep_b = _sep_text() + "*", _sep_bytes() + b"*"
    multi = _tables()[2]
    text_parts, byte_parts = [], []
    # A character of the secret whose fold is several (``ß`` -> ``ss``) may be written
    # either way: its stretch of the skeleton gets both spellings.
    groups = [g for g in ("".join(c for c in _fold(ch) if c.isalnum())
                          for ch in unicodedata.normalize("NFKC", secret)) if g]
    if "".join(groups) != sk:  # combining sequences fold differently one by one
        groups = list(sk)
    for span in groups:
        f = span if len(span) > 1 and span in multi else None
        t_alts, b_alts = [], []
        for c in span:
            lits, escs = _char_alternatives(c)
            t_alts.append(_alternation_text(lits, escs))
            b_alts.append(_alternation_bytes(lits, escs))
        t_frag, b_frag = sep_t.join(t_alts), sep_b.join(b_alts)
        if f is not None:
            chars = sorted(multi[f])
            escs = sorted({_escape_regex(_json_escapes(ch)[0]) for ch in chars})
            t_frag = f"(?:{t_frag}|{_alternation_text(chars, escs)})"
            b_frag = b"(?:" + b_frag + b"|" + _alternation_bytes(chars, escs) + b")"
        text_parts.append(t_frag)
        byte_parts.append(b_frag)
    # The secret as given always matches, whatever it is made of.
    text_pat = re.escape(secret) + "|" + sep_t.join(text_parts)
    byte_pat = re.escape(secret.encode("utf-8")) + b"|" + sep_b.join(byte_parts)
    return SecretMatcher(secret, sk, re.compile(text_pat), re.compile(byte_pat))


def secret_regex(secret: str) -> re.Pattern[str]:
    """The text pattern of :func:`matcher` (every spelling of ``secret``, module doc)."""
    return matcher(secret).text


def secret_bytes_regex(secret: str) -> re.Pattern[bytes]:
    """The UTF-8 bytes pattern of :func:`matcher`."""
    return matcher(secret).bytes


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def contains_secret(value: Any, secret: str) -> bool:
    """Whether ``value`` (a string, bytes, or nested dicts/lists of them) holds a copy of
    ``secret`` in any spelling of the module doc. A string that is JSON is also searched
    decoded, so a secret split by an escaped newline inside a JSON value is found.

    Raises:
        ValueError: the secret has no letter or digit.
    """
    m = matcher(secret)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return m.bytes.search(bytes(value)) is not None
    for s in _strings(value):
        if m.text.search(s):
            return True
        if s[:1] in "[{\"":
            try:
                decoded = json.loads(s)
            except ValueError:
                continue
            if any(m.text.search(x) for x in _strings(decoded)):
                return True
    return False


def redact_text(text: str, secret: str, replacement: str = "[REDACTED]") -> str:
    """``text`` with every copy of ``secret`` replaced (module doc).

    Raises:
        ValueError: the replacement itself holds the secret, or no letter or digit.
    """
    m = matcher(secret)
    if m.search(replacement):
        raise ValueError("redact: the replacement contains the secret")
    return m.redact(text, replacement)


def redact_json(value: Any, secret: str, replacement: str = "[REDACTED]") -> Any:
    """A copy of a decoded JSON-like value (dicts, lists, tuples, strings, scalars) with
    every copy of ``secret`` in every string (keys included) replaced. A string that is
    itself a JSON document is decoded, redacted and re-serialised, so it still parses.

    Raises:
        ValueError: the replacement itself holds the secret, or no letter or digit.
    """
    m = matcher(secret)
    if m.search(replacement):
        raise ValueError("redact: the replacement contains the secret")

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            if v[:1] in "[{" and m.search(v):
                # A string that is itself a JSON document: redact its decoded values, so
                # a copy split by an escape goes and the document still parses.
                try:
                    return json.dumps(walk(json.loads(v)), ensure_ascii=False)
                except ValueError:
                    pass
            return m.redact(v, replacement)
        if isinstance(v, dict):
            return {walk(k) if isinstance(k, str) else k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, tuple):
            return tuple(walk(x) for x in v)
        return v

    return walk(value)
