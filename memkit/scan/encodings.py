"""Find a secret written in UTF-16 or UTF-32 inside any bytes.

:mod:`memkit.scan.matching` matches UTF-8 bytes; text in UTF-16 (LE or BE, with or without a
BOM) or UTF-32 puts a NUL or another byte between the letters, so the UTF-8 pattern
never sees it. :func:`wide_spans` reads the same bytes as each of those encodings, at
every alignment (2 for UTF-16, 4 for UTF-32: a string can start at any byte of a
binary file), and matches the decoded text.

A copy of the secret, decoded, consists only of characters the text pattern can
consume (the spellings of the secret's letters and digits, separators, ASCII for
escapes and entities; every character within an HTML tag or comment).
:func:`alphabet_of` builds that set as a lookup table over code points (from
:mod:`memkit.scan.matching`'s own tables, so it is the matcher's definition, not a copy of
it). A *run* of a reading is a maximal sequence of its code units that are in the
table or within 1,024 units after a ``<`` unit; only runs of at least ``min_len`` units
(the fewest a copy of any secret takes) are decoded and matched. The table errs on the
side of too many characters: a run it lets through is matched exactly; a code unit it
excludes can never be part of a match (``tests/test_coverage.py`` holds the wide
passes to the text matcher on generated spellings).

Finding the runs is one pass in C over the bytes for all twelve readings at once
(``memkit/scan/_wide.c``), which skips the stretches that provably hold no run (each proof a
necessary condition on bytes, checked on 64 at a time):

* **UTF-16**: a unit in the table has its high byte in the table's set of high bytes
  (:func:`_tables_for`; about 70 of 256 values: ASCII letters, for instance, are not
  among them, so a copy of an ASCII secret needs a NUL, or a byte such as a space or
  digit, at every other byte) and is not ``0x0000``; so the position of its high byte
  holds such a byte with a byte other than NUL beside it. A unit forced by a ``<``
  follows a ``<`` unit (``3C 00`` or ``00 3C``) within 2,048 bytes.
* **UTF-32**: a unit in the table is at most ``0x10FFFF`` (its high byte is NUL) and is
  not 0; a forced one follows ``3C 00 00 00`` or ``00 00 00 3C`` within 4,096 bytes.
  Text without NUL bytes therefore holds no UTF-32 run at all.
* A run of ``min_len`` units covers ``min_len`` positions of one residue (mod 2 or 4)
  that pass, one unit apart: where no such chain starts, nothing is read unit by unit.

Each run is then read unit by unit and transcoded to UTF-8 exactly as Python's codec
decodes it with ``errors="replace"``; the runs of one window go to the byte matcher
together, joined by NUL bytes (no copy holds a NUL, and the byte pattern looks behind
only for a backslash), so a window costs one matcher call, not one per run.
``tests/test_wide.py`` holds the C pass to a unit-by-unit reading and to Python's
codecs, and :func:`wide_spans` to the numpy implementation this replaced.

Memory is bounded: the buffer (an mmap) is read in windows of 16 MiB that overlap by
four times the longest copy any secret can have (in UTF-8 bytes, so in characters),
and a window keeps the copies that start in its own part.

Deliberate difference from plain text matching, the same as the UTF-8 byte pattern's:
NUL and the other control characters that are not whitespace (nor ESC) separate no
letters here, because binary files are full of them (``1 0 0 0 2 0 0 0`` would
otherwise spell a short digit secret in UTF-16).
"""

from __future__ import annotations

import bisect
import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

import numpy as np

import memkit.scan._wide as _wide  # the compiled pass (a module of this package)
from memkit.scan.engine import single_engine
from memkit.scan.matching import SecretMatcher

if getattr(_wide, "ABI", None) != 2:  # pragma: no cover - a stale build of memkit/scan/_wide.c
    raise ImportError(f"memkit.scan._wide at {_wide.__file__} is an old build: reinstall memkit "
                      "(`make setup`, or `pip install -e .`)")

__all__ = ["WIDE_ENCODINGS", "WideSpan", "alphabet", "alphabet_of", "pick", "prepare", "wide_candidates", "wide_spans"]

