"""PostgreSQL's on-disk encodings of a value, decoded: compressed datums (pglz, lz4),
TOAST chunks and pointers, and the layout of an 8 kB heap page.

A value PostgreSQL stores is not always its bytes as written (PostgreSQL manual,
"TOAST"; ``src/include/varatt.h``, ``src/include/access/htup_details.h``,
``src/include/storage/bufpage.h``):

* a value over about 2 kB is compressed (``pglz``, or ``lz4`` where the server was
  built with it): in a tuple it is a varlena with a 4-byte header whose two low bits
  are ``10``, then ``va_tcinfo`` (raw size in 30 bits, method in the top 2), then the
  compressed bytes;
* a value still too large is moved out of line to the table's TOAST relation, cut in
  chunks of at most 1996 bytes (8 kB pages): rows ``(chunk_id oid, chunk_seq int4,
  chunk_data bytea)``; the tuple keeps an 18-byte pointer (``varatt_external``: raw
  size, stored size and method, value id, TOAST relation). A compressed value is
  chunked compressed (its chunks hold ``va_tcinfo`` and the compressed bytes);
* a deleted tuple stays on its page until ``VACUUM`` prunes it, and pruned bytes stay
  in the page's free space until something overwrites them.

The finders here read any bytes (a relation file, a WAL record stream, a page image):
every offset is tried, so live tuples, dead tuples, free space and WAL record data
are read alike, aligned or not. A candidate counts only when it decodes exactly
(pglz: every input byte consumed, exactly the raw size produced), so a false
candidate in unrelated bytes is dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "BLCKSZ",
    "TOAST_MAX_CHUNK",
    "Chunk",
    "CompressedDatum",
    "DecodeError",
    "ToastPointer",
    "compressed_datums",
    "decompress",
    "describe_offset",
    "lz4_available",
    "pglz_decompress",
    "restore_page",
    "toast_chunks",
    "toast_pointers",
]

BLCKSZ = 8192
"""PostgreSQL's default page size (``--with-blocksize``), in bytes."""

TOAST_MAX_CHUNK = 1996
"""Bytes of value data in one TOAST chunk on 8 kB pages (``TOAST_MAX_CHUNK_SIZE``)."""

METHODS = {0: "pglz", 1: "lz4"}
"""``va_tcinfo`` / ``va_extinfo`` compression method ids (``ToastCompressionId``)."""

_MAX_RAW = (1 << 30) - 1
_BLOCK = 1 << 22  # bytes a numpy pass looks at once


class DecodeError(ValueError):
    """Bytes that are not a valid stream of the claimed compression method."""


def _segments(ctrl: int) -> tuple[tuple[bool, int], ...]:
    """A control byte as runs, low bit first: ``(is_tag, count)``."""
    out: list[tuple[bool, int]] = []
    for i in range(8):
        tag = bool(ctrl >> i & 1)
        if out and out[-1][0] == tag:
            out[-1] = (tag, out[-1][1] + 1)
        else:
            out.append((tag, 1))
    return tuple(out)


_RUNS = tuple(_segments(c) for c in range(256))


