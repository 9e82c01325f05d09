"""When decoding a JSON text cannot show a copy its raw text does not.

A stored JSON text (an SQL row, a JSON Lines file) is matched raw, then decoded (its
strings, keys and numbers, as :func:`json.loads` and
:func:`memkit.residue.values.strings_in` read them) and matched again, because an
escape can hide a copy: ``\\ud835\\udc00`` is a mathematical letter the raw patterns do
not spell escaped, ``\\u003cb\\u003e`` a tag only the decoded text holds. Decoding is
most of what reading such a text costs. :func:`decoding_adds_nothing` names the texts
where it provably finds nothing more, so the decoding can be skipped there.

The proof. Let ``T`` be the raw text and ``S`` one string its decoding yields. When the
conditions below hold, ``S`` is, character for character, a stretch of ``T`` between two
quotes in which some characters are written as escapes, and every copy the text
pattern (:attr:`memkit.scan.matching.SecretMatcher.text`) accepts in ``S`` it accepts in
``T``, unit for unit:

1. ``T`` is ASCII, so every non-ASCII character of ``S`` is an escape in ``T`` (no
   literal combining mark sits beside an escaped base, whose mixed spelling no pattern
   holds).
2. Every escape in ``T`` is *harmless* (:func:`harmless`):
   ``\\n \\t \\r \\b \\f \\" \\/``, which decode to separators and which the pattern
   reads as one escape separator each; or ``\\uXXXX`` of a BMP character ``c`` at or
   above U+0080 that does not fold to several characters (``ß``: the pattern reads those
   only folded), and that is either a character the pattern also spells escaped
   (below U+2000, or a halfwidth/fullwidth form: :func:`memkit.scan.spellings.escapes`)
   or one that folds to no letter or digit (a separator: one escape separator in
   ``T``). So each escape is one unit in both readings, a spelling of the same letter or
   a separator, and the escape stops a separator run (``(?!next)``) exactly where its
   character does. ASCII letters escaped (``\\u0041``) are not harmless: an entity's
   end (``&amp`` followed by no letter) reads differently before them; nor are ``\\\\``
   (backslash runs of other lengths), other ASCII escapes (``\\u003c`` is ``<``),
   surrogates or control characters (``\\u001b`` opens an ANSI code).
3. No escape lies inside a tag (between a ``<`` and the next ``<`` or ``>``), and when
   ``T`` holds a comment opener (``<!--``) it holds no escape: a tag's or comment's
   body is bounded in characters, and escapes lengthen it.
4. ``T`` holds no number with a fraction or an exponent, nor ``NaN`` or ``Infinity``:
   :func:`json.loads` rewrites those (``1e5`` is read as ``100000.0``); an integer reads
   as its own digits. In JSON inside a string the whitespace before a number may be an
   escape (``"[\\n1e5]"``), so a number after ``\\n``, ``\\t`` or ``\\r`` counts too.

Copies the raw reading finds are found by the raw reading; those of ``S`` are
therefore among them, and where the raw text holds none, neither does any decoded
string (nor any JSON text inside one: without ``\\\\`` it holds no string escapes, so
the same argument applies to it). A text that is not JSON decodes to nothing, so the
conditions need not ask. :func:`decoding_adds_nothing` only ever answers ``False``
when unsure; ``tests/test_scan_json_escapes.py`` holds it to the decoding itself.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

import memkit.scan._escapes as _escapes  # the compiled pass (a module of this package)

if getattr(_escapes, "ABI", None) != 3:  # pragma: no cover - a stale build of memkit/scan/_escapes.c
    raise ImportError(f"memkit.scan._escapes at {_escapes.__file__} is an old build: reinstall memkit "
                      "(pip install -e .) to rebuild it")

__all__ = ["decoding_adds_nothing", "decoding_adds_nothing_joined", "harmless", "joins", "unproven"]

_JUDGED_BELOW, _JUDGED_FROM = 0x80, 0x2070
"""The ``\\uXXXX`` escapes :func:`harmless` judges one by one: ASCII (below U+0080), and
U+2070 up (surrogates among them); from U+0080 below U+2070 every one is harmless but
those of characters that fold to several (:func:`_tables`)."""

_SEPARATOR_ESCAPES = frozenset(["\\n", "\\t", "\\r", "\\b", "\\f", '\\"', "\\/"])


@lru_cache(maxsize=1 << 14)
def harmless(escape: str) -> bool:
    """Whether a JSON escape (``\\n``, ``\\u00e9``) reads, in the raw text, as one unit
    of the same meaning as the character it decodes to (module doc, condition 2)."""
    if escape in _SEPARATOR_ESCAPES:
        return True
    if len(escape) != 6 or escape[1] != "u" or any(c not in "0123456789abcdefABCDEF" for c in escape[2:]):
        return False
    return bool(_harmless_points()[int(escape[2:], 16)])


@lru_cache(maxsize=1)
def _harmless_points() -> bytes:
    """65536 bytes, by BMP code point: whether its ``\\uXXXX`` escape is :func:`harmless`:
    a character at or above U+0080, no surrogate, that does not fold to several, and
    either spelled escaped by the patterns too (below U+2000, halfwidth and fullwidth
    forms) or folding to no letter or digit (every fold at once:
    :func:`memkit.scan.spellings.fold_each`)."""
    from memkit.scan.spellings import fold_each, spelling_tables

    multi = spelling_tables()[3]
    table = bytearray(65536)
    table[0x80:0xD800] = b"\1" * (0xD800 - 0x80)
    table[0xE000:] = b"\1" * (0x10000 - 0xE000)
    ask = [cp for cp in range(0x2000, 0x10000) if table[cp] and not 0xFF00 <= cp <= 0xFFEF]
    for cp, folded in zip(ask, fold_each([chr(cp) for cp in ask]), strict=True):
        if folded.isalnum() if len(folded) == 1 else any(c.isalnum() for c in folded):
            table[cp] = 0
    for ch in multi:
        if ord(ch) < 0x10000:
            table[ord(ch)] = 0
    return bytes(table)


@lru_cache(maxsize=1)
def _tables() -> tuple[bytes, bytes, bytes]:
    """The compiled pass's tables (``memkit/scan/_escapes.c``): by the first three hex
    digits of a ``\\u`` escape, whether it is judged one by one; by code point, whether
    its escape is :func:`harmless`; and whether it is a character from U+0080 below
    U+2070 that folds to several (``ß``: unproven however its escape is cased). About
    30 ms, once per process (built before workers fork)."""
    from memkit.scan.spellings import spelling_tables

    judged3 = bytes(v << 4 < _JUDGED_BELOW or v << 4 >= _JUDGED_FROM for v in range(4096))
    fold4 = bytearray(65536)
    for ch in spelling_tables()[3]:
        if _JUDGED_BELOW <= ord(ch) < _JUDGED_FROM:
            fold4[ord(ch)] = 1
    return judged3, _harmless_points(), bytes(fold4)


def unproven(data: Any, ascii: bool = False) -> Iterator[int]:
    """Where, in texts joined by NUL bytes (``data``, bytes-like), a text is left
    unproven (module doc, conditions 2 to 4, and with ``ascii`` condition 1: a byte
    above 0x7F; ``memkit/scan/_escapes.c``): one offset inside each such text, the byte
    after the one that showed it, in order."""
    return iter(np.frombuffer(_escapes.unproven(data, *_tables(), ascii), dtype=np.int64).tolist())


def joins(data: Any) -> tuple[np.ndarray, bool, bool]:
    """Where texts joined by NUL bytes (``data``, bytes-like) are joined, in one compiled
    pass: the offsets of its NUL bytes (int64, in order); whether it holds a breaker
    other than NUL (a byte :func:`memkit.scan.multi.text_bytes` rewrites); whether it
    holds a byte above 0x7F (is not ASCII)."""
    nuls, flags = _escapes.texts(data)
    return np.frombuffer(nuls, dtype=np.int64), bool(flags & 1), bool(flags & 2)


def decoding_adds_nothing(texts: Sequence[str]) -> list[bool]:
    """For each of ``texts``: ``True`` where no string, key or number its JSON decoding
    yields (at any depth) can hold a copy of any secret that the raw text does not
    hold (module doc: the proof and its four conditions); ``False`` where that is not
    proven. One compiled pass over all the texts, joined by NULs."""
    out = [t.isascii() for t in texts]
    ascii_ = [i for i, ok in enumerate(out) if ok]
    if not ascii_:
        return out
    data = "\0".join(texts[i] for i in ascii_).encode("ascii")
    starts = [0]
    for i in ascii_:
        starts.append(starts[-1] + len(texts[i]) + 1)
    for to in unproven(data):
        out[ascii_[bisect.bisect_right(starts, to - 1) - 1]] = False
    return out


def decoding_adds_nothing_joined(joined: Any) -> bool:
    """Whether :func:`decoding_adds_nothing` says ``True`` of every one of the texts
    whose UTF-8, joined by NUL bytes, is ``joined`` (bytes-like, a file's map too; none
    of the texts holds a NUL): the same pass over the same bytes, with no per-text work
    and no copy."""
    return next(unproven(joined, ascii=True), None) is None
