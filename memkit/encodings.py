"""Find a secret written in UTF-16 or UTF-32 inside any bytes (issue 21, section 2).

:mod:`memkit.matching` matches UTF-8 bytes; text in UTF-16 (LE or BE, with or without a
BOM) or UTF-32 puts a NUL or another byte between the letters, so the UTF-8 pattern
never sees it. :func:`wide_spans` reads the same bytes as each of those encodings, at
every alignment (2 for UTF-16, 4 for UTF-32: a string can start at any byte of a
binary file), and matches the decoded text (:func:`_text_spans`: the matcher's UTF-8
pattern over the text re-encoded, plus its text pass for characters that fold to
several, such as ``ß``).

Decoding a whole binary file as text twelve times and matching it would be slow and
would feed the matcher long stretches of garbage. A cheaper equivalent: a copy of the
secret, decoded, consists only of characters the text pattern can consume (the
spellings of the secret's letters and digits, separators, ASCII for escapes and
entities; every character within an HTML tag or comment). :func:`alphabet` builds that
set as a lookup table over code points (from :mod:`memkit.matching`'s own tables, so
it is the matcher's definition, not a copy of it); numpy maps every code unit through
it, and only runs of consumable code units long enough to hold the secret are decoded
and matched. The table errs on the side of too many characters: a run it lets through
is matched exactly; a code unit it excludes can never be part of a match
(``tests/test_coverage.py`` holds the wide passes to the text matcher on generated
spellings). ``benchmarks/bench_coverage.py`` measures the cost against the UTF-8 pass.

Deliberate difference from plain text matching, the same as the UTF-8 byte pattern's:
NUL and the other control characters that are not whitespace (nor ESC) separate no
letters here, because binary files are full of them (``1 0 0 0 2 0 0 0`` would
otherwise spell a short digit secret in UTF-16).
"""

from __future__ import annotations

import bisect
import math
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from memkit.matching import SecretMatcher

__all__ = ["WIDE_ENCODINGS", "WideSpan", "alphabet", "alphabet_of", "wide_spans"]

WIDE_ENCODINGS: tuple[tuple[str, int], ...] = (
    ("utf-16-le", 2), ("utf-16-be", 2), ("utf-32-le", 4), ("utf-32-be", 4),
)
"""(codec, code unit width in bytes) of every wide encoding searched."""

_MAX_CP = 0x110000
_TAG_REACH = 512
"""Code units after a ``<`` that an HTML tag or comment separator may span (the
matcher's tag and comment patterns stop after 500 characters)."""
_WINDOW_BYTES = 64 << 20
_OVERLAP_BYTES = 4 << 20
"""Bytes are read in windows of 64 MiB overlapping by 4 MiB (memory stays bounded; a
copy is missed only if its letters are spread over more than 4 MiB)."""


@dataclass(frozen=True)
class WideSpan:
    """One copy found in a wide encoding.

    Attributes:
        start, end: byte offsets in the buffer (end exclusive).
        kind: ``exact`` or ``normalized``.
        encoding: codec name (:data:`WIDE_ENCODINGS`).
        text: decoded text around the copy (the run it was found in, clipped).
        text_start, text_end: the copy's character offsets in ``text``.
        secret_index: with a :class:`~memkit.multi_matcher.MultiMatcher`, which secret
            this is a copy of (``None`` for one secret).
    """

    start: int
    end: int
    kind: str
    encoding: str
    text: str
    text_start: int
    text_end: int
    secret_index: int | None = None


@lru_cache(maxsize=1)
def _base_table() -> np.ndarray:
    """Code points any secret's copy may contain whatever the secret: every separator
    of the matcher (its class of spaces, punctuation, symbols, format and combining
    characters) and ASCII (escapes, entities, tags), less the control characters that
    are neither whitespace nor ESC. Built once per process."""
    import re

    from memkit.matching import _tables  # the matcher's own separator class

    sep = re.compile("[" + _tables()[1] + "]")
    table = np.zeros(_MAX_CP + 1, dtype=bool)  # the last slot: every unit >= 0x110000
    every = "".join(chr(c) for c in range(_MAX_CP) if not 0xD800 <= c <= 0xDFFF)
    table[[ord(ch) for ch in sep.findall(every)]] = True
    table[:0x80] = True
    for c in list(range(0x20)) + list(range(0x7F, 0xA0)):
        ch = chr(c)
        table[c] = ch.isspace() or ch == "\x1b"
    return table