def pglz_decompress(src: bytes | memoryview, rawsize: int, *, complete: bool = True) -> bytes:
    """Decompress PostgreSQL's pglz format (``src/common/pg_lzcompress.c``).

    The stream is a sequence of control bytes, each followed by up to 8 items (low
    bit first): a clear bit is one literal byte; a set bit a 2-byte tag (match
    length minus 3 in the low 4 bits of the first byte, an offset of 12 bits back
    into the output), with a third byte extending the length when it reads 18.

    Args:
        src: the compressed bytes (without varlena header or ``va_tcinfo``).
        rawsize: the size of the decompressed value, in bytes.
        complete: require that all of ``src`` is consumed and exactly ``rawsize``
            bytes come out (PostgreSQL's ``check_complete``); False decodes the
            longest prefix the input allows (a value whose later chunks are gone).

    Returns:
        The decompressed bytes.

    Raises:
        DecodeError: a tag that points before the start of the output or past the
            end of the input, or (``complete``) sizes that do not match.
    """
    out = bytearray()  # grown as it is written: most candidates fail within a few bytes
    sp = dp = 0
    n = len(src)
    while sp < n and dp < rawsize:
        ctrl = src[sp]
        sp += 1
        for tag, count in _RUNS[ctrl]:
            if sp >= n or dp >= rawsize:
                break
            if not tag:  # `count` literal bytes
                k = min(count, n - sp, rawsize - dp)
                out += src[sp: sp + k]
                sp += k
                dp += k
                continue
            for _ in range(count):
                if sp >= n or dp >= rawsize:
                    break
                if sp + 2 > n or (src[sp] & 0x0F == 0x0F and sp + 3 > n):
                    if complete:
                        raise DecodeError("pglz: tag past the end of the input")
                    return bytes(out)
                b0 = src[sp]
                off = (b0 & 0xF0) << 4 | src[sp + 1]
                length = (b0 & 0x0F) + 3
                sp += 2
                if length == 18:
                    length += src[sp]
                    sp += 1
                if off == 0 or off > dp:
                    raise DecodeError(f"pglz: offset {off} before the start of the output")
                if length > rawsize - dp:
                    length = rawsize - dp
                start = dp - off
                if off >= length:
                    out += out[start: start + length]
                else:  # the copy overlaps what it writes: the last `off` bytes repeat
                    out += (out[start:dp] * (length // off + 1))[:length]
                dp += length
    if complete and (dp != rawsize or sp != n):
        raise DecodeError(f"pglz: {sp} of {n} input bytes make {dp} of {rawsize} output bytes")
    return bytes(out)


def lz4_available() -> bool:
    """Whether PyPI's ``lz4`` (the ``postgres`` extra) can be imported."""
    try:
        import lz4.block  # noqa: F401
    except ImportError:
        return False
    return True


def decompress(method: str, data: bytes | memoryview, rawsize: int) -> bytes:
    """Decompress ``data`` to exactly ``rawsize`` bytes with PostgreSQL's ``method``.

    Args:
        method: ``pglz`` (memkit's own decoder), ``lz4`` (a raw LZ4 block, PyPI's
            ``lz4``) or ``zstd`` (a zstd frame, PyPI's ``zstandard``; WAL page images).
        data: the compressed bytes.
        rawsize: the decompressed size.

    Raises:
        DecodeError: the bytes are not a valid stream of ``method`` of that size.
        ImportError: the library for ``method`` is not installed.
        ValueError: an unknown method.
    """
    if method == "pglz":
        return pglz_decompress(data, rawsize)
    if method == "lz4":
        import lz4.block

        try:
            out = lz4.block.decompress(bytes(data), uncompressed_size=rawsize)
        except lz4.block.LZ4BlockError as exc:
            raise DecodeError(f"lz4: {exc}") from exc
    elif method == "zstd":
        import zstandard

        try:
            out = zstandard.ZstdDecompressor().decompress(bytes(data), max_output_size=rawsize)
        except zstandard.ZstdError as exc:
            raise DecodeError(f"zstd: {exc}") from exc
    else:
        raise ValueError(f"unknown compression method {method!r}")
    if len(out) != rawsize:
        raise DecodeError(f"{method}: {len(out)} bytes out, {rawsize} expected")
    return out


@dataclass(frozen=True)
class CompressedDatum:
    """A compressed varlena found in some bytes.

    Attributes:
        offset: where its 4-byte header starts in the bytes searched.
        size: its stored size, header included (``VARSIZE``).
        method: ``pglz`` or ``lz4``.
        rawsize: the size of the value decompressed.
        value: the decompressed bytes; None when ``error`` says why not.
        error: why it was not decoded (only for a method whose library is missing:
            other candidates that do not decode are not datums).
    """

    offset: int
    size: int
    method: str
    rawsize: int
    value: bytes | None
    error: str | None = None


def _u32(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return (a[idx].astype(np.uint32) | (a[idx + 1].astype(np.uint32) << 8)
            | (a[idx + 2].astype(np.uint32) << 16) | (a[idx + 3].astype(np.uint32) << 24))


_TRAILING_ZEROS = np.array([8] + [(c & -c).bit_length() - 1 for c in range(1, 256)], dtype=np.int64)


def _pglz_start_ok(a: np.ndarray, idx: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Whether the pglz stream of each candidate (data at ``idx + 8``) can start as
    PostgreSQL's does: its first tag (after the literals its first one or two control
    bytes announce) copies from at most as far back as those literals reach, and
    not from offset 0."""
    n = len(a)
    end = idx.astype(np.int64) + size
    ok = np.ones(len(idx), dtype=bool)
    base, written = idx.astype(np.int64) + 8, np.zeros(len(idx), dtype=np.int64)
    for _ in range(2):  # two control bytes: up to 16 literals before the first tag
        ctrl_at = np.minimum(base, n - 1)
        ctrl = a[ctrl_at]
        t = _TRAILING_ZEROS[ctrl]
        tag = base + 1 + t
        has_tag = (ctrl != 0) & (tag + 1 < end)
        b0 = a[np.minimum(tag, n - 1)]
        b1 = a[np.minimum(tag + 1, n - 1)].astype(np.int64)
        ok &= ~has_tag | (((b0 & 0xF0) == 0) & (b1 >= 1) & (b1 <= written + t))
        done = ctrl != 0
        written = np.where(done, written, written + 8)
        base = np.where(done, base, base + 9)
        if done.all():
            break
    return ok


def _as_array(data: bytes | bytearray | memoryview) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


def compressed_datums(data: bytes | bytearray | memoryview, *, max_size: int = BLCKSZ,
                      lz4: bool | None = None, aligned: bool = False,
                      decode: Callable[[str, Any, int], bytes] = decompress) -> Iterator[CompressedDatum]:
    """Every compressed varlena in ``data`` that decodes, at any offset.

    A candidate has a 4-byte compressed header (``(h & 3) == 2``) of a size that fits
    in a page and in ``data``, a method of 0 (pglz) or 1 (lz4), a raw size of at
    least 32 bytes (pglz's minimum input) and at most 255 times the stored size; it
    counts when it decompresses exactly. Decoded datums are not searched inside.

    Args:
        data: the bytes (a file's mmap, a WAL stream, a page).
        max_size: the largest stored size looked for (an inline datum fits in a page).
        lz4: whether lz4 datums can be decoded (default: :func:`lz4_available`); when
            not, lz4 candidates come back with ``value=None`` and ``error``.
        aligned: ``data`` is whole pages, so a datum with a 4-byte header starts on a
            4-byte boundary (variable-length types align to at least 4, PostgreSQL
            manual, "CREATE TYPE"); False: any offset (a WAL record stream).
        decode: :func:`decompress` or a function that answers like it (a cache).

    Yields:
        :class:`CompressedDatum` in offset order.
    """
    if lz4 is None:
        lz4 = lz4_available()
    a = _as_array(data)
    n = len(a)
    skip_to = 0
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    for lo in range(0, max(n - 12, 0), _BLOCK):
        hi = min(lo + _BLOCK, n - 12)
        seg = a[lo: hi + 12]
        m = ((seg[:hi - lo] & 3) == 2) & (seg[2: hi - lo + 2] == 0) & (seg[3: hi - lo + 3] == 0)
        idx = np.nonzero(m)[0] + lo
        if aligned:
            idx = idx[idx % 4 == 0]
        if not len(idx):
            continue
        size = (a[idx].astype(np.uint32) | (a[idx + 1].astype(np.uint32) << 8)) >> 2
        ok = (size >= 12) & (size <= max_size) & (idx + size <= n)
        idx, size = idx[ok], size[ok]
        if not len(idx):
            continue
        tc = _u32(a, idx + 4)
        raw = tc & _MAX_RAW
        method = tc >> 30
        stored = size - 8
        ok = (method <= 1) & (raw >= 32) & (raw >= stored) & (raw <= stored * 255 + 16)
        ok &= (method == 1) | _pglz_start_ok(a, idx, size)
        for o, s, r, mt in zip(idx[ok].tolist(), size[ok].tolist(), raw[ok].tolist(), method[ok].tolist(),
                               strict=True):
            if o < skip_to:
                continue
            name = METHODS[mt]
            body = view[o + 8: o + s]
            if name == "lz4" and not lz4:
                yield CompressedDatum(o, s, name, r, None, "the lz4 package is not installed")
                continue
            try:
                value = decode(name, body, r)
            except DecodeError:
                continue
            skip_to = o + s
            yield CompressedDatum(o, s, name, r, value)


@dataclass(frozen=True)
class Chunk:
    """A TOAST chunk tuple found in some bytes.

    Attributes:
        offset: where its ``chunk_id`` starts in the bytes searched.
        chunk_id: the value id (``va_valueid`` of its pointer).
        seq: ``chunk_seq`` (0 for the value's first chunk).
        start: where its data starts (after the bytea header).
        length: bytes of data (``TOAST_MAX_CHUNK`` for every chunk but the last).
    """

    offset: int
    chunk_id: int
    seq: int
    start: int
    length: int


def toast_chunks(data: bytes | bytearray | memoryview, *, max_chunk: int = TOAST_MAX_CHUNK,
                 pages: bool = True) -> list[Chunk]:
    """Every TOAST chunk tuple in ``data``: in a page (a heap tuple header ends 24
    bytes before ``chunk_id``) and in a WAL insert record (an ``xl_heap_header`` puts
    the same fields at the same distance). The shape: ``t_infomask2`` of 3 attributes
    6 bytes before, no null bitmap, ``t_hoff`` = 24 2 bytes before; then ``chunk_id``
    (not 0), ``chunk_seq`` under 2**20 and a 4-byte bytea header of 1 to
    ``max_chunk`` data bytes that fit in ``data``. ``pages``: ``data`` is whole pages,
    so the tuple starts on an 8-byte boundary with a ``t_xmin`` that is not 0 and a
    ``t_ctid`` line pointer number from 1 to 2048 (index tuples have the same shape
    but not these); False: any offset (a WAL record stream)."""
    a = _as_array(data)
    n = len(a)
    out: list[Chunk] = []
    first = 24 if pages else 6
    for lo in range(first, max(n - 12, first), _BLOCK):
        hi = min(lo + _BLOCK, n - 12)
        idx = np.nonzero(a[lo - 2: hi - 2] == 24)[0] + lo  # t_hoff: the rarest byte first
        if pages:
            idx = idx[idx % 8 == 0]
        if not len(idx):
            continue
        m = (a[idx - 6] == 3) & ((a[idx - 5] & 0x07) == 0) & ((a[idx - 4] & 1) == 0)
        m &= (a[idx + 7] == 0) & (a[idx + 6] < 0x10) & ((a[idx + 8] & 3) == 0) & (a[idx + 10] == 0)
        m &= a[idx + 11] == 0
        if pages:
            m &= ((a[idx - 8] | a[idx - 7]) != 0) & (a[idx - 7] < 8)
            m &= (a[idx - 24] | a[idx - 23] | a[idx - 22] | a[idx - 21]) != 0
        idx = idx[m]
        if not len(idx):
            continue
        cid = _u32(a, idx)
        seq = _u32(a, idx + 4)
        size = ((a[idx + 8].astype(np.uint32) | (a[idx + 9].astype(np.uint32) << 8)) >> 2)
        ok = (cid != 0) & (size >= 5) & (size <= max_chunk + 4) & (idx + 8 + size <= n)
        for i, c, s, z in zip(idx[ok].tolist(), cid[ok].tolist(), seq[ok].tolist(), size[ok].tolist(), strict=True):
            out.append(Chunk(i, c, s, i + 12, z - 4))
    return out


@dataclass(frozen=True)
class ToastPointer:
    """An on-disk TOAST pointer (``varatt_external``) found in some bytes.

    Attributes:
        offset: where its 2-byte header (``0x01``, tag 18) starts.
        rawsize: the value's size with a 4-byte header (``va_rawsize``).
        extsize: the bytes stored in chunks (``va_extinfo`` & 2**30-1).
        method: ``pglz``/``lz4`` when the stored bytes are compressed, else None.
        value_id: ``va_valueid``, the chunks' ``chunk_id``.
        toastrelid: the OID of the TOAST relation.
    """

    offset: int
    rawsize: int
    extsize: int
    method: str | None
    value_id: int
    toastrelid: int


def toast_pointers(data: bytes | bytearray | memoryview) -> list[ToastPointer]:
    """Every on-disk TOAST pointer in ``data`` (any offset) whose fields agree: stored
    size at most the raw size less 4 (less: compressed, with a known method), value
    id and TOAST relation not 0."""
    a = _as_array(data)
    n = len(a)
    out: list[ToastPointer] = []
    for lo in range(0, max(n - 18, 0), _BLOCK):
        hi = min(lo + _BLOCK, n - 18)
        seg = a[lo: hi + 1]
        idx = np.nonzero((seg[:hi - lo] == 0x01) & (seg[1: hi - lo + 1] == 18))[0] + lo
        if not len(idx):
            continue
        raw = _u32(a, idx + 2).astype(np.int64)
        ext = _u32(a, idx + 6)
        vid = _u32(a, idx + 10)
        rel = _u32(a, idx + 14)
        size = ext & _MAX_RAW
        method = ext >> 30
        ok = (raw > 4) & (raw <= _MAX_RAW) & (size > 0) & (size <= raw - 4) & (vid != 0) & (rel != 0)
        ok &= (size == raw - 4) | (method <= 1)
        for i, r, s, mt, v, t in zip(idx[ok].tolist(), raw[ok].tolist(), size[ok].tolist(), method[ok].tolist(),
                                     vid[ok].tolist(), rel[ok].tolist(), strict=True):
            out.append(ToastPointer(i, r, s, None if s == r - 4 else METHODS[mt], v, t))
    return out


# --------------------------------------------------------------------------- pages

_LP_STATES = {0: "unused", 1: "normal", 2: "redirect", 3: "dead"}


def describe_offset(page: bytes | memoryview, offset: int, *, blcksz: int = BLCKSZ) -> str:
    """Where ``offset`` falls in a heap page: ``page header``, ``line pointers``,
    ``free space``, ``special space``, or ``lp N`` (its tuple) with the tuple's state
    (``live``, ``deleted`` when it has a valid ``xmax``, ``dead``/``unused`` line
    pointer) or ``unclaimed`` (tuple space no line pointer points to: pruned bytes).
    Bytes that are not a valid page say ``not a page``."""
    if len(page) < 24:
        return "not a page"
    lower, upper, special = (int.from_bytes(page[i: i + 2], "little") for i in (12, 14, 16))
    if not 24 <= lower <= upper <= special <= blcksz:
        return "not a page"
    if offset < 24:
        return "page header"
    if offset < lower:
        return "line pointers"
    if offset < upper:
        return "free space"
    if offset >= special:
        return "special space"
    for n in range(1, (lower - 24) // 4 + 1):
        lp = int.from_bytes(page[24 + 4 * (n - 1): 28 + 4 * (n - 1)], "little")
        off, flags, length = lp & 0x7FFF, (lp >> 15) & 3, lp >> 17
        if length and off <= offset < off + length:
            if special < blcksz:  # an index page (heap pages have no special space)
                return f"lp {n} (index tuple{'' if flags == 1 else ', ' + _LP_STATES[flags]})"
            if flags != 1:
                return f"lp {n} ({_LP_STATES[flags]})"
            xmax = int.from_bytes(page[off + 4: off + 8], "little")
            infomask = int.from_bytes(page[off + 20: off + 22], "little")
            deleted = xmax != 0 and not infomask & 0x0800  # HEAP_XMAX_INVALID
            return f"lp {n} ({'deleted' if deleted else 'live'} tuple)"
    return "unclaimed tuple space"


def restore_page(image: bytes, hole_offset: int, hole_length: int) -> bytes:
    """A page from a WAL full-page image: the "hole" (free space PostgreSQL left out
    of the image) put back as zeros at ``hole_offset``."""
    return image[:hole_offset] + bytes(hole_length) + image[hole_offset:]
