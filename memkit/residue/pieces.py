"""A buffer read in blocks and pieces, and the pieces joined: the reading of a large
file or member that :mod:`memkit.residue.pool` shares among its workers.

:func:`raw_copies` reads a buffer in blocks of :data:`BLOCK_BYTES`, the scan engine and
the wide readings one after the other on each (each reads the block from memory once,
not once per pass). :func:`blocks` of a piece of a file are what a worker returns;
:func:`join` puts the copies of a whole file together from its pieces, exactly: a
chain (each secret's copies, left to right, none overlapping) that a piece began at its
first byte agrees with the chain of the whole file from its first copy that does not
overlap the copy before the piece; where one does (the two overlap across the
boundary), the chain is read on from the end of the copy before until it meets the
piece's chain again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["BLOCK_BYTES", "Piece", "blocks", "engine_of", "join", "raw_copies"]


@dataclass
class Piece:
    """The copies that start in one block of a buffer (:func:`blocks`)."""

    lo: int
    hi: int
    states: dict[int, tuple[dict[tuple[int, int], str], list[tuple[int, int]], bool]]
    wide: list[Any]


def engine_of(m: Any) -> Any:
    """The scan engine of matcher ``m``: a :class:`memkit.scan.multi.MultiMatcher`'s own,
    or a one-secret matcher's (``None`` where no engine can read its secret)."""
    from memkit.scan.engine import single_engine

    return m.engine if hasattr(m, "engine") else single_engine(m.secret)


BLOCK_BYTES = 16 << 20
"""Bytes read by the scan engine and the wide readings one after the other (each block
costs a millisecond or so beside its bytes: 4 MiB blocks took a sixth longer)."""


def blocks(data: Any, m: Any, lo: int, hi: int) -> list[Piece]:
    """The copies that start in ``data[lo:hi]``, as pieces of :data:`BLOCK_BYTES`: per
    secret its chain from the block's start (copies, the secret as given, whether the
    pattern read it as given), and the wide candidates
    (:func:`memkit.scan.encodings.wide_candidates`)."""
    from memkit.scan.encodings import wide_candidates

    engine = engine_of(m)
    out = []
    for a in range(lo, hi, BLOCK_BYTES):
        b = min(hi, a + BLOCK_BYTES)
        st = engine.scan_part(data, a, b)
        states = {i: (st.found.get(i, {}), st.exact.get(i, []), i in st.exact_seen)
                  for i in set(st.found) | set(st.exact)}
        out.append(Piece(a, b, states, wide_candidates(data, m, a, b)))
    return out


def raw_copies(m: Any, data: Any) -> tuple[list[tuple[int, int, str, int | None]], list[Any]]:
    """The UTF-8 copies (``(start, end, kind, index)``) and the wide copies of ``data``
    for :meth:`memkit.residue.files.Scanner.raw`: read in blocks (:data:`BLOCK_BYTES`) when
    it is larger than two, else in one pass each."""
    from memkit.scan.encodings import byte_spans, pick, wide_spans

    if len(data) <= 2 * BLOCK_BYTES or engine_of(m) is None:
        spans = byte_spans(m, data)
        return spans, wide_spans(data, m, exclude=[(s, e, i) for s, e, _, i in spans])
    pieces = blocks(data, m, 0, len(data))
    spans = join(engine_of(m), data, pieces)
    if not hasattr(m, "engine"):
        spans = [(s, e, k, None) for s, e, k, _ in spans]
    return spans, pick([c for p in pieces for c in p.wide], [(s, e, i) for s, e, _, i in spans])


def _rechain(find: Any, data: Any, pos: int, hi: int, theirs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """A chain read on from ``pos`` (``find(pos) -> (start, end) | None``), until it meets
    a span of the piece's chain ``theirs`` (from there on the two agree) or starts past
    ``hi``."""
    mine: list[tuple[int, int]] = []
    known = set(theirs)
    while True:
        sp = find(pos)
        if sp is None or sp[0] >= hi:
            return mine
        if sp in known:
            return mine + [t for t in theirs if t[0] >= sp[0]]
        mine.append(sp)
        pos = sp[1] if sp[1] > sp[0] else sp[0] + 1


def join(engine: Any, data: Any, pieces: list[Piece]) -> list[tuple[int, int, str, int | None]]:
    """The copies of a whole file from its pieces, in order (module doc), as
    ``(start, end, kind, index)`` like :func:`memkit.scan.encodings.byte_spans`."""
    size = len(data)
    found: dict[int, dict[tuple[int, int], str]] = {}
    literal: dict[int, list[tuple[int, int]]] = {}
    seen: set[int] = set()
    last: dict[int, int] = {}
    last_lit: dict[int, int] = {}
    for piece in pieces:
        for i, (spans, lits, exact_seen) in sorted(piece.states.items()):
            entry = engine._entry(i)
            chain = sorted(spans)
            if chain and chain[0][0] < last.get(i, 0):  # overlaps the copy before the piece
                pattern, stop = entry.matcher.bytes, min(size, piece.hi + engine.overlap)

                def find(pos: int, pattern: Any = pattern, stop: int = stop) -> tuple[int, int] | None:
                    mt = pattern.search(data, pos, stop)
                    return mt.span() if mt else None

                chain = _rechain(find, data, last[i], piece.hi, chain)
                spans = {sp: "exact" if bytes(data[sp[0]:sp[1]]) == entry.exact else "normalized" for sp in chain}
                exact_seen = exact_seen or "exact" in spans.values()
            if chain:
                last[i] = chain[-1][1]
            found.setdefault(i, {}).update((sp, spans[sp]) for sp in chain)
            if exact_seen:
                seen.add(i)
            lits = sorted(lits)
            if lits and lits[0][0] < last_lit.get(i, 0):
                exact = entry.exact

                def find_lit(pos: int, exact: bytes = exact) -> tuple[int, int] | None:
                    at = data.find(exact, pos)
                    return (at, at + len(exact)) if at >= 0 else None

                lits = _rechain(find_lit, data, last_lit[i], piece.hi, lits)
            if lits:
                last_lit[i] = lits[-1][1]
            literal.setdefault(i, []).extend(lits)
    out: list[tuple[int, int, str, int | None]] = []
    for i in sorted(set(found) | set(literal)):
        spans = dict(found.get(i, {}))
        if i not in seen:
            for sp in literal.get(i, []):
                spans.setdefault(sp, "exact")
        out += [(s, e, k, i) for (s, e), k in spans.items()]
    return sorted(out)
