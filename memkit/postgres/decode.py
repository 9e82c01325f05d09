"""Copies of secrets in PostgreSQL's files, counted once per layer decoded.

One :class:`DiskDecoder` reads the byte sources of every disk surface (relation
files, WAL streams, WAL page images) and counts a copy where it is readable:

* *raw*: the secret's bytes as they are in the source (any spelling,
  :mod:`memkit.scan.matching`);
* *decompressed*: a compressed datum (:func:`memkit.postgres.pages.compressed_datums`) or a
  compressed TOAST value, decoded; raw copies inside the compressed bytes are not
  counted again;
* *across chunks*: an uncompressed TOAST value reassembled from its chunks: only copies
  that cross a chunk boundary count (the rest are raw copies already);
* *page images*: a WAL full-page image that was compressed, decompressed, then read
  like a page (raw, datums, chunks).

What cannot be decoded is counted per surface with its reason
(:attr:`PgScan.partial`): a surface with anything there is read only in part, never
clean.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memkit.postgres.pages import (
    BLCKSZ,
    TOAST_MAX_CHUNK,
    DecodeError,
    ToastPointer,
    compressed_datums,
    decompress,
    lz4_available,
    pglz_decompress,
    toast_chunks,
    toast_pointers,
)
from memkit.scan.matching import matcher, max_copy_bytes

__all__ = ["DiskDecoder", "Finder", "PgHit", "PgScan", "Source"]

_WINDOW = 24
_MASK = "[SECRET]"


@dataclass(frozen=True)
class PgHit:
    """One copy: ``secret`` as given, ``location`` (``<path>@<offset> [how]``), ``kind``
    (``exact``/``normalized``) and a ``snippet`` with every copy masked."""

    secret: str
    location: str
    kind: str
    snippet: str


@dataclass
class PgScan:
    """Copies found on one surface, and how much of it was read.

    Attributes:
        surface: ``pg_rows`` or one of the disk surfaces.
        hits: secret -> locations (one per copy).
        readable: False (with ``reason``) when the surface could not be read at all.
        reason: why not.
        notes: what the reader should know that does not limit the verdict.
        partial: what could not be decoded, one line each with its count and reason
            (``"2 compressed full-page images: the lz4 package is not installed"``);
            non-empty means the surface was read only in part: never clean.
        decoded: what was read, by kind (``files``, ``bytes``, ``compressed values``,
            ``TOAST values``, ``WAL records``, ``page images`` ...).
        found: every copy with its kind and masked snippet (the same copies as ``hits``).
    """

    surface: str
    hits: dict[str, list[str]] = field(default_factory=dict)
    readable: bool = True
    reason: str | None = None
    notes: list[str] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)
    decoded: dict[str, int] = field(default_factory=dict)
    found: list[PgHit] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Read and decoded in full (a count of 0 then means clean)."""
        return self.readable and not self.partial

    def add(self, hit: PgHit) -> None:
        """Record one copy."""
        self.hits.setdefault(hit.secret, []).append(hit.location)
        self.found.append(hit)


class Finder:
    """Every copy of any of ``secrets`` in bytes: ``spans(data)`` ->
    ``[(start, end, kind, secret index)]``; ``overlap``: the longest copy in bytes."""

    def __init__(self, secrets: Sequence[str]) -> None:
        self.secrets = list(secrets)
        if len(self.secrets) == 1:
            one = matcher(self.secrets[0])
            self._spans: Callable[[Any], list] = lambda d: [(s, e, k, 0) for s, e, k in one.byte_spans(d)]
        else:
            from memkit.scan.multi import MultiMatcher

            many = MultiMatcher(self.secrets)
            self._spans = many.byte_spans
        self.overlap = max(max_copy_bytes(s) for s in self.secrets)

    def spans(self, data: Any) -> list[tuple[int, int, str, int]]:
        return self._spans(data) if len(data) else []


def _printable(b: bytes) -> str:
    return "".join(chr(x) if 32 <= x < 127 else "." for x in b)


def _snippet(data: Any, spans: list[tuple[int, int, str, int]], s: int, e: int) -> str:
    lo, hi = max(0, s - _WINDOW), min(len(data), e + _WINDOW)
    out, i = [], lo
    for a, b, *_ in spans:
        a, b = max(a, lo), min(b, hi)
        if b <= i or a >= hi:
            continue
        if a > i:
            out.append(_printable(bytes(data[i:a])))
        out.append(_MASK)
        i = b
    if i < hi:
        out.append(_printable(bytes(data[i:hi])))
    return "".join(out)