def _copy_chars(secret: str) -> set[str]:
    """The characters a copy of ``secret`` may hold beyond :func:`_base_table`: every
    spelling of each of its skeleton characters (``matching._tables``: variants,
    characters folding to several), the first character of their decomposed
    spellings, and the secret's own characters."""
    from memkit.matching import _tables, skeleton

    variants, _, _, multi_rev = _tables()
    sk = set(skeleton(secret))
    chars: set[str] = set(secret) | sk
    for c in sk:
        chars |= set(variants.get(c, ()))
    chars |= {ch for ch, fold in multi_rev.items() if sk & set(fold)}
    for ch in list(chars):
        for form in ("NFD", "NFKD"):
            for x in (ch, ch.upper(), ch.lower()):
                chars.add(unicodedata.normalize(form, x)[:1] or x)
    return chars


@lru_cache(maxsize=64)
def alphabet_of(secrets: tuple[str, ...]) -> np.ndarray:
    """Lookup table (bool, length 0x110001, the last slot for code units beyond Unicode)
    of the code points a copy of any of ``secrets`` can contain (module doc):
    :func:`_base_table` plus :func:`_copy_chars` of each secret."""
    chars: set[str] = set()
    for secret in secrets:
        chars |= _copy_chars(secret)
    table = _base_table().copy()
    table[[ord(ch) for ch in chars if ord(ch) < _MAX_CP]] = True
    table[_MAX_CP] = False
    return table


def alphabet(secret: str) -> np.ndarray:
    """:func:`alphabet_of` one secret."""
    return alphabet_of((secret,))


@lru_cache(maxsize=64)
def _utf16_table(secrets: tuple[str, ...]) -> np.ndarray:
    """:func:`alphabet_of` over UTF-16 code units: the BMP part, plus every surrogate
    half (an astral spelling or separator is a pair of them)."""
    table = alphabet_of(secrets)[:0x10000].copy()
    table[0xD800:0xE000] = True
    return table


def _min_units(secret: str, skel_len: int) -> int:
    """Fewest code units a copy can take: one character may fold to up to three
    skeleton characters (``ß``, ligatures, Roman numerals); the secret as given counts
    too."""
    return max(1, min(math.ceil(skel_len / 3), len(secret)))


def _runs(mask: np.ndarray, min_len: int) -> Iterator[tuple[int, int]]:
    if mask.size == 0:
        return
    change = np.flatnonzero(mask[1:] != mask[:-1]) + 1
    bounds = np.concatenate(([0], change, [mask.size]))
    starts = bounds[:-1][0 if mask[0] else 1::2]
    ends = bounds[1:][0 if mask[0] else 1::2]
    keep = (ends - starts) >= min_len
    yield from zip(starts[keep].tolist(), ends[keep].tolist(), strict=True)


def _units(buf: Any, offset: int, width: int, big: bool, count: int) -> np.ndarray:
    dtype = np.dtype(f"{'>' if big else '<'}u{width}")
    return np.frombuffer(buf, dtype=dtype, count=count, offset=offset)


def _text_spans(text: str, m: SecretMatcher) -> list[tuple[int, int, str, int | None]]:
    """Copies in a run of decoded text: the UTF-8 byte pattern over its UTF-8 encoding
    (in a run every non-ASCII character is a separator or a spelling of the secret, so
    this is the text pattern's result or more, and several times faster), plus the text
    pattern's pass for characters that fold to several (``ß`` for ``ss``) when the run
    holds one."""
    from memkit.matching import _multi_chars

    data = text.encode("utf-8", errors="replace")
    spans = m.byte_spans(data)
    if not spans and _multi_chars().search(text) is None:
        return []
    out = []
    at_byte = at_char = 0
    for s, e, kind, *idx in spans:  # byte offsets -> character offsets, left to right
        at_char += len(data[at_byte:s].decode("utf-8", errors="replace"))
        at_byte = s
        out.append((at_char, at_char + len(data[s:e].decode("utf-8", errors="replace")), kind,
                    idx[0] if idx else None))
    if _multi_chars().search(text) is not None:
        for s, e, kind, *idx in m.spans(text):
            if not any(s < oe and os_ < e for os_, oe, _, _ in out):
                out.append((s, e, kind, idx[0] if idx else None))
    return sorted(out, key=lambda t: (t[0], t[1]))


