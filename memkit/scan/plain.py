"""Plain candidates of the multi-secret scan (step 2 of :mod:`memkit.scan.engine`): where a
copy that reads no window token may start, for many secrets at once.

Such a copy spells each character in ASCII, and between two characters the byte
pattern's separator run consumes every encoded construct whole (tags, entities,
percent-encoding, backslash escapes: the run is atomic and tries them before single
characters), so inside a copy a construct is always a separator. Only the first
character may sit inside a construct (a copy that starts in a tag's attribute, or at
the ``n`` of ``\\n``). So:

* every copy that starts outside a construct has its skeleton verbatim in the *plain
  letters*: the letters and digits outside every construct, case folded
  (one pass in C);
* every copy that starts inside a construct ``C`` has its skeleton verbatim in ``C``'s
  letters and digits (less those of constructs nested in ``C``) followed by the plain
  letters after ``C``: one short *segment* per construct.

Both are searched for every skeleton by Hyperscan's literal matcher. The plain letters,
the constructs and their ranks come from one pass in C (``memkit/scan/_letters.c``, module
``memkit.scan._letters``), which parses a construct as the separator patterns of
:mod:`memkit.scan.matching` parse it from its first byte (the greedy first-alternative parse
of the atomic separator run; ``tests/test_scan_engine.py`` checks the two agree);
constructs that start before the first offset a chunk reports are not constructs for
the copies it reports (they start after them). A tag holding another construct is the
one case read in Python.
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np

import memkit.scan._letters as _letters  # the compiled pass (a module of this package)
from memkit.scan.hsdb import compile_block

if getattr(_letters, "ABI", None) != 2:  # pragma: no cover - a stale build of memkit/scan/_letters.c
    raise ImportError(f"memkit.scan._letters at {_letters.__file__} is an old build: reinstall memkit "
                      "(`make setup`, or `pip install -e .`)")

__all__ = ["PlainFinder"]

LOWER_LUT = np.frombuffer(bytes(c + 32 if 65 <= c <= 90 else c for c in range(256)), dtype=np.uint8)
ALNUM = np.zeros(256, dtype=bool)
ALNUM[list(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")] = True

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
    a suffix of the skeleton, found where the plain letters hold the skeleton's last
    ``len - SHORT_TAIL`` letters after the suffix's first ones (one literal per secret
    for every ``m``); every other pair is laid out as a segment (the construct's
    letters, then the plain letters after it) and searched.

    Args:
        skeletons: ``{secret index: skeleton}`` (ASCII skeletons only).
        block: input bytes between two checkpoints of the C pass (a literal hit is mapped
            back to its offset from the checkpoint before it).
    """

    def __init__(self, skeletons: dict[int, str], block: int) -> None:
        self.ids = list(skeletons)
        self.sk = [skeletons[i] for i in self.ids]
        self.lens = [len(x) for x in self.sk]
        self.block = block
        self.long = [j for j, n in enumerate(self.lens) if n >= MIN_SUFFIX + SHORT_TAIL]
        self.short = [j for j, n in enumerate(self.lens) if n < MIN_SUFFIX + SHORT_TAIL]
        # one literal database over the plain letters: every skeleton, then the tail
        # sk[SHORT_TAIL:] of each long one, which ends wherever a suffix sk[m:] (m =
        # 1..SHORT_TAIL) ends: the letters before it tell which (two literals a secret,
        # not six: compiling is the cost that grows fastest with the number of secrets)
        lits = [x.encode() for x in self.sk]
        self._tail: list[int] = []  # skeleton number of literal len(sk) + k
        for j in self.long:
            lits.append(self.sk[j][SHORT_TAIL:].encode())
            self._tail.append(j)
        self._db = _literal_db(lits)
        self._short_db = _literal_db([self.sk[j].encode() for j in self.short]) if self.short else None
        self._every = list(range(len(self.sk)))
        self._reach_every = max(self.lens) - 1
        self._reach_short = max((self.lens[j] for j in self.short), default=1) - 1
        """The plain letters :meth:`_segments` reads past a starting place for every
        skeleton, and for the short ones: the longest less one."""

    def hits(self, buf: Any, arr: np.ndarray, lo: int, limit: int) -> list[tuple[int, int]]:
        """``(secret index, start)`` of every plain candidate starting in ``[lo, limit)``
        (``buf`` runs past ``limit`` by the longest copy)."""
        plain, tops, nested, cps = _letters.project(buf, lo, self.block)
        tops = np.frombuffer(tops, dtype=np.int64).reshape(-1, 4)
        nested = np.frombuffer(nested, dtype=np.int64).reshape(-1, 2)
        cps = np.frombuffer(cps, dtype=np.int64).reshape(-1, 2)
        mapper = (buf, cps[:, 0].tolist(), cps[:, 1].tolist())
        out, suffix_hits = self._literal(plain, mapper, limit)
        if not tops.size:
            return out
        s_top, e_top, ranks = tops[:, 0], tops[:, 1], tops[:, 2]
        # the places that can matter: long constructs, tags holding others, and short
        # ones at the rank of a suffix hit (all of them when a secret is short)
        need = (e_top - s_top > SHORT_TAIL) | np.isin(ranks, [x for _, _, x in suffix_hits])
        if nested.size:
            need[np.searchsorted(s_top, nested[:, 0], side="right") - 1] = True
        if self._short_db is not None:
            need[:] = True
        tails = _tails(arr, s_top[need], e_top[need], ranks[need], nested[:, 0], nested[:, 1])
        self._inside(np.frombuffer(plain, dtype=np.uint8), arr, tails, suffix_hits, limit, out)
        return out

    @staticmethod
    def _position(mapper: Any, ks: int) -> int:
        """The offset of the ``ks``-th plain letter (from the block checkpoint before it)."""
        buf, offsets, counts = mapper
        j = bisect.bisect_right(counts, ks) - 1
        return _letters.locate(buf, offsets[j], ks - counts[j])

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
            else:  # the tail: each suffix sk[m:] whose first letters precede it
                j = self._tail[pid - count]
                sk, at = self.sk[j], kend - (self.lens[j] - SHORT_TAIL)
                for m in range(1, SHORT_TAIL + 1):
                    start = kend - (self.lens[j] - m)
                    if start >= 0 and plain[start:at] == sk[m:SHORT_TAIL].encode():
                        suffix.append((j, m, start))
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
                    if LOWER_LUT[arr[p]].tobytes() == head and p[0] < limit:
                        out.append((self.ids[j], int(p[0])))
        if self.long:  # long secrets, long constructs
            self._segments(np.flatnonzero(~short), arr, tails, plain, self._db, self._every,
                           self._reach_every, limit, out)
        if self._short_db is not None:  # short secrets, every construct
            self._segments(np.arange(length.size), arr, tails, plain, self._short_db, self.short,
                           self._reach_short, limit, out)

    def _segments(self, sel: np.ndarray, arr: np.ndarray, tails: Any, plain: np.ndarray, db: Any,
                  which: list[int], reach: int, limit: int, out: list[tuple[int, int]]) -> None:
        """Lay out the segments of starting places ``sel`` ([letters][``reach`` plain
        letters after][0]) in batches and search them with ``db`` (skeletons ``which``;
        ids past them are suffixes, not used here)."""
        pos, first, length, rank = tails
        for b in range(0, sel.size, _BATCH):
            g = sel[b:b + _BATCH]
            r_len = length[g]
            seg_off = np.concatenate(([0], np.cumsum(r_len + reach + 1)[:-1]))
            lay = np.zeros(int((r_len + reach + 1).sum()), dtype=np.uint8)
            r_first = np.concatenate(([0], np.cumsum(r_len)[:-1]))
            letters = pos[np.repeat(first[g] - r_first, r_len) + np.arange(int(r_len.sum()))]
            lay[np.repeat(seg_off - r_first, r_len) + np.arange(letters.size)] = LOWER_LUT[arr[letters]]
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
    return compile_block(lits, 0, literal=True)


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
    keep = ALNUM[arr[idx]]
    pos_parts = [idx[keep]]
    len_parts = [np.bincount(owner[keep], minlength=simple.size)]
    rank_parts = [ranks[simple]]
    for t in np.flatnonzero(holds).tolist():  # a tag that holds constructs: read in Python
        inner = [(int(s), int(e)) for s, e in zip(s_in, e_in, strict=True) if s_top[t] < s < e_top[t]]
        body = [p for p in range(int(s_top[t]), int(e_top[t]))
                if ALNUM[arr[p]] and not any(s <= p < e for s, e in inner)]
        for g in [body] + [[p for p in range(s, e) if ALNUM[arr[p]]] + [p for p in body if p >= e]
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