WIDE_ENCODINGS: tuple[tuple[str, int], ...] = (
    ("utf-16-le", 2), ("utf-16-be", 2), ("utf-32-le", 4), ("utf-32-be", 4),
)
"""(codec, code unit width in bytes) of every wide encoding searched."""

_MAX_CP = 0x110000
_TAG_REACH = 1024
"""Code units after a ``<`` that an HTML tag or comment separator may span (the
matcher's tag and comment patterns stop after 500 characters: up to 1,000 UTF-16 units
where they are astral, and the tag's own)."""
_WINDOW_BYTES = 16 << 20
"""Bytes read per window (module doc)."""


@dataclass(frozen=True)
class WideSpan:
    """One copy found in a wide encoding.

    Attributes:
        start, end: byte offsets in the buffer (end exclusive).
        kind: ``exact`` or ``normalized``.
        encoding: codec name (:data:`WIDE_ENCODINGS`).
        text: decoded text around the copy (the run it was found in, clipped).
        text_start, text_end: the copy's character offsets in ``text``.
        secret_index: with a :class:`~memkit.scan.multi.MultiMatcher`, which secret
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


def _class_chars(body: str) -> list[tuple[int, int]]:
    """The code point ranges of a regex class body written by
    :func:`memkit.scan.matching._class_body` (escaped characters, ``lo-hi`` ranges)."""
    items: list[str] = []
    dash: list[bool] = []
    i = 0
    while i < len(body):
        if body[i] == "\\":
            items.append(body[i + 1])
            dash.append(False)
            i += 2
        elif body[i] == "-":
            dash[-1] = True
            i += 1
        else:
            items.append(body[i])
            dash.append(False)
            i += 1
    out, j = [], 0
    while j < len(items):
        if dash[j]:
            out.append((ord(items[j]), ord(items[j + 1])))
            j += 2
        else:
            out.append((ord(items[j]), ord(items[j])))
            j += 1
    return out


@lru_cache(maxsize=1)
def _base_table() -> np.ndarray:
    """Code points any secret's copy may contain whatever the secret: every separator
    of the matcher (its class of spaces, punctuation, symbols, format and combining
    characters) and ASCII (escapes, entities, tags), less the control characters that
    are neither whitespace nor ESC. Built once per process."""
    from memkit.scan.matching import spelling_tables  # the matcher's own separator class

    table = np.zeros(_MAX_CP + 1, dtype=bool)  # the last slot: every unit >= 0x110000
    for lo, hi in _class_chars(spelling_tables()[1]):
        table[lo:hi + 1] = True
    table[0xD800:0xE000] = False
    table[:0x80] = True
    for c in list(range(0x20)) + list(range(0x7F, 0xA0)):
        ch = chr(c)
        table[c] = ch.isspace() or ch == "\x1b"
    return table


@cache
def _heads(ch: str) -> frozenset[str]:
    """``ch`` and the first character of its decomposed spellings (NFD, NFKD of it, its
    upper and its lower case)."""
    out = {ch}
    for form in ("NFD", "NFKD"):
        for x in (ch, ch.upper(), ch.lower()):
            out.add(unicodedata.normalize(form, x)[:1] or x)
    return frozenset(out)


@cache
def _spellings(c: str) -> frozenset[str]:
    """Every character that spells skeleton character ``c`` in a copy: itself, its
    variants, the characters whose fold holds it (``matching._tables``)."""
    from memkit.scan.matching import spelling_tables

    variants, _, _, multi_rev = spelling_tables()
    return frozenset({c, *variants.get(c, ()), *(ch for ch, fold in multi_rev.items() if c in fold)})


def _copy_chars(secrets: Sequence[str]) -> set[str]:
    """The characters a copy of any of ``secrets`` may hold beyond :func:`_base_table`:
    every spelling of each of their skeleton characters (variants, characters folding to
    several), the secrets' own characters, and the first character of the decomposed
    spellings of all of those (per character, so many secrets cost their distinct
    characters, not their number)."""
    from memkit.scan.matching import skeleton

    chars: set[str] = set().union(*map(set, secrets)) if secrets else set()
    sk: set[str] = set()
    for s in secrets:
        sk.update(skeleton(s))
    chars |= sk
    for c in sk:
        chars |= _spellings(c)
    return set().union(*map(_heads, chars)) if chars else set()


@lru_cache(maxsize=64)
def alphabet_of(secrets: tuple[str, ...]) -> np.ndarray:
    """Lookup table (bool, length 0x110001, the last slot for code units beyond Unicode)
    of the code points a copy of any of ``secrets`` can contain (module doc):
    :func:`_base_table` plus :func:`_copy_chars` of the secrets."""
    table = _base_table().copy()
    table[[ord(ch) for ch in _copy_chars(secrets) if ord(ch) < _MAX_CP]] = True
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


@lru_cache(maxsize=16)
def _tables_for(secrets: tuple[str, ...]) -> tuple[bytes, bytes, bytes, bytes]:
    """The C pass's tables: UTF-16 units (65536 bytes), code points (a bitset of
    0x110000 bits), the high bytes of every UTF-16 unit in the table (256 bytes), and
    the characters that may spell a character of a secret (a bitset: ASCII letters and
    digits, :func:`_copy_chars`): a run with room for fewer spellings than any copy
    holds (:func:`memkit.scan.matching.fewest_spellings`) is no run to match."""
    t16 = _utf16_table(secrets)
    t32 = np.packbits(alphabet_of(secrets)[:_MAX_CP], bitorder="little").tobytes()
    high = t16.reshape(256, 256).any(axis=1)
    spell = np.zeros(_MAX_CP, dtype=bool)
    spell[[ord(c) for c in "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"]] = True
    spell[[ord(ch) for ch in _copy_chars(secrets) if ord(ch) < _MAX_CP]] = True
    return (t16.astype(np.uint8).tobytes(), t32, high.astype(np.uint8).tobytes(),
            np.packbits(spell, bitorder="little").tobytes())


@lru_cache(maxsize=16)
def _spellings_needed(secrets: tuple[str, ...]) -> int:
    from memkit.scan.matching import fewest_spellings

    return min(fewest_spellings(s) for s in set(secrets))


def _min_units(secret: str, skel_len: int) -> int:
    """Fewest code units a copy can take: one character may fold to up to three
    skeleton characters (``ß``, ligatures, Roman numerals); the secret as given counts
    too."""
    return max(1, min(math.ceil(skel_len / 3), len(secret)))


# --------------------------------------------------------------------------- matching runs




def byte_spans(m: Any, data: Any) -> list[tuple[int, int, str, int | None]]:
    """``(start, end, kind, index)`` of every copy of ``m``'s secret or secrets in UTF-8
    bytes, through the scan engine (index ``None`` for a one-secret matcher): what
    ``m.byte_spans`` returns, at the engine's speed."""
    if hasattr(m, "engine"):
        return m.byte_spans(data)
    engine = single_engine(m.secret)
    if engine is None:
        return [(s, e, k, None) for s, e, k in m.byte_spans(data)]
    return [(s, e, k, None) for s, e, k in engine.scan_bytes(data).get(0, [])]


