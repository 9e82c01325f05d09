"""Plain candidates of the multi-secret scan (step 2 of :mod:`memkit.scan_engine`): where a
copy that reads no window token may start, for many secrets at once.

Such a copy spells each character in ASCII, and between two characters the byte
pattern's separator run consumes every encoded construct whole (tags, entities,
percent-encoding, backslash escapes: the run is atomic and tries them before single
characters), so inside a copy a construct is always a separator. Only the first
character may sit inside a construct (a copy that starts in a tag's attribute, or at
the ``n`` of ``\\n``). So:

* every copy that starts outside a construct has its skeleton verbatim in the *plain
  letters*: the letters and digits outside every construct, case folded
  (``bytes.translate`` of the bytes with the constructs blanked);
* every copy that starts inside a construct ``C`` has its skeleton verbatim in ``C``'s
  letters and digits (less those of constructs nested in ``C``) followed by the plain
  letters after ``C``: one short *segment* per construct.

Both are searched for every skeleton by Hyperscan's literal matcher. The constructs are
found by vectorised numpy over the bytes that can start one, mirroring the separator
patterns of :mod:`memkit.matching` exactly (the greedy first-alternative parse of the
atomic separator run); constructs that start before the first offset a chunk reports
are not constructs for the copies it reports (they start after them). A tag holding
another construct is the one case read in Python.
"""

from __future__ import annotations

import bisect
from typing import Any

import hyperscan
import numpy as np

__all__ = ["PlainFinder"]

_LOWER = bytes(c + 32 if 65 <= c <= 90 else c for c in range(256))
_NOT_ALNUM = bytes(c for c in range(256) if not (48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122))
_NOT_ALNUM_OR_MARK = bytes(c for c in _NOT_ALNUM if c != 1)
_LOWER_LUT = np.frombuffer(_LOWER, dtype=np.uint8)
_MARK = 1
"""The byte that marks a construct's start in the blanked bytes (raw ``0x01`` bytes are
blanked first): its position among the plain letters is the construct's rank."""


def _lut(chars: bytes | range) -> np.ndarray:
    t = np.zeros(256, dtype=bool)
    t[list(chars)] = True
    return t