@dataclass
class Source:
    """Bytes a copy can be found in: ``label(offset)`` names a place, ``read(start,
    length)`` reads it again (TOAST values are reassembled after every source was
    read)."""

    key: int
    label: Callable[[int], str]
    read: Callable[[int, int], bytes]


@dataclass
class _ChunkRef:
    source: Source
    start: int
    length: int
    head: bytes
    tail: bytes


@dataclass
class _Surface:
    scan: PgScan
    raw: list[tuple[int, int, int, PgHit]] = field(default_factory=list)  # (source key, start, end, hit)
    covers: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    chunks: dict[int, dict[int, dict[bytes, _ChunkRef]]] = field(default_factory=dict)
    undecoded: Counter = field(default_factory=Counter)
    decoded: Counter = field(default_factory=Counter)


class DiskDecoder:
    """Reads sources surface by surface (module doc); :meth:`finish` returns one
    :class:`PgScan` per surface.

    Args:
        secrets: the strings to look for.
        surfaces: the surface names, in report order.
        max_chunk: TOAST chunk size of the server (1996 on 8 kB pages).
    """

    def __init__(self, secrets: Sequence[str], surfaces: Sequence[str], *, max_chunk: int = TOAST_MAX_CHUNK,
                 blcksz: int = BLCKSZ) -> None:
        self.finder = Finder(secrets)
        self.max_chunk, self.blcksz = max_chunk, blcksz
        self.lz4 = lz4_available()
        self.surfaces = {s: _Surface(PgScan(s)) for s in surfaces}
        self.pointers: dict[int, ToastPointer] = {}
        self._keys = 0
        self._decoded: dict[bytes, bytes | str] = {}  # the same compressed bytes in several files
        self._cached = 0

    def decompress(self, method: str, data: Any, rawsize: int) -> bytes:
        """:func:`memkit.postgres.pages.decompress`, remembering what bytes of 256 or more
        decode to (a catalog value is in its file and in the WAL's page images; up to
        64 MB of results are kept)."""
        if len(data) < 256:
            return decompress(method, data, rawsize)
        key = hashlib.blake2b(data, digest_size=16, person=method.encode()).digest() + rawsize.to_bytes(4, "little")
        got = self._decoded.get(key)
        if got is None:
            try:
                got = decompress(method, data, rawsize)
            except DecodeError as exc:
                got = str(exc)  # not the exception: its traceback would hold the caller's buffers
            if self._cached < 64 << 20:
                self._decoded[key] = got
                self._cached += len(got)
        if isinstance(got, str):
            raise DecodeError(got)
        return got

    def source(self, label: Callable[[int], str], read: Callable[[int, int], bytes]) -> Source:
        """A new :class:`Source`."""
        self._keys += 1
        return Source(self._keys, label, read)

    def count(self, surface: str, what: str, n: int = 1) -> None:
        """Add ``n`` to what ``surface`` decoded (:attr:`PgScan.decoded`)."""
        self.surfaces[surface].decoded[what] += n

    def undecoded(self, surface: str, reason: str, n: int = 1) -> None:
        """Count ``n`` things ``surface`` could not decode, with their reason."""
        self.surfaces[surface].undecoded[reason] += n

    def cover(self, surface: str, source: Source, start: int, end: int) -> None:
        """Bytes ``[start, end)`` of ``source`` were decoded as a compressed stream:
        raw copies inside them are not counted."""
        self.surfaces[surface].covers.setdefault(source.key, []).append((start, end))

    def _hits(self, surface: str, data: Any, label: str, seam: int | None = None,
              where: Callable[[int], str] | None = None) -> list[tuple[int, int, PgHit]]:
        spans = self.finder.spans(data)
        out = []
        for s, e, kind, i in spans:
            if seam is not None and not s < seam < e:
                continue
            loc = where(s) if where is not None else label
            out.append((s, e, PgHit(self.finder.secrets[i], loc, kind, _snippet(data, spans, s, e))))
        return out

    def read(self, surface: str, data: Any, source: Source, *, seam: int | None = None,
             raw: bool = True, pages: bool = True) -> None:
        """Read ``data`` (the bytes of ``source``) on ``surface``: raw copies,
        compressed datums, TOAST chunks and pointers. With ``seam``, only what crosses
        that offset counts (a window over a boundary between two sources).
        ``raw=False``: the bytes were matched as they are elsewhere (a page image
        whose bytes are in the WAL stream). ``pages``: the bytes are relation pages
        (a TOAST chunk tuple has its page-tuple header); False for WAL record streams."""
        sf = self.surfaces[surface]
        if raw:
            for s, e, hit in self._hits(surface, data, "", seam, source.label):
                sf.raw.append((source.key, s, e, hit))
        for d in compressed_datums(data, max_size=self.blcksz, lz4=self.lz4, aligned=pages, decode=self.decompress):
            if seam is not None and not d.offset < seam < d.offset + d.size:
                continue
            if d.value is None:
                sf.undecoded[f"possible {d.method} values not decoded: {d.error}"] += 1
                continue
            sf.decoded[f"{d.method} values"] += 1
            self.cover(surface, source, d.offset, d.offset + d.size)
            for _, _, hit in self._hits(surface, d.value, f"{source.label(d.offset)} [{d.method} value]"):
                sf.scan.add(hit)
        for p in toast_pointers(data):
            self.pointers.setdefault(p.value_id, p)
        ov = self.finder.overlap
        for c in toast_chunks(data, max_chunk=self.max_chunk, pages=pages):
            if seam is not None and not c.offset < seam < c.start + c.length:
                continue
            body = bytes(data[c.start: c.start + c.length])
            digest = hashlib.blake2b(body, digest_size=16).digest()
            seqs = sf.chunks.setdefault(c.chunk_id, {}).setdefault(c.seq, {})
            if digest not in seqs:
                seqs[digest] = _ChunkRef(source, c.start, c.length, body[:ov], body[-ov:])

    # ------------------------------------------------------------------ TOAST values

    def _compressed(self, value_id: int, first: bytes | None) -> tuple[str | None, int] | None:
        """``(method or None, raw size)`` of a TOAST value from its pointer or, without
        one, from its first chunk; None when neither is known."""
        p = self.pointers.get(value_id)
        if p is not None:
            return (p.method, p.rawsize - 4)
        if first is None or len(first) < 8:
            return None
        tc = int.from_bytes(first[:4], "little")
        raw, method = tc & ((1 << 30) - 1), tc >> 30
        if method == 0 and raw > len(first) - 4:
            try:  # a pglz stream decodes from its first byte on; text almost never does
                pglz_decompress(first[4:], raw, complete=False)
                return ("pglz", raw)
            except DecodeError:
                return (None, 0)
        if method == 1 and raw > len(first) - 4:  # lz4 cannot be tried on a first chunk alone
            return ("lz4?", raw) if self.lz4 else None
        return (None, 0)

    def _first_chunks(self) -> dict[int, bytes]:
        out: dict[int, bytes] = {}
        for sf in self.surfaces.values():
            for vid, seqs in sf.chunks.items():
                if 0 in seqs and vid not in out:
                    ref = next(iter(seqs[0].values()))
                    out[vid] = ref.source.read(ref.start, ref.length)
        return out

    def _values(self, surface: str, firsts: dict[int, bytes]) -> None:
        sf = self.surfaces[surface]
        for vid, seqs in sorted(sf.chunks.items()):
            kind = self._compressed(vid, firsts.get(vid))
            refs = {k: list(v.values()) for k, v in seqs.items()}
            if kind is None and vid not in firsts:
                # neither first chunk nor pointer: keep full chunks and those after a full
                # one (the rest of a value); a lone short "last chunk" is not evidence of one
                refs = {k: v for k, v in refs.items()
                        if any(r.length == self.max_chunk for r in v)
                        or any(r.length == self.max_chunk for r in refs.get(k - 1, ()))}
                if not refs:
                    continue
            last = max(refs)
            if kind is not None and kind[0] is not None:
                first = refs[min(refs)][0]
                self._compressed_value(surface, vid, kind, refs, last, first.source.label(first.start))
                continue
            if kind is None and vid in firsts:
                sf.undecoded["TOAST values that may be lz4-compressed: the lz4 package is not installed"] += 1
            elif kind is None:
                sf.undecoded[("TOAST chunks of values whose first chunk and pointer are gone "
                              "(compressed or not cannot be told)")] += sum(len(v) for v in refs.values())
            sf.decoded["TOAST values"] += 1
            self._seams(surface, vid, refs, last)

    def _seams(self, surface: str, vid: int, refs: dict[int, list[_ChunkRef]], last: int) -> None:
        """Copies across each boundary of an uncompressed value's chunks ``k|k+1``."""
        sf = self.surfaces[surface]
        for k in range(last):
            for a in refs.get(k, ()):
                for b in refs.get(k + 1, ()):
                    if a.length < self.max_chunk:
                        continue
                    for _, _, hit in self._hits(surface, a.tail + b.head, "", len(a.tail)):
                        sf.scan.add(PgHit(hit.secret, f"{a.source.label(a.start + a.length - len(a.tail))} "
                                                      f"[TOAST value {vid}, chunks {k}|{k + 1}]", hit.kind, hit.snippet))

    def _compressed_value(self, surface: str, vid: int, kind: tuple[str | None, int],
                          refs: dict[int, list[_ChunkRef]], last: int, where: str) -> None:
        sf = self.surfaces[surface]
        method, raw = kind
        assert method is not None
        p = self.pointers.get(vid)
        n_chunks = -(-p.extsize // self.max_chunk) if p is not None else None
        prefix: list[_ChunkRef] = []
        k = 0
        while k in refs and (n_chunks is None or k < n_chunks):
            prefix.append(refs[k][0])
            if refs[k][0].length < self.max_chunk:
                break
            k += 1
        body = b"".join(r.source.read(r.start, r.length) for r in prefix)
        complete = (n_chunks is not None and len(prefix) == n_chunks) or (
            n_chunks is None and prefix and prefix[-1].length < self.max_chunk)
        after = sum(len(v) for s, v in refs.items() if s >= len(prefix))
        name = method.rstrip("?")
        value = None
        try:
            if complete:
                value = self.decompress(name, memoryview(body)[4:], raw)
            elif name == "pglz" and body:
                value = pglz_decompress(body[4:], raw, complete=False)
        except ImportError:
            sf.undecoded[f"compressed TOAST values ({name}): the {name} package is not installed"] += 1
            return
        except DecodeError:
            if method.endswith("?"):  # a guess from its first bytes: read as uncompressed
                self.pointers.pop(vid, None)
                sf.decoded["TOAST values"] += 1
                self._seams(surface, vid, refs, last)
                return
            sf.undecoded[f"compressed TOAST values ({name}) that do not decode"] += 1
            return
        if not complete and (after or name != "pglz"):
            sf.undecoded[f"TOAST chunks after a missing chunk of a compressed ({name}) value"] += max(after, 1)
        if value is None:
            return
        sf.decoded["TOAST values"] += 1
        sf.decoded[f"{name} values"] += 1
        for r in prefix:
            self.cover(surface, r.source, r.start, r.start + r.length)
        label = f"{where} [TOAST value {vid}, {len(prefix)} chunks, {name}{'' if complete else ', first part'}]"
        for _, _, hit in self._hits(surface, value, label):
            sf.scan.add(hit)

    # ------------------------------------------------------------------ results

    def finish(self) -> dict[str, PgScan]:
        """Reassemble TOAST values, drop raw copies inside decoded compressed bytes, and
        return every surface's :class:`PgScan` (hits, ``partial``, ``decoded``)."""
        firsts = self._first_chunks()
        for name, sf in self.surfaces.items():
            self._values(name, firsts)
            for key, s, e, hit in sf.raw:
                if any(a <= s and e <= b for a, b in sf.covers.get(key, ())):
                    continue
                sf.scan.add(hit)
            sf.scan.found.sort(key=lambda h: h.location)
            for secret in sf.scan.hits:
                sf.scan.hits[secret] = [h.location for h in sf.scan.found if h.secret == secret]
            sf.scan.decoded = {**dict(sf.decoded), **sf.scan.decoded}
            sf.scan.partial += [f"{n} {reason}" for reason, n in sorted(sf.undecoded.items())]
        return {name: sf.scan for name, sf in self.surfaces.items()}