def _text_spans(text: str, m: SecretMatcher, spans: list[tuple[int, int, str, int | None]],
                multi: bool) -> list[tuple[int, int, str, int | None]]:
    """Copies in a run of decoded text, from the UTF-8 byte pattern's ``spans`` over its
    UTF-8 encoding (in a run every non-ASCII character is a separator or a spelling of
    the secret, so this is the text pattern's result or more), plus the text pattern's
    pass for characters that fold to several (``ß`` for ``ss``) when the run holds one
    (``multi``)."""
    if not spans and not multi:
        return []
    data = text.encode("utf-8", errors="replace")
    out = []
    at_byte = at_char = 0
    for s, e, kind, idx in spans:  # byte offsets -> character offsets, left to right
        at_char += len(data[at_byte:s].decode("utf-8", errors="replace"))
        at_byte = s
        out.append((at_char, at_char + len(data[s:e].decode("utf-8", errors="replace")), kind, idx))
    if multi:
        for s, e, kind, *idx in m.spans(text):
            if not any(s < oe and os_ < e for os_, oe, _, _ in out):
                out.append((s, e, kind, idx[0] if idx else None))
    return sorted(out, key=lambda t: (t[0], t[1]))


def _secrets_of(m: Any) -> tuple[str, ...]:
    return tuple(m.secrets) if hasattr(m, "secrets") else (m.secret,)