_ALNUM = _lut(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_LETTER = _lut(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_DIGIT = _lut(b"0123456789")
_HEX = _lut(b"0123456789ABCDEFabcdef")
_ONE_LETTER = _lut(b"ntrbfv0")
_BS_NEXT = _lut(b"\\ntrbfv0uUx")
_AMP_NEXT = _lut(b"#ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_LT_NEXT = _lut(b"/ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_STOP = _lut(b"<>" + bytes([*range(0x00, 0x09), *range(0x0E, 0x1B), *range(0x1C, 0x20), 0x7F]))
"""What ends a tag's body (matching's tag pattern: ``[^<>`` and control bytes ``]``)."""
_NAMES = [b"nbsp", b"amp", b"lt", b"gt", b"quot", b"apos", b"shy", b"ndash", b"mdash", b"thinsp", b"ensp", b"emsp"]
"""Entities that need no ``;`` (matching's entity pattern, in its order)."""
_MARGIN = 640
"""Bytes read past a block for the constructs that start in it (a tag: 503)."""
def _run(arr: np.ndarray, pos: np.ndarray, lut: np.ndarray, most: int) -> np.ndarray:
    """Per position, how many bytes from it on are in ``lut`` (``most + 1``: more than
    ``most``; bytes past the end count as not in it). Column by column over the runs
    still going, so the cost is the total length of the runs."""
    n = len(arr)
    out = np.full(pos.size, most + 1, dtype=np.int64)
    active = np.arange(pos.size)
    for k in range(most + 1):
        if not active.size:
            break
        q = pos[active] + k
        ok = q < n
        ok[ok] = lut[arr[q[ok]]]
        out[active[~ok]] = k
        active = active[ok]
    return out


def _at(arr: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """``arr[pos]``, 0 past the end."""
    n = len(arr)
    return np.where(pos < n, arr[np.minimum(pos, n - 1)], 0)


def constructs(arr: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The constructs with a letter or digit that start in ``[lo, hi)``, parsed as the
    byte pattern's separator run parses them from their first byte: backslash escapes
    (a run of at most 64 backslashes and ``u`` + 4 hex, ``U`` + 8, ``x`` + 2, or one of
    ``ntrbfv0``), ``%`` + 2 hex, entities (named with ``;``, the listed names, decimal,
    hex) and tags.

    Returns:
        ``(starts, ends, is_tag)``, sorted by start.
    """
    n = len(arr)
    hi2 = min(n, hi + _MARGIN)
    seg = arr[lo:hi2]
    cand = np.flatnonzero((seg == 0x5C) | (seg == 0x25) | (seg == 0x26) | (seg == 0x3C)) + lo
    if not cand.size:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0, dtype=bool)
    byte = arr[cand]
    nxt = _at(arr, cand + 1)  # a construct needs its second byte: drops most candidates in binary data
    ok = (((byte == 0x5C) & _BS_NEXT[nxt]) | ((byte == 0x25) & _HEX[nxt]) | ((byte == 0x26) & _AMP_NEXT[nxt])
          | ((byte == 0x3C) & _LT_NEXT[nxt]))
    cand, byte = cand[ok], byte[ok]
    out_s, out_e = [], []
    # backslash escapes: runs of at most 64 (longer ones are window tokens)
    bs = cand[byte == 0x5C]
    if bs.size:
        cut = np.flatnonzero(np.diff(bs) != 1) + 1
        first = np.concatenate(([0], cut))
        rs = bs[first]
        rl = np.diff(np.concatenate((first, [bs.size])))
        keep = (rs < hi) & (rl <= 64) & ((rs == 0) | (_at(arr, rs - 1) != 0x5C))
        rs, t = rs[keep], (rs + rl)[keep]
        c = _at(arr, t)
        tail = np.where(_ONE_LETTER[c], 1, 0)
        ux = np.flatnonzero((c == ord("u")) | (c == ord("U")) | (c == ord("x")))
        if ux.size:  # hex digits only where an escape letter wants them
            hexn = _run(arr, t[ux] + 1, _HEX, 8)
            cu = c[ux]
            tail[ux] = np.where((cu == ord("u")) & (hexn >= 4), 5,
                                np.where((cu == ord("U")) & (hexn >= 8), 9,
                                         np.where((cu == ord("x")) & (hexn >= 2), 3, 0)))
        ok = tail > 0
        out_s.append(rs[ok])
        out_e.append((t + tail)[ok])
    # percent-encoding
    p = cand[(byte == 0x25) & (cand < hi)]
    if p.size:
        p = p[_run(arr, p + 1, _HEX, 2) >= 2]
        out_s.append(p)
        out_e.append(p + 3)
    # entities, in the pattern's order: named with ";", a listed name, decimal, hex
    a = cand[(byte == 0x26) & (cand < hi)]
    if a.size:
        g1 = _at(arr, a + 1)
        run = _run(arr, a + 1, _ALNUM, 32)
        end = np.full(a.size, -1, dtype=np.int64)
        named = _LETTER[g1] & (run >= 2) & (run <= 32) & (_at(arr, a + 1 + run) == ord(";"))
        end[named] = (a + 2 + run)[named]
        for name in _NAMES:
            hit = (end < 0) & (run == len(name))
            for k, ch in enumerate(name):
                hit &= _at(arr, a + 1 + k) == ch
            end[hit] = (a + 1 + len(name))[hit]
        g2 = _at(arr, a + 2)
        dec = (end < 0) & (g1 == ord("#")) & _DIGIT[g2]
        d = np.minimum(_run(arr, a + 2, _DIGIT, 7), 7)
        end[dec] = (a + 2 + d + (_at(arr, a + 2 + d) == ord(";")))[dec]
        hx = (end < 0) & (g1 == ord("#")) & ((g2 == ord("x")) | (g2 == ord("X")))
        h = np.minimum(_run(arr, a + 3, _HEX, 6), 6)
        hx &= h >= 1
        end[hx] = (a + 3 + h + (_at(arr, a + 3 + h) == ord(";")))[hx]
        ok = end >= 0
        out_s.append(a[ok])
        out_e.append(end[ok])
    n_plain = sum(x.size for x in out_s)
    # tags: a letter (after "/" or not), a body without "<", ">" or control bytes, ">"
    lt = cand[(byte == 0x3C) & (cand < hi)]
    if lt.size:
        g1 = _at(arr, lt + 1)
        name = np.where(_LETTER[g1], lt + 1, np.where((g1 == ord("/")) & _LETTER[_at(arr, lt + 2)], lt + 2, -1))
        lt, name = lt[name >= 0], name[name >= 0]
        body = _run(arr, name + 1, ~_STOP, 31)
        long_ = body > 31
        if long_.any():
            body[long_] = _run(arr, name[long_] + 1, ~_STOP, 500)
        ok = (body <= 500) & (_at(arr, name + 1 + body) == ord(">"))
        out_s.append(lt[ok])
        out_e.append((name + 2 + body)[ok])
    starts = np.concatenate(out_s) if out_s else np.zeros(0, dtype=np.int64)
    ends = np.concatenate(out_e) if out_e else np.zeros(0, dtype=np.int64)
    is_tag = np.zeros(starts.size, dtype=bool)
    is_tag[n_plain:] = True
    order = np.argsort(starts, kind="stable")
    return starts[order].astype(np.int64), ends[order].astype(np.int64), is_tag[order]


SHORT_TAIL = 5
"""Constructs with at most this many letters and digits (escapes such as ``\\n`` and
``\\u00e9``, percent-encoding, most entities, short tags) are matched through the
secrets' suffixes; longer ones through segments."""

MIN_SUFFIX = 6
"""The shortest skeleton suffix searched for (shorter ones would match everywhere):
secrets with fewer than ``MIN_SUFFIX + SHORT_TAIL`` characters take segments of every
construct instead."""

_BATCH = 1 << 17
"""Segments laid out and searched at a time (bounds the memory of the layout)."""


class PlainFinder:
    """Plain candidates (module doc) of the secrets whose skeletons are ASCII.

    A copy that starts inside a construct ``C`` is ``C``'s last ``m`` letters and
    digits followed by the rest of its skeleton in the plain letters, from ``C``'s
    place among them (its *rank*) on. For a construct of at most :data:`SHORT_TAIL`
    letters and a secret of at least ``MIN_SUFFIX + SHORT_TAIL`` characters, the rest is
    a suffix of the skeleton that the plain letters are searched for anyway (one more
    literal per ``m``); every other pair is laid out as a segment (the construct's
    letters, then the plain letters after it) and searched.

    Args:
        skeletons: ``{secret index: skeleton}`` (ASCII skeletons only).
        block: bytes translated at a time (the unit that maps a hit back to its offset).
    """

    def __init__(self, skeletons: dict[int, str], block: int) -> None:
        self.ids = list(skeletons)
        self.sk = [skeletons[i] for i in self.ids]
        self.lens = [len(x) for x in self.sk]
        self.block = block
        self.long = [j for j, n in enumerate(self.lens) if n >= MIN_SUFFIX + SHORT_TAIL]
        self.short = [j for j, n in enumerate(self.lens) if n < MIN_SUFFIX + SHORT_TAIL]
        # one literal database over the plain letters: every skeleton, then the suffixes
        # sk[m:] (m = 1..SHORT_TAIL) of the long ones
        lits = [x.encode() for x in self.sk]
        self._suffix: list[tuple[int, int]] = []  # (skeleton number, m) of literal len(sk) + k
        for j in self.long:
            for m in range(1, SHORT_TAIL + 1):
                lits.append(self.sk[j][m:].encode())
                self._suffix.append((j, m))
        self._db = _literal_db(lits)
        self._short_db = _literal_db([self.sk[j].encode() for j in self.short]) if self.short else None

    def hits(self, buf: Any, arr: np.ndarray, lo: int, limit: int) -> list[tuple[int, int]]:
        """``(secret index, start)`` of every plain candidate starting in ``[lo, limit)``
        (``buf`` runs past ``limit`` by the longest copy)."""
        n = len(buf)
        starts, ends, is_tag = constructs(arr, lo, n)
        if not starts.size:
            plain, mapper, _ = self._plain(buf, buf, 0, lo, marks=False)
            return self._literal(plain, mapper, limit)[0]
        # nested: a construct that starts inside a tag (only tags hold others)
        ts, te = starts[is_tag], ends[is_tag]
        k = np.searchsorted(ts, starts, side="right") - 1
        nested = ~is_tag & (k >= 0) & (starts < te[np.maximum(k, 0)]) if ts.size else np.zeros(starts.size, bool)
        s_top, e_top = starts[~nested], ends[~nested]
        blanked = bytearray(buf[lo:n])
        view = np.frombuffer(blanked, dtype=np.uint8)
        if blanked.find(b"\x01") >= 0:  # the mark's byte value is free for marks
            view[view == _MARK] = 0x20
        sizes = e_top - s_top
        view[np.repeat(s_top - lo - np.concatenate(([0], np.cumsum(sizes)[:-1])), sizes)
             + np.arange(int(sizes.sum()))] = 0x20
        view[s_top - lo] = _MARK
        plain, mapper, ranks = self._plain(buf, blanked, lo, lo, marks=True)
        assert ranks.size == s_top.size, (ranks.size, s_top.size)
        out, suffix_hits = self._literal(plain, mapper, limit)
        # the places that can matter: long constructs, tags holding others, and short
        # ones at the rank of a suffix hit (all of them when a secret is short)
        need = (e_top - s_top > SHORT_TAIL) | np.isin(ranks, [x for _, _, x in suffix_hits])
        if nested.any():
            need[np.searchsorted(s_top, starts[nested], side="right") - 1] = True
        if self._short_db is not None:
            need[:] = True
        tails = _tails(arr, s_top[need], e_top[need], ranks[need], starts[nested], ends[nested])
        self._inside(np.frombuffer(plain, dtype=np.uint8), arr, tails, suffix_hits, limit, out)
        return out

    def _plain(self, buf: Any, src: Any, off: int, lo: int, marks: bool) -> tuple[bytes, Any, np.ndarray]:
        """The plain letters of ``buf[lo:]`` (``src[x - off]`` is ``buf[x]``, blanked
        and marked where ``marks``), the map of their offsets, and the marks' ranks."""
        n = len(buf)
        parts, kstart, bstart, ranks = [], [], [], []
        k = 0
        for b0 in range(lo, n, self.block):
            raw = bytes(src[b0 - off:min(n, b0 + self.block) - off])
            if marks:
                marked = raw.translate(_LOWER, _NOT_ALNUM_OR_MARK)
                mk = np.flatnonzero(np.frombuffer(marked, dtype=np.uint8) == _MARK)
                ranks.append(k + mk - np.arange(mk.size))
                part = marked.replace(b"\x01", b"")
            else:
                part = raw.translate(_LOWER, _NOT_ALNUM)
            parts.append(part)
            kstart.append(k)
            bstart.append(b0)
            k += len(part)
        mapper = (src, off, kstart, bstart, n, {})
        return b"".join(parts), mapper, np.concatenate(ranks) if ranks else np.zeros(0, dtype=np.int64)

    def _position(self, mapper: Any, ks: int) -> int:
        """The offset of the ``ks``-th plain letter."""
        src, off, kstart, bstart, n, cache = mapper
        j = bisect.bisect_right(kstart, ks) - 1
        if j not in cache:
            seg = np.frombuffer(bytes(src[bstart[j] - off:min(n, bstart[j] + self.block) - off]), dtype=np.uint8)
            cache[j] = np.flatnonzero(_ALNUM[seg])
        return bstart[j] + int(cache[j][ks - kstart[j]])

    def _literal(self, plain: bytes, mapper: Any,
                 limit: int) -> tuple[list[tuple[int, int]], list[tuple[int, int, int]]]:
        """Skeletons in the plain letters (copies that start outside every construct),
        and the suffix hits ``(skeleton number, m, rank)`` for :meth:`_inside`."""
        hits: list[tuple[int, int]] = []
        self._db.scan(plain, match_event_handler=lambda i, a, b, f, c: hits.append((i, b)))
        out, suffix = [], []
        count = len(self.sk)
        for pid, kend in hits:
            if pid < count:
                a = self._position(mapper, kend - self.lens[pid])
                if a < limit:
                    out.append((self.ids[pid], a))
            else:
                j, m = self._suffix[pid - count]
                suffix.append((j, m, kend - (self.lens[j] - m)))
        return out, suffix

    def _inside(self, plain: np.ndarray, arr: np.ndarray, tails: Any, suffix: list[tuple[int, int, int]],
                limit: int, out: list[tuple[int, int]]) -> None:
        """Copies that start inside a construct (class doc)."""
        pos, first, length, rank = tails
        short = length <= SHORT_TAIL
        for j, m, x in suffix:  # long secrets, short constructs: the suffix at the construct's rank
            head = self.sk[j][:m].encode()
            for c in range(int(np.searchsorted(rank, x, "left")), int(np.searchsorted(rank, x, "right"))):
                if short[c] and length[c] >= m:
                    p = pos[first[c] + length[c] - m:first[c] + length[c]]
                    if _LOWER_LUT[arr[p]].tobytes() == head and p[0] < limit:
                        out.append((self.ids[j], int(p[0])))
        if self.long:  # long secrets, long constructs
            self._segments(np.flatnonzero(~short), arr, tails, plain, self._db, list(range(len(self.sk))),
                           limit, out)
        if self._short_db is not None:  # short secrets, every construct
            self._segments(np.arange(length.size), arr, tails, plain, self._short_db, self.short, limit, out)

    def _segments(self, sel: np.ndarray, arr: np.ndarray, tails: Any, plain: np.ndarray, db: Any,
                  which: list[int], limit: int, out: list[tuple[int, int]]) -> None:
        """Lay out the segments of starting places ``sel`` ([letters][plain letters
        after][0]) in batches and search them with ``db`` (skeletons ``which``; ids past
        them are suffixes, not used here)."""
        pos, first, length, rank = tails
        reach = max(self.lens[j] for j in which) - 1
        for b in range(0, sel.size, _BATCH):
            g = sel[b:b + _BATCH]
            r_len = length[g]
            seg_off = np.concatenate(([0], np.cumsum(r_len + reach + 1)[:-1]))
            lay = np.zeros(int((r_len + reach + 1).sum()), dtype=np.uint8)
            r_first = np.concatenate(([0], np.cumsum(r_len)[:-1]))
            letters = pos[np.repeat(first[g] - r_first, r_len) + np.arange(int(r_len.sum()))]
            lay[np.repeat(seg_off - r_first, r_len) + np.arange(letters.size)] = _LOWER_LUT[arr[letters]]
            if reach and plain.size:
                cont = (rank[g][:, None] + np.arange(reach)).ravel()
                lay[((seg_off + r_len)[:, None] + np.arange(reach)).ravel()] = np.where(
                    cont < plain.size, plain[np.minimum(cont, plain.size - 1)], 0)
            hits: list[tuple[int, int]] = []
            db.scan(lay.tobytes(), match_event_handler=lambda i, a, b_, f, c, h=hits: h.append((i, b_)))
            for pid, end in hits:
                if pid >= len(which):
                    continue
                j = which[pid]
                s = end - self.lens[j]
                k = int(np.searchsorted(seg_off, s, side="right")) - 1
                o = s - int(seg_off[k])
                if o < r_len[k]:
                    a = int(letters[r_first[k] + o])
                    if a < limit:
                        out.append((self.ids[j], a))


def _literal_db(lits: list[bytes]) -> Any:
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=lits, ids=list(range(len(lits))), elements=len(lits), flags=0, literal=True)
    return db


def _tails(arr: np.ndarray, s_top: np.ndarray, e_top: np.ndarray, ranks: np.ndarray, s_in: np.ndarray,
           e_in: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The places a copy may start inside a construct: per top-level construct, the
    offsets of its letters and digits (less those of constructs nested in it); per
    nested construct, its letters then its tag's after it; each with the rank the copy
    continues at among the plain letters.

    Returns:
        ``(pos, first, length, rank)``: place ``c``'s letters are
        ``pos[first[c]:first[c] + length[c]]``; places sorted by rank.
    """
    holds = np.zeros(s_top.size, dtype=bool)
    if s_in.size:
        holds[np.searchsorted(s_top, s_in, side="right") - 1] = True
    simple = np.flatnonzero(~holds)
    sizes = (e_top - s_top)[simple]
    idx = np.repeat(s_top[simple] - np.concatenate(([0], np.cumsum(sizes)[:-1])), sizes) + np.arange(int(sizes.sum()))
    owner = np.repeat(np.arange(simple.size), sizes)
    keep = _ALNUM[arr[idx]]
    pos_parts = [idx[keep]]
    len_parts = [np.bincount(owner[keep], minlength=simple.size)]
    rank_parts = [ranks[simple]]
    for t in np.flatnonzero(holds).tolist():  # a tag that holds constructs: read in Python
        inner = [(int(s), int(e)) for s, e in zip(s_in, e_in, strict=True) if s_top[t] < s < e_top[t]]
        body = [p for p in range(int(s_top[t]), int(e_top[t]))
                if _ALNUM[arr[p]] and not any(s <= p < e for s, e in inner)]
        for g in [body] + [[p for p in range(s, e) if _ALNUM[arr[p]]] + [p for p in body if p >= e]
                           for s, e in inner]:
            pos_parts.append(np.asarray(g, dtype=np.int64))
            len_parts.append(np.asarray([len(g)], dtype=np.int64))
            rank_parts.append(np.asarray([ranks[t]], dtype=np.int64))
    pos = np.concatenate(pos_parts)
    length = np.concatenate(len_parts).astype(np.int64)
    rank = np.concatenate(rank_parts).astype(np.int64)
    first = np.concatenate(([0], np.cumsum(length)[:-1])).astype(np.int64)
    order = np.argsort(rank, kind="stable")
    return pos, first[order], length[order], rank[order]
