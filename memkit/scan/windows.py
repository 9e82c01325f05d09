"""The windows of the multi-secret scan: where a copy may read an encoded construct, and
which secrets may have a copy there (step 3 of :mod:`memkit.scan.engine`).

A *window token* is what the plain pattern lacks (:data:`~memkit.scan.matching.WINDOW_TOKENS`,
:func:`~memkit.scan.matching.escaped_spellings`, :func:`~memkit.scan.matching.spelling_points`). A copy that reads a token starts within its
*window*: at most ``overlap`` bytes before it (and after the last breaker,
:data:`~memkit.scan.matching.BREAKER_BYTES`, before it), at most 3 bytes after it.
:meth:`TokenWindows.find` drops tokens in stretches between breakers too short for a
copy (vectorised over all tokens) and merges the rest; :meth:`TokenWindows.name` tells,
for each window, the secrets that may have a copy there: first every secret whose
skeleton characters all have a spelling in the window (bit masks, all windows at once),
then all secrets at once over the window's :meth:`TokenWindows.events` by an automaton
(``memkit/scan/_names.c``: every secret's skeleton with only specials between its
characters). Both are supersets of the byte pattern's copies; the byte pattern itself
then searches the windows of the secrets named.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import numpy as np

import memkit.scan._names as _names  # the compiled automaton (a module of this package)
from memkit.scan.matching import (
    BREAKER_BYTES,
    MAX_SPELLING_BYTES,
    TOKEN_MAX_BYTES,
    alnum_fold,
    variants_table,
)

__all__ = ["TokenWindows"]

if getattr(_names, "ABI", None) != 5:  # pragma: no cover - a stale build of memkit/scan/_names.c
    raise ImportError(f"memkit.scan._names at {_names.__file__} is an old build: reinstall memkit "
                      "(pip install -e .) to rebuild it")

_PAD = 1024
"""Extra bytes before a token's window (a backslash run before the token is at most
64 bytes; the rest is margin)."""

_NEAR = 64
"""Bytes either side of a token that the vectorised filter reads."""

_SPELT_MAX = 1 << 16
"""Decoded texts whose events a :class:`TokenWindows` keeps (most windows decode the
same few accents, dashes and quotes again and again)."""

_BREAK_LUT = np.zeros(256, dtype=bool)
_BREAK_LUT[[b[0] for b in BREAKER_BYTES]] = True
_BREAK_BYTES = _BREAK_LUT.tobytes()

_ENTITY_DEC = re.compile(rb"&#0*([0-9]{1,8})")
_ENTITY_HEX = re.compile(rb"&#[xX]0*([0-9A-Fa-f]{1,8})")
_JSON_U = re.compile(rb"\\u([0-9A-Fa-f]{4})")
_JSON_PAIR = re.compile(rb"\\u([Dd][89ABab][0-9A-Fa-f]{2})\\+u([Dd][C-Fc-f][0-9A-Fa-f]{2})")
_UTF8 = re.compile(rb"[\xc2-\xf4][\x80-\xbf]{1,3}")
_COVER = re.compile(
    rb"\x1b\[[0-?]*[ -/]*[@-~]"
    rb"|<!--(?:(?!-->)[^\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]){0,2000}-->"
    rb"|</?[A-Za-z][^<>\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]{0,2000}>"
    rb"|&(?:#[xX][0-9A-Fa-f]{1,16};?|#[0-9]{1,16};?|[A-Za-z][A-Za-z0-9]{0,31};?)"
    rb"|(?:%[0-9A-Fa-f]{2})+"
    rb"|\\+(?:u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|x[0-9A-Fa-f]{2}|[ntrbfv0/'\"])")
"""Every encoded construct of the byte pattern at its longest, or longer
(:meth:`TokenWindows.events`): its letters and digits may be read as a separator, so they
are *special*. A tag's or comment's body is at most 500 characters
(:data:`~memkit.scan.spellings.SEP_PATTERNS_BYTES`), so at most 2,000 bytes: a byte class
bounded there covers every one, and more (a superset only names more)."""
_SPECIAL_LUT = np.zeros(256, dtype=bool)
_SPECIAL_LUT[[0x1B, ord("<"), ord("&"), ord("%"), ord("\\")]] = True
_SPECIAL_CODE = np.zeros(256, dtype=np.uint8)
_SPECIAL_CODE[ord("a"):ord("z") + 1] = np.arange(ord("A"), ord("Z") + 1)
_SPECIAL_CODE[ord("0"):ord("9") + 1] = np.arange(0x80, 0x8A)


def _decoded(tok: bytes) -> str:
    """What an escape (``\\uXXXX``, a ``\\uD8xx\\uDCxx`` pair) or a UTF-8 sequence
    (:data:`_JSON_PAIR`, :data:`_JSON_U`, :data:`_UTF8`) stands for; ``""`` for a lone
    surrogate."""
    if tok[:1] != b"\\":
        return tok.decode("utf-8", "ignore")
    m = _JSON_PAIR.fullmatch(tok)
    if m is not None:
        h, lo = int(m.group(1), 16), int(m.group(2), 16)
        return chr(0x10000 + ((h - 0xD800) << 10) + (lo - 0xDC00))
    v = int(tok[2:6], 16)
    return "" if 0xD800 <= v <= 0xDFFF else chr(v)


class TokenWindows:
    """Windows around tokens, and the secrets each names (module doc).

    Args:
        skeletons: ``{secret index: skeleton}`` of the secrets scanned (one per secret).
        spells: per token kind before the spelling points, the skeleton characters it
            can spell ("" for :data:`~memkit.scan.matching.WINDOW_TOKENS`, the character of
            each :func:`~memkit.scan.matching.escaped_spellings` pattern).
        points: :func:`~memkit.scan.matching.spelling_points` of those secrets, with the
            characters each starts a spelling of (the token
            kinds after ``spells``).
        overlap: the longest copy of any of the secrets, in bytes.
        n_min: the fewest spellings any copy of the secrets holds
            (:func:`~memkit.scan.matching.fewest_spellings`: ``ß`` is one, though it stands for
            ``ss``).
    """

    def __init__(self, skeletons: dict[int, str], spells: list[str], points: dict[bytes, frozenset[str]], overlap: int,
                 n_min: int) -> None:
        self.skeletons = skeletons
        self.unique = list(skeletons)
        self.overlap = overlap
        self.n_min = n_min
        skset = {i: frozenset(skeletons[i]) for i in self.unique}
        alphabet = frozenset().union(*skset.values())
        # each secret's characters as bits (64 a word), for the subset test of name()
        self._bit = {c: k for k, c in enumerate(sorted(alphabet))}
        words = (len(alphabet) + 63) // 64
        self._smask = np.zeros((len(self.unique), words), dtype=np.uint64)
        for row, i in enumerate(self.unique):
            for c in skset[i]:
                k = self._bit[c]
                self._smask[row, k // 64] |= np.uint64(1 << (k % 64))
        counts = np.unpackbits(self._smask.view(np.uint8), axis=1).sum(axis=1).astype(np.int32)
        by_count = np.argsort(counts, kind="stable")
        self._sorted_masks = np.ascontiguousarray(self._smask[by_count]).tobytes()
        self._sorted_counts = np.ascontiguousarray(counts[by_count]).tobytes()
        """The secrets' masks by their number of characters, fewest first (the
        prefilter of :meth:`name` stops at a window's own number)."""
        self._nonascii = frozenset(c for c in alphabet if not c.isascii())
        variants = variants_table()
        self._rev = {v: c for c in alphabet for v in variants.get(c, ())}
        # bytes of which every spelling of a character of some secret holds at least
        # one: its ASCII letters and digits, the start of an escape, the lead byte of
        # a non-ASCII spelling (the filter of find() counts them)
        self._unit_lut = np.zeros(256, dtype=bool)
        for c in alphabet:
            if c.isascii():
                self._unit_lut[[ord(c.lower()), ord(c.upper())]] = True
        self._unit_lut[[ord("&"), ord("%"), ord("\\")] + sorted({p[0] for p in points})] = True
        self._unit_lut_bytes = self._unit_lut.tobytes()
        self._zpat: dict[int, Any] = {}
        # bits of the characters each byte value (a letter or digit) and each token
        # kind (a point: what it spells; an escape that can spell anything: all) stand for
        self._bit_lut = np.zeros(256, dtype=np.uint64)
        for c, k in self._bit.items():
            if c.isascii():
                for ch in {c, c.upper()}:
                    self._bit_lut[ord(ch)] = np.uint64(1 << k)
        kinds = len(spells) + len(points)
        self._tbits = np.zeros((kinds, words), dtype=np.uint64)
        spelled_by = [set(c) for c in spells]
        for pt, starts in points.items():
            ch = pt.decode("utf-8")
            spelled = set(alnum_fold(ch)) | {self._rev[ch]} if ch in self._rev else set(alnum_fold(ch))
            spelled |= starts  # the characters whose spellings it starts (и for и + U+0306: й)
            if unicodedata.combining(ch):
                spelled |= self._nonascii
            spelled_by.append(spelled)
        for j, spelled in enumerate(spelled_by):
            for c in spelled:
                if c in self._bit:
                    k = self._bit[c]
                    self._tbits[j, k // 64] |= np.uint64(1 << (k % 64))
        self._zcode = {c: 0x90 + k % 0x6F for k, c in enumerate(sorted(self._nonascii))}
        self._spelt: dict[str, tuple[int, ...]] = {}
        """:meth:`_spell` of each text decoded so far."""
        self._spelt_raw: dict[bytes, tuple[int, ...]] = {}
        """:meth:`_spell` of each escape or UTF-8 sequence read so far, by its bytes."""
        keys = [self.units(self.skeletons[i]) for i in self.unique]
        self._trie = _names.build(keys, sorted(range(len(keys)), key=keys.__getitem__))

    def units(self, skeleton: str) -> bytes:
        """A skeleton as the events that spell it, one byte a character: the special
        event of each (upper case, ``0x80 + digit``, a non-ASCII character's code); its
        plain event is the lower-case letter or the digit itself (:meth:`events`)."""
        return bytes(int(_SPECIAL_CODE[ord(c)]) if c.isascii() else self._zcode[c] for c in skeleton)

    def find(self, arr: np.ndarray, ends: list[int], lo: int, limit: int) -> list[tuple[int, int]]:
        """The merged windows (start ranges ``[w0, w1)`` within ``[lo, limit)``) of the
        tokens ending at ``ends``, less tokens in stretches between breakers that hold
        fewer than :attr:`n_min` bytes a spelling needs (:attr:`_unit_lut`; a stretch
        whose breakers are both within 16, or :data:`_NEAR`, bytes of the token's last
        byte). A token's window starts after the last breaker before it, at most
        ``TOKEN_MAX_BYTES + overlap + _PAD`` bytes back, and ends 4 bytes after it
        (``memkit/scan/_names.c``, one pass in C)."""
        if not ends:
            return []
        reach = TOKEN_MAX_BYTES + self.overlap + _PAD
        got = _names.windows(arr, ends, lo, limit, self.n_min, reach, _NEAR, self._unit_lut_bytes, _BREAK_BYTES)
        flat = np.frombuffer(got, dtype=np.int64).tolist()
        return list(zip(flat[0::2], flat[1::2], strict=True))

    def name(self, buf: Any, arr: np.ndarray, windows: list[tuple[int, int]], ends: list[int],
                      kinds: list[int]) -> tuple[list[tuple[int, int]], list[list[tuple[int, int, int]]]]:
        """The secrets each window names: the windows' contents (from the window's
        start to the first breaker after its end; windows whose contents meet are
        merged) are tested at once for holding a spelling of every skeleton character of
        a secret (letters and digits, and the characters the tokens in it can spell,
        as bit masks); the windows where some secret passes are read as
        :meth:`events`, and every secret's :meth:`units`, with any specials between its
        characters, searched in them at once (``memkit/scan/_names.c``).

        Returns:
            the windows (merged) and, for each, ``(secret index, start, end)``: the
            stretches of the window (byte offsets) where a copy of a secret it names may
            start and read a token (a reading of its events begins at most
            :data:`~memkit.scan.matching.MAX_SPELLING_BYTES` bytes after a copy's start
            and ends after it; a stretch near no token holds only copies the plain
            pattern finds), in order per secret.
        """
        n = len(arr)
        w0 = np.fromiter((w[0] for w in windows), dtype=np.int64, count=len(windows))
        w1 = np.fromiter((w[1] for w in windows), dtype=np.int64, count=len(windows))
        cap = np.minimum(w1 + self.overlap, n)
        g = 256
        idx = np.minimum(w1[:, None] + np.arange(g), n - 1)
        brk = _BREAK_LUT[arr[idx]] & (idx < cap[:, None])
        near = brk.any(axis=1)
        stop = np.where(near, w1 + np.argmax(brk, axis=1), cap)
        for k in np.flatnonzero(~near).tolist():  # no breaker close by: look as far as a copy reaches
            hit = np.flatnonzero(_BREAK_LUT[arr[w1[k]:cap[k]]])
            stop[k] = w1[k] + int(hit[0]) if hit.size else cap[k]
        merged_w, merged_e = [], []  # contents that meet are one window
        for a_, b_, e_ in zip(w0.tolist(), w1.tolist(), stop.tolist(), strict=True):
            if merged_w and a_ < merged_e[-1]:
                merged_w[-1] = (merged_w[-1][0], b_)
                merged_e[-1] = max(merged_e[-1], e_)
            else:
                merged_w.append((a_, b_))
                merged_e.append(e_)
        m = len(merged_w)
        c0 = np.fromiter((w[0] for w in merged_w), dtype=np.int64, count=m)
        c1 = np.asarray(merged_e, dtype=np.int64)
        sizes = c1 - c0
        first = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        gather = np.repeat(c0 - first, sizes) + np.arange(int(sizes.sum()))
        words = self._smask.shape[1]
        wmask = np.zeros((m, words), dtype=np.uint64)
        wmask[:, 0] = np.bitwise_or.reduceat(self._bit_lut[arr[gather]], first)
        # the characters the tokens in each window can spell
        e = np.asarray(ends, dtype=np.int64)
        kd = np.asarray(kinds, dtype=np.int64)
        tb = self._tbits[kd]
        has = tb.any(axis=1)
        if has.any():
            k = np.searchsorted(c0, e[has] - 1, side="right") - 1
            ok = (k >= 0) & (e[has] - 1 < c1[np.maximum(k, 0)])
            np.bitwise_or.at(wmask, k[ok], tb[has][ok])
        named: list[list[tuple[int, int, int]]] = [[] for _ in range(m)]
        e_sorted = np.sort(e)
        need = np.flatnonzero(wmask.any(axis=1))
        if need.size:
            held = _names.covered(self._sorted_masks, self._sorted_counts, words,
                                  np.ascontiguousarray(wmask[need]).tobytes())
            for k in need[np.frombuffer(held, dtype=np.uint8).astype(bool)].tolist():
                z, at = self.events(bytes(buf[c0[k]:c1[k]]))
                w0_, w1_ = merged_w[k]
                for j, first, last in _names.find(self._trie, z):
                    r0 = max(w0_, int(c0[k] + at[first]) - MAX_SPELLING_BYTES)
                    r1 = min(w1_, int(c0[k] + at[last]) + 1)
                    # a copy starting here ends in the spelling of its last event: the
                    # stretch reads a token only if one ends near it
                    far = int(c0[k] + at[last]) + MAX_SPELLING_BYTES + TOKEN_MAX_BYTES
                    if r0 < r1 and np.searchsorted(e_sorted, far, side="right") > np.searchsorted(
                            e_sorted, r0 - 16, side="right"):
                        named[k].append((self.unique[j], r0, r1))
        return merged_w, named

    def events(self, content: bytes) -> tuple[bytes, np.ndarray]:
        """The window's *spelling events* in order, one byte each: a letter or digit
        outside every encoded construct as itself, lower case (*plain*); one inside a
        construct, or before a combining mark, upper case or ``0x80 + digit``
        (*special*); a character an escape or a non-ASCII spelling encodes, folded,
        as a special at its start (non-ASCII skeleton characters as ``0x90`` on); a
        breaker as ``0x00``. Between two characters of a copy there are only
        separators, which hold no plain letter or digit: so a copy is its skeleton
        (:meth:`units`, each character plain or special) with specials skipped between its
        characters, a superset the windows' secrets are named by.

        Returns:
            the events, and the offset in ``content`` of each (where the spelling it
            stands for begins, or up to :data:`~memkit.scan.matching.MAX_SPELLING_BYTES`
            bytes after: a combining mark's event is at the mark, its base before it)."""
        arr = np.frombuffer(content, dtype=np.uint8)
        covers: list[int] = []  # (start, end) of each construct: its letters and digits are special
        extra: list[tuple[int, int]] = []  # (position, code) of decoded and non-ASCII events
        run_end = 0  # a percent or backslash run already read: its later bytes start only suffixes of it
        for p in np.flatnonzero(_SPECIAL_LUT[arr]).tolist():
            if p < run_end and arr[p] in (0x25, 0x5C):
                continue
            m = _COVER.match(content, p)
            if m is None:
                continue
            covers += (p, m.end())
            tok = m.group(0)
            if tok[:1] in (b"%", b"\\"):
                run_end = m.end()
            if tok[:2] == b"&#":
                x = _ENTITY_DEC.match(tok) or _ENTITY_HEX.match(tok)
                if x is not None:  # a spelling may read a prefix of the digits ("&#820" holds "&#82")
                    digits, base_ = x.group(1), 10 if tok[2:3].isdigit() else 16
                    for k in range(1, len(digits) + 1):
                        v = int(digits[:k], base_)
                        self._spelled(chr(v) if v <= 0x10FFFF else "", p, extra)
            elif tok[:1] == b"%":  # each character the run encodes, at its own %
                raw = bytes.fromhex(tok.replace(b"%", b"").decode())
                j = 0
                while j < len(raw):
                    size = 1 if raw[j] < 0xC0 else 2 if raw[j] < 0xE0 else 3 if raw[j] < 0xF0 else 4
                    try:  # a well-formed UTF-8 sequence is one character ...
                        ch = raw[j:j + size].decode("utf-8")
                    except UnicodeDecodeError:  # ... a stray byte is none, and the next % is its own
                        size, ch = 1, raw[j:j + 1].decode("utf-8", "ignore")
                    self._spelled(ch, p + 3 * j, extra)
                    j += size
        if not self._nonascii:  # each escape and UTF-8 character alone: what it spells, by its bytes
            for rx in (_JSON_PAIR, _JSON_U, _UTF8):
                for m in rx.finditer(content):
                    tok = m.group(0)
                    done = self._spelt_raw.get(tok)
                    if done is None:
                        done = self._spell(_decoded(tok))
                        if len(self._spelt_raw) < _SPELT_MAX:
                            self._spelt_raw[tok] = done
                    if done:
                        at = m.start()
                        extra.extend((at, c) for c in done)
        else:
            decoded = sorted((m.start(), m.end(), _decoded(m.group(0)))
                             for rx in (_JSON_PAIR, _JSON_U, _UTF8) for m in rx.finditer(content)
                             if rx is not _JSON_U or not 0xD800 <= int(m.group(1), 16) <= 0xDFFF)
            spelt: dict[int, str] = {}  # end -> what the character, with the marks before it, spells
            for s, e, chars in decoded:
                if chars and unicodedata.combining(chars[0]):
                    chars = self._base(content, s, spelt) + chars  # a decomposed spelling
                    chars = unicodedata.normalize("NFC", chars)
                spelt[e] = chars
                self._spelled(chars, s, extra)
        xp = np.fromiter((e[0] for e in extra), dtype=np.int64, count=len(extra))
        xc = np.fromiter((e[1] for e in extra), dtype=np.uint8, count=len(extra))
        order = np.argsort(xp, kind="stable")
        codes, pos = _names.events(content, np.asarray(covers, dtype=np.int64).tobytes(), bool(self._nonascii),
                                   _BREAK_BYTES, xp[order].tobytes(), xc[order].tobytes())
        return codes, np.frombuffer(pos, dtype=np.int64)

    @staticmethod
    def _base(content: bytes, at: int, spelt: dict[int, str]) -> str:
        """What a combining mark at ``at`` composes with: the character (with its own
        marks) decoded just before it, or the ASCII letter there, across the backslash
        run of an escaped mark (``e\\\\u0301``, ``и\\u0306``, ``e`` + two marks)."""
        k = at
        while k > 0 and content[k - 1] == 0x5C:
            k -= 1
        if k in spelt:
            return spelt[k]
        if k > 0 and (65 <= content[k - 1] <= 90 or 97 <= content[k - 1] <= 122):
            return chr(content[k - 1])
        return ""

    def _spelled(self, chars: str, at: int, out: list[tuple[int, int]]) -> None:
        """Special events (:meth:`events`) for the characters ``chars`` encodes at ``at``:
        each folded, and the skeleton characters of the secrets it spells; then, for a
        base with its marks, the whole folded (``H`` + U+0331 folds to ``ẖ``, which no
        character of it does alone). Every event is special, so one too many never
        hides a copy."""
        if not chars:
            return
        done = self._spelt.get(chars)
        if done is None:
            done = self._spell(chars)
            if len(self._spelt) < _SPELT_MAX:
                self._spelt[chars] = done
        out.extend((at, c) for c in done)

    def _spell(self, chars: str) -> tuple[int, ...]:
        """The codes of :meth:`_spelled` for ``chars``."""
        codes: list[int] = []
        spelt = ""
        for ch in chars:
            folded = alnum_fold(ch)  # in order: "ß" spells "ss"
            spelt += folded + (self._rev[ch] if ch in self._rev and self._rev[ch] not in folded else "")
        if len(chars) > 1:
            spelt += alnum_fold(chars)
        for c in spelt:
            if c.isascii():
                codes.append(int(_SPECIAL_CODE[ord(c)]))
            elif c in self._zcode:
                codes.append(self._zcode[c])
        return tuple(codes)