@lru_cache(maxsize=16)
def _reach(secrets: tuple[str, ...]) -> int:
    """Bytes a window reads past its own part: four times the longest copy (UTF-32)."""
    from memkit.scan.matching import max_copy_bytes

    return 4 * max(max_copy_bytes(s) for s in set(secrets)) + 8


@lru_cache(maxsize=16)
def _min_len(secrets: tuple[str, ...]) -> int:
    from memkit.scan.matching import skeleton

    return min(_min_units(s, len(skeleton(s))) for s in set(secrets))


@lru_cache(maxsize=1)
def _folding() -> tuple[bytes, dict[int, str]]:
    """The characters that fold to several letters or digits (``ß``, ``ﬁ``, ``㎏``): a
    bitset over code points for the C pass, and their folds for :meth:`str.translate`."""
    from memkit.scan.matching import spelling_tables

    multi = spelling_tables()[3]
    bits = np.zeros(_MAX_CP, dtype=bool)
    bits[[ord(ch) for ch in multi]] = True
    return np.packbits(bits, bitorder="little").tobytes(), {ord(ch): f for ch, f in multi.items()}


def prepare(m: Any) -> None:
    """Build the UTF-16/32 pass's tables for matcher ``m`` now (about 0.2 s at 10,000
    secrets, cached per process): a process about to fork workers builds them once for
    all of them."""
    secrets = _secrets_of(m)
    _tables_for(secrets)
    _folding()
    _spellings_needed(secrets)
    _min_len(secrets)


def _window(buf: Any, m: Any, r0: int, r1: int, own0: int, own1: int,
            out: list[tuple[bool, int, WideSpan]]) -> None:
    """Copies in the runs of ``buf[r0:r1]`` that start in ``[own0, own1)``."""
    from memkit.scan.multi import text_bytes

    secrets = _secrets_of(m)
    t16, t32, high, spell = _tables_for(secrets)
    fold_bits, fold = _folding()
    raw, joined = _wide.runs(buf, r0, r1, t16, t32, high, fold_bits, spell, _spellings_needed(secrets),
                             _min_len(secrets), _TAG_REACH)
    if not raw:
        return
    runs = np.frombuffer(raw, dtype=np.int64).reshape(-1, 7)
    u0 = runs[:, 3].tolist()
    hits: dict[int, list[tuple[int, int, str, int | None]]] = {}
    for s, e, kind, idx in byte_spans(m, joined):
        j = bisect.bisect_right(u0, s) - 1
        hits.setdefault(j, []).append((s - u0[j], e - u0[j], kind, idx))
    # A run holding a character that folds to several is read by the text pattern too
    # (_text_spans), which can add a copy only where the run, folded, holds one: the
    # byte pattern over every such run folded, at once, names those runs.
    folding = np.flatnonzero(runs[:, 6]).tolist()
    multi: set[int] = set()
    if folding:
        ends = [u0[j] + len(joined) - u0[j] if j + 1 == len(u0) else u0[j + 1] for j in folding]
        folded = [text_bytes(joined[u0[j]:e - 1].decode("utf-8").translate(fold))
                  for j, e in zip(folding, ends, strict=True)]
        starts = np.cumsum([0] + [len(f) + 1 for f in folded]).tolist()
        for s, *_ in byte_spans(m, b"\0".join(folded)):
            multi.add(folding[bisect.bisect_right(starts, s) - 1])
    for j in sorted(set(hits) | multi):
        kind_code, start, end = (int(x) for x in runs[j, :3])
        codec, width = WIDE_ENCODINGS[kind_code]
        text = bytes(buf[start:end]).decode(codec, errors="replace")
        order = (0, 2, 4, 8)[kind_code] + start % width
        at_char, at_byte = 0, start
        for ts, te, kind, idx in _text_spans(text, m, hits.get(j, []), j in multi):
            at_byte += len(text[at_char:ts].encode(codec, errors="replace"))
            at_char = ts
            stop = at_byte + len(text[ts:te].encode(codec, errors="replace"))
            if not own0 <= at_byte < own1:
                continue
            clip_lo, clip_hi = max(0, ts - 64), min(len(text), te + 64)
            span = WideSpan(at_byte, stop, kind, codec, text[clip_lo:clip_hi], ts - clip_lo, te - clip_lo, idx)
            out.append((at_byte % width != 0, order, span))