def _pass(buf: Any, base: int, length: int, codec: str, width: int, align: int,
          m: SecretMatcher, table: np.ndarray, min_len: int) -> Iterator[WideSpan]:
    """One encoding at one alignment over ``buf[base:base+length]``."""
    count = (length - align) // width
    if count < min_len:
        return
    units = _units(buf, base + align, width, codec.endswith("be"), count)
    # one gather per code unit: the UTF-16 table admits surrogate halves (astral
    # characters), the UTF-32 one has a last slot for every unit beyond Unicode
    mask = np.take(table, units, mode="clip")
    lt = np.flatnonzero(units == 0x3C)
    if 0 < lt.size <= 4096:  # every unit within reach of a "<" may sit inside a tag or comment
        for p in lt.tolist():
            mask[p: p + _TAG_REACH] = True
    elif lt.size:
        delta = (np.bincount(lt, minlength=count + 1)
                 - np.bincount(np.minimum(lt + _TAG_REACH, count), minlength=count + 1))
        mask |= np.cumsum(delta[:-1]) > 0
    for s, e in _runs(mask, min_len):
        lo = base + align + s * width
        raw = bytes(buf[lo: base + align + e * width])
        text = raw.decode(codec, errors="replace")
        at_char, at_byte = 0, lo
        for ts, te, kind, idx in _text_spans(text, m):  # character offsets -> byte offsets
            at_byte += len(text[at_char:ts].encode(codec, errors="replace"))
            at_char = ts
            end = at_byte + len(text[ts:te].encode(codec, errors="replace"))
            clip_lo, clip_hi = max(0, ts - 64), min(len(text), te + 64)
            yield WideSpan(at_byte, end, kind, codec, text[clip_lo:clip_hi], ts - clip_lo, te - clip_lo, idx)


class _Intervals:
    """Disjoint byte ranges, kept sorted: ``add`` takes a range unless it overlaps one
    already taken (a bisection, so many copies cost n log n, not n squared)."""

    def __init__(self, ranges: Any = ()) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        for s, e in sorted(ranges):
            if not self.starts or s >= self.ends[-1]:
                self.starts.append(s)
                self.ends.append(e)

    def add(self, start: int, end: int) -> bool:
        i = bisect.bisect_right(self.starts, start)
        if i and self.ends[i - 1] > start:  # the range before reaches into this one
            return False
        if i < len(self.starts) and self.starts[i] < end:  # the next one starts inside
            return False
        self.starts.insert(i, start)
        self.ends.insert(i, end)
        return True


def wide_spans(buf: Any, m: SecretMatcher,
               exclude: list[tuple[int, int]] | None = None) -> list[WideSpan]:
    """Every copy of ``m``'s secret (or secrets, for a
    :class:`~memkit.multi_matcher.MultiMatcher`) in ``buf`` (bytes, bytearray, mmap) read as UTF-16
    LE/BE and UTF-32 LE/BE at every alignment, in order of offset. Where readings
    overlap (the same text seen through two encodings or alignments) one is kept, a
    reading aligned to its code unit first; copies overlapping a UTF-8 copy in
    ``exclude`` (``(start, end)`` byte ranges) are dropped.

    Returns:
        :class:`WideSpan` per copy (byte offsets into ``buf``).
    """
    size = len(buf)
    if size < 2:
        return []
    from memkit.matching import skeleton

    # One secret, or every secret of a MultiMatcher: one pass over the union alphabet.
    secrets = tuple(m.secrets) if hasattr(m, "secrets") else (m.secret,)
    table32 = alphabet_of(secrets)
    table16 = _utf16_table(secrets)
    min_len = min(_min_units(s, len(skeleton(s))) for s in secrets)
    candidates: list[tuple[bool, int, WideSpan]] = []
    step = _WINDOW_BYTES - _OVERLAP_BYTES
    base = 0
    order = 0
    while True:
        length = min(_WINDOW_BYTES, size - base)
        for codec, width in WIDE_ENCODINGS:
            for align in range(width):
                table = table16 if width == 2 else table32
                for span in _pass(buf, base, length, codec, width, align, m, table, min_len):
                    candidates.append((span.start % width != 0, order, span))
                order += 1
        if base + length >= size:
            break
        base += step
    # The same text is seen through several readings (UTF-16 BE is UTF-16 LE one byte
    # on): keep one per byte range, preferring a reading aligned to its code unit (a
    # string in a binary format starts on one), then the order of WIDE_ENCODINGS.
    found: list[WideSpan] = []
    taken = _Intervals(exclude or ())
    for _, _, span in sorted(candidates, key=lambda c: (c[0], c[1], c[2].start)):
        if taken.add(span.start, span.end):
            found.append(span)
    found.sort(key=lambda w: w.start)
    return found
