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

__all__ = ["decoding_adds_nothing", "decoding_adds_nothing_joined", "harmless"]

_UNPROVEN = [
    rb"[^0-9A-Za-z][0-9]+(?:\.[0-9]|[eE][+-]?[0-9])",  # a fraction or exponent (not an escape's hex)
    rb"\\[ntr][0-9]+(?:\.[0-9]|[eE][+-]?[0-9])",      # one after escaped whitespace (JSON in a string)
    rb"NaN|Infinity",                                   # constants the decoder reads as numbers
    rb"\\\\",                                           # an escaped backslash
    rb"<[^<>\\\x00]*\\",                                # an escape in a tag's body
    rb"<!--[^\x00]*\\|\\[^\x00]*<!--",                  # an escape beside a comment
]
"""What leaves a text unproven (module doc, conditions 2 to 4), over texts joined by NULs
(which a JSON text does not hold unescaped) after one NUL. An escape that is not JSON
(``\\x41``, ``\\u12``) needs no pattern: a text holding one does not decode, so its
decoding holds nothing."""

_JUDGED = rb"\\u(?:00[0-7]|[dD][89abAB][0-9A-Fa-f]|20[7-9A-Fa-f]|2[1-9A-Fa-f][0-9A-Fa-f]|[3-9A-Fa-f][0-9A-Fa-f]{2})"
"""The first five characters of each ``\\uXXXX`` :func:`harmless` judges one by one:
ASCII, surrogates, and U+2070 up; from U+0080 below U+2070 every one is harmless but
those of :func:`_folding_below`."""

_SEPARATOR_ESCAPES = frozenset(["\\n", "\\t", "\\r", "\\b", "\\f", '\\"', "\\/"])


@lru_cache(maxsize=1 << 14)
def harmless(escape: str) -> bool:
    """Whether a JSON escape (``\\n``, ``\\u00e9``) reads, in the raw text, as one unit
    of the same meaning as the character it decodes to (module doc, condition 2)."""
    from memkit.scan.spellings import alnum_fold, spelling_tables

    if escape in _SEPARATOR_ESCAPES:
        return True
    if len(escape) != 6 or escape[1] != "u" or any(c not in "0123456789abcdefABCDEF" for c in escape[2:]):
        return False
    cp = int(escape[2:], 16)
    if cp < 0x80 or 0xD800 <= cp <= 0xDFFF:
        return False
    ch = chr(cp)
    if ch in spelling_tables()[3]:
        return False
    return cp < 0x2000 or 0xFF00 <= cp <= 0xFFEF or not alnum_fold(ch)


@lru_cache(maxsize=1)
def _folding_below() -> tuple[bytes, ...]:
    """``\\uXXXX`` of each character from U+0080 below U+2070 that folds to several
    (``ß``), the only ones there :func:`harmless` refuses."""
    from memkit.scan.spellings import spelling_tables

    return tuple(b"\\\\u%04x" % ord(ch) for ch in sorted(spelling_tables()[3]) if 0x80 <= ord(ch) < 0x2070)


@lru_cache(maxsize=1)
def _database() -> Any:
    """One Hyperscan database over a batch of texts: id 0 for what leaves a text
    unproven, id 1 for the escapes :func:`harmless` judges one by one (a regex pass
    costs several ns a byte; this one, a fraction of that)."""
    import hyperscan

    folding = _folding_below()
    exprs = [*_UNPROVEN, *folding, _JUDGED]
    ids = [0] * (len(exprs) - 1) + [1]
    flags = [hyperscan.HS_FLAG_DOTALL] * len(_UNPROVEN) + [hyperscan.HS_FLAG_CASELESS] * len(folding) + [0]
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=exprs, ids=ids, elements=len(exprs), flags=flags)
    return db


def _unproven(data: bytes) -> Iterator[int]:
    """Where, in ASCII texts joined by NULs after one NUL (``data``), a match leaves its
    text unproven: the offset of the match's last byte plus one, in order."""
    found: list[int] = []

    def seen(kind: int, _frm: int, to: int, _flags: int, _ctx: Any) -> None:
        if kind == 0 or not harmless(data[to - 5:to + 1].decode("ascii")):
            found.append(to)

    _database().scan(data, match_event_handler=seen)
    return iter(found)


def decoding_adds_nothing(texts: Sequence[str]) -> list[bool]:
    """For each of ``texts``: ``True`` where no string, key or number its JSON decoding
    yields (at any depth) can hold a copy of any secret that the raw text does not
    hold (module doc: the proof and its four conditions); ``False`` where that is not
    proven. One Hyperscan pass over all the texts, joined by NULs."""
    out = [t.isascii() for t in texts]
    ascii_ = [i for i, ok in enumerate(out) if ok]
    if not ascii_:
        return out
    data = ("\0" + "\0".join(texts[i] for i in ascii_)).encode("ascii")
    starts = [1]
    for i in ascii_:
        starts.append(starts[-1] + len(texts[i]) + 1)
    for to in _unproven(data):
        out[ascii_[bisect.bisect_right(starts, to - 1) - 1]] = False
    return out


def decoding_adds_nothing_joined(joined: bytes) -> bool:
    """Whether :func:`decoding_adds_nothing` says ``True`` of every one of the texts
    whose UTF-8, joined by NUL bytes, is ``joined`` (none of which holds a NUL): the same
    pass over the same bytes, with no per-text work."""
    return joined.isascii() and next(_unproven(b"\0" + joined), None) is None