def wide_candidates(buf: Any, m: Any, lo: int = 0, hi: int | None = None) -> list[tuple[bool, int, WideSpan]]:
    """Every copy in a wide reading of ``buf`` (bytes, bytearray, mmap) that starts in
    ``[lo, hi)`` (default the whole buffer), before :func:`pick` drops the overlapping
    ones: ``(misaligned, reading, span)``, misaligned when the copy does not start at a
    multiple of its code unit, reading the reading's place in the order of
    :data:`WIDE_ENCODINGS` and alignments. Reads in windows (module doc)."""
    size = len(buf)
    hi = size if hi is None else min(hi, size)
    out: list[tuple[bool, int, WideSpan]] = []
    if size < 2 or lo >= hi:
        return out
    reach = _reach(_secrets_of(m))
    a = lo
    while a < hi:
        b = min(hi, a + _WINDOW_BYTES)
        _window(buf, m, max(0, a - reach), min(size, b + reach), a, b, out)
        a = b
    return out


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


def pick(candidates: list[tuple[bool, int, WideSpan]],
         exclude: list[tuple[int, int]] | list[tuple[int, int, int | None]] | None = None) -> list[WideSpan]:
    """One copy of a secret per byte range from :func:`wide_candidates`, in order of
    offset: the same text is seen through several readings (UTF-16 BE is UTF-16 LE one
    byte on), so a reading aligned to its code unit (a string in a binary format starts
    on one) is preferred, then the order of :data:`WIDE_ENCODINGS`; copies overlapping
    a range of ``exclude`` (UTF-8 copies: ``(start, end)``, or ``(start, end, index)``
    for the copies of one secret) are dropped. Copies of different secrets are kept
    whatever their overlap (each is a copy of its own secret)."""
    found: list[WideSpan] = []
    shared = _Intervals((r[0], r[1]) for r in exclude or () if len(r) == 2)
    own: dict[int | None, list[tuple[int, int]]] = {}
    for r in exclude or ():
        if len(r) == 3:
            own.setdefault(r[2], []).append((r[0], r[1]))
    taken: dict[int | None, _Intervals] = {}
    for _, _, span in sorted(candidates, key=lambda c: (c[0], c[1], c[2].start)):
        i = bisect.bisect_right(shared.starts, span.start)
        if (i and shared.ends[i - 1] > span.start) or (i < len(shared.starts) and shared.starts[i] < span.end):
            continue
        mine = taken.get(span.secret_index)
        if mine is None:
            mine = taken[span.secret_index] = _Intervals(own.get(span.secret_index, ()))
        if mine.add(span.start, span.end):
            found.append(span)
    found.sort(key=lambda w: w.start)
    return found


def wide_spans(buf: Any, m: SecretMatcher,
               exclude: list[tuple[int, int]] | None = None) -> list[WideSpan]:
    """Every copy of ``m``'s secret (or secrets, for a
    :class:`~memkit.scan.multi.MultiMatcher`) in ``buf`` (bytes, bytearray, mmap) read as UTF-16
    LE/BE and UTF-32 LE/BE at every alignment, in order of offset. Where readings of
    one secret overlap (the same text seen through two encodings or alignments) one is
    kept (:func:`pick`); copies overlapping a UTF-8 copy in ``exclude`` (``(start,
    end)`` byte ranges, or ``(start, end, index)`` for one secret's) are dropped.

    Returns:
        :class:`WideSpan` per copy (byte offsets into ``buf``).
    """
    return pick(wide_candidates(buf, m), exclude)
