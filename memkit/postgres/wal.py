"""PostgreSQL's write-ahead log read as records: pages unwrapped, records walked,
full-page images decompressed.

A WAL segment (``pg_wal/<timeline><log><seg>``, 16 MB by default) is a run of 8 kB
pages, each starting with a page header (24 bytes; 40 on a segment's first page,
``src/include/access/xlog_internal.h``). A record (``XLogRecord``,
``src/include/access/xlogrecord.h``) starts on an 8-byte boundary and continues
across page (and segment) boundaries right after the next page's header, so a value
that straddles a page boundary is not contiguous in the file. With
``wal_compression`` (``pglz``, ``lz4``, ``zstd``) the full-page image a record
carries after a checkpoint is compressed: its bytes are in no file as written.

:func:`read_wal` reads every file under ``pg_wal``:

* each page's header is checked (magic of a known version, page address) and taken
  out: :meth:`WalFile.stream` is the file's bytes as records see them (pages that
  are not WAL pages are kept as they are);
* records are walked from the first record boundary of every page (its
  ``xlp_rem_len`` says where), across files by page address, so recycled segments
  (renamed old files, read until overwritten) are read too; each record's block
  headers are decoded and its compressed full-page images decompressed (pglz by
  memkit, lz4/zstd by their libraries) and returned as pages;
* what could not be decoded is counted: compressed images of a method without a
  library or that do not decompress, images in records cut off by a missing page,
  and *fragments*: non-zero bytes on WAL pages that belong to no record memkit could
  read (the rest of a record whose start was overwritten). A fragment is matched as
  raw bytes; only a compressed image in it would go undecoded.
"""

from __future__ import annotations

import bisect
import mmap
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from memkit.postgres.pages import BLCKSZ, DecodeError, decompress, restore_page

__all__ = ["WAL_MAGIC", "WalFile", "WalImage", "WalRead", "read_wal"]

WAL_MAGIC = {0xD106: 13, 0xD10D: 14, 0xD110: 15, 0xD113: 16, 0xD116: 17}
"""``XLOG_PAGE_MAGIC`` -> PostgreSQL major version: the WAL formats memkit decodes."""

_CONTRECORD = 0x0001
_LONG_HEADER = 0x0002
_REC = 24  # SizeOfXLogRecord
_MAX_RECORD = 1 << 30


def _maxalign(n: int) -> int:
    return (n + 7) & ~7


@dataclass(frozen=True)
class _Page:
    file: int
    offset: int  # in the file
    header: int  # header length
    info: int
    tli: int
    addr: int  # xlp_pageaddr (LSN of the page start)
    rem_len: int
    version: int


class WalFile:
    """One file under ``pg_wal``, mapped read-only.

    Attributes:
        path: the file. label: how locations name it (``pg_wal/<name>``).
        pages: its valid WAL pages, in file order.
        blcksz: its page size (from a segment's long header; else 8192).
    """

    def __init__(self, path: Path, label: str, index: int) -> None:
        self.path, self.label, self.index = path, label, index
        with open(path, "rb") as fh:
            size = fh.seek(0, 2)
            self.data: bytes | mmap.mmap = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        self.blcksz = BLCKSZ
        self.unknown_magic: int | None = None
        if len(self.data) >= 40:
            magic, info = struct.unpack_from("<HH", self.data, 0)
            if magic in WAL_MAGIC and info & _LONG_HEADER:
                bs = struct.unpack_from("<I", self.data, 32)[0]
                if bs in (1024, 2048, 4096, 8192, 16384, 32768, 65536):
                    self.blcksz = bs
            elif magic & 0xFF00 == 0xD100 and info & ~0x000F == 0:
                self.unknown_magic = magic
        self.pages: list[_Page] = []
        self._page_at: dict[int, _Page] = {}
        bs = self.blcksz
        for off in range(0, len(self.data) - bs + 1, bs):
            magic, info, tli, addr, rem = struct.unpack_from("<HHIQI", self.data, off)
            if magic not in WAL_MAGIC or info & ~0x000F or addr % bs or tli == 0:
                continue
            header = 40 if info & _LONG_HEADER else 24
            page = _Page(index, off, header, info, tli, addr, rem, WAL_MAGIC[magic])
            self.pages.append(page)
            self._page_at[off] = page
        # the stream: each page's body (header taken out) or, off WAL pages, the bytes as they are
        self._pieces: list[tuple[int, int, int]] = []  # (stream start, file start, length)
        pos = 0
        for off in range(0, len(self.data), bs):
            page = self._page_at.get(off)
            start = off + (page.header if page else 0)
            length = min(off + bs, len(self.data)) - start
            self._pieces.append((pos, start, length))
            pos += length
        self.stream_len = pos
        self._starts = [p[0] for p in self._pieces]

    def page_at(self, offset: int) -> _Page | None:
        """The valid WAL page at file offset ``offset`` (a multiple of the page size)."""
        return self._page_at.get(offset)

    def stream(self) -> bytes:
        """The file's bytes with WAL page headers taken out (module doc)."""
        return b"".join(self.data[f: f + n] for _, f, n in self._pieces)

    def read(self, start: int, length: int) -> bytes:
        """``length`` bytes of :meth:`stream` from ``start``, without building it."""
        out = []
        i = bisect.bisect_right(self._starts, start) - 1
        while length > 0 and 0 <= i < len(self._pieces):
            s, f, n = self._pieces[i]
            a = start - s
            take = min(n - a, length)
            out.append(self.data[f + a: f + a + take])
            start += take
            length -= take
            i += 1
        return b"".join(out)

    def file_offset(self, stream_offset: int) -> int:
        """Where stream offset ``stream_offset`` lies in the file."""
        i = max(bisect.bisect_right(self._starts, stream_offset) - 1, 0)
        s, f, _ = self._pieces[i]
        return f + stream_offset - s

    def stream_offset(self, file_offset: int) -> int:
        """The stream offset of a file offset inside a page body."""
        i = file_offset // self.blcksz
        s, f, _ = self._pieces[i]
        return s + max(file_offset - f, 0)

    def close(self) -> None:
        if isinstance(self.data, mmap.mmap):
            self.data.close()


@dataclass
class WalImage:
    """A compressed full-page image of a WAL record.

    Attributes:
        label: ``pg_wal/<file>@<record offset> [full-page image of <spc>/<db>/<rel>
            block <n>, <method>]``.
        page: the page, decompressed and with its hole restored; None when ``error``.
        error: why it was not decoded.
        method: ``pglz``, ``lz4``, ``zstd`` or ``unknown``.
        covers: ``(file index, stream start, stream end)`` of its compressed bytes.
    """

    label: str
    page: bytes | None
    error: str | None
    method: str
    covers: list[tuple[int, int, int]]


@dataclass
class WalRead:
    """What :func:`read_wal` read (module doc).

    Attributes:
        files: every file, mapped (close with :meth:`close`).
        images: the compressed full-page images, decoded or not.
        records: records decoded. images_plain: uncompressed full-page images seen
            (their bytes are in the stream as they are).
        fragment_bytes / fragment_pages: non-zero bytes of WAL pages in no readable
            record, and on how many pages.
        cut_images: compressed images of records cut off by a missing page.
        unknown: files with a WAL page magic of a version memkit does not know.
    """

    files: list[WalFile]
    images: list[WalImage] = field(default_factory=list)
    records: int = 0
    images_plain: int = 0
    fragment_bytes: int = 0
    fragment_pages: int = 0
    cut_images: int = 0
    unknown: list[str] = field(default_factory=list)

    def close(self) -> None:
        for f in self.files:
            f.close()


def _image_method(info: int, version: int) -> str | None:
    """The compression of a full-page image from ``bimg_info``; None: not compressed."""
    if version <= 14:
        return "pglz" if info & 0x02 else None
    for bit, name in ((0x04, "pglz"), (0x08, "lz4"), (0x10, "zstd")):
        if info & bit:
            return name
    return "unknown" if info & ~0x03 else None


class _Block(NamedTuple):
    image_len: int
    data_len: int
    hole_offset: int = 0
    hole_length: int = 0
    method: str | None = None
    rel: tuple[int, int, int] = (0, 0, 0)
    block: int = 0
    fork: int = 0


_unpack_bh = struct.Struct("<BH").unpack_from
_unpack_img = struct.Struct("<HHB").unpack_from
_unpack_h = struct.Struct("<H").unpack_from
_unpack_i = struct.Struct("<I").unpack_from
_unpack_rel = struct.Struct("<III").unpack_from
_unpack_q = struct.Struct("<Q").unpack_from
_HEAD = struct.Struct("<IIQBBHIBB")  # XLogRecord, then the first block id and a short data length


def _decode_headers(rec: bytes, total: int, version: int, blcksz: int) -> tuple[list[_Block], int]:
    """The block references of a record and where its payload starts (PostgreSQL's
    ``DecodeXLogRecord``). ``rec`` may be a prefix of the record (``total`` bytes).

    Raises:
        DecodeError: headers that are not consistent, or that ``rec`` cuts off.
    """
    pos, datatotal, blocks, max_id = _REC, 0, [], -1
    rel: tuple[int, int, int] | None = None
    try:
        while total - pos > datatotal:
            bid = rec[pos]
            pos += 1
            if bid == 255:
                datatotal += rec[pos]
                pos += 1
                break
            if bid == 254:
                datatotal += _unpack_i(rec, pos)[0]
                pos += 4
                break
            if bid == 253:
                pos += 2
                continue
            if bid == 252:
                pos += 4
                continue
            if bid > 32 or bid <= max_id:
                raise DecodeError(f"block id {bid}")
            max_id = bid
            flags, dlen = _unpack_bh(rec, pos)
            pos += 3
            if bool(flags & 0x20) != bool(dlen):
                raise DecodeError("block data length does not match its flag")
            datatotal += dlen
            if not flags & 0x10:  # no image: only the relation and block number follow
                if not flags & 0x80:
                    rel = _unpack_rel(rec, pos)
                    pos += 12
                elif rel is None:
                    raise DecodeError("SAME_REL without a previous relation")
                pos += 4
                if pos > len(rec):
                    raise DecodeError("record headers cut off")
                blocks.append(_Block(0, dlen))
                continue
            image_len, hole_offset, info = _unpack_img(rec, pos)
            pos += 5
            method = _image_method(info, version)
            has_hole = bool(info & 0x01)
            hole_length = 0
            if method and has_hole:
                hole_length = _unpack_h(rec, pos)[0]
                pos += 2
            elif has_hole:
                hole_length = blcksz - image_len
            if has_hole and (hole_offset == 0 or hole_length == 0 or image_len == blcksz):
                raise DecodeError("image hole")
            if not has_hole and hole_offset:
                raise DecodeError("image hole offset without a hole")
            if (method and image_len >= blcksz) or (not method and not has_hole and image_len != blcksz):
                raise DecodeError("image length")
            datatotal += image_len
            if not flags & 0x80:
                rel = _unpack_rel(rec, pos)
                pos += 12
            elif rel is None:
                raise DecodeError("SAME_REL without a previous relation")
            block = _unpack_i(rec, pos)[0]
            pos += 4
            blocks.append(_Block(image_len, dlen, hole_offset, hole_length, method, rel, block, flags & 0x0F))
    except (IndexError, struct.error) as exc:
        raise DecodeError("record headers cut off") from exc
    if pos + datatotal != total:
        raise DecodeError("record length does not match its headers")
    return blocks, pos


class _Walker:
    def __init__(self, files: list[WalFile], out: WalRead) -> None:
        self.files, self.out = files, out
        self.by_addr: dict[int, list[_Page]] = {}
        for f in files:
            for p in f.pages:
                self.by_addr.setdefault(p.addr, []).append(p)
        self.covered: dict[int, list[tuple[int, int]]] = {f.index: [] for f in files}
        self.entered: set[tuple[int, int]] = set()

    def _next(self, page: _Page, remaining: int | None) -> _Page | None:
        """The page after ``page`` (same timeline first); with ``remaining``, one whose
        header says a record continues on it with that many bytes left."""
        f = self.files[page.file]
        cands = []
        same = f.page_at(page.offset + f.blcksz)
        if same is not None and same.addr == page.addr + f.blcksz:
            cands.append(same)
        cands += [p for p in self.by_addr.get(page.addr + f.blcksz, ()) if p is not same]
        for p in sorted(cands, key=lambda p: p.tli != page.tli):
            if remaining is None or (p.info & _CONTRECORD and p.rem_len == remaining):
                return p
        return None

    def _gather(self, page: _Page, pos: int, total: int) -> tuple[bytes, list[tuple[_Page, int, int]], bool]:
        """``total`` bytes of a record from ``pos`` of ``page``: (bytes, pieces as
        (page, in-page start, length), complete)."""
        bs = self.files[page.file].blcksz
        parts, pieces, got = [], [], 0
        while True:
            take = min(bs - pos, total - got)
            off = page.offset + pos
            parts.append(self.files[page.file].data[off: off + take])
            pieces.append((page, pos, take))
            got += take
            if got >= total:
                return b"".join(parts), pieces, True
            nxt = self._next(page, total - got)
            if nxt is None:
                return b"".join(parts), pieces, False
            page, pos = nxt, nxt.header

    def _cover(self, pieces: list[tuple[_Page, int, int]]) -> None:
        """Mark a record's bytes (given by its pieces) as read; a piece that starts
        within 8 bytes (alignment padding) of the last one extends it."""
        for page, start, n in pieces:
            off = page.offset + start
            spans = self.covered[page.file]
            if spans and 0 <= off - spans[-1][1] < 8:
                spans[-1] = (spans[-1][0], off + n)
            else:
                spans.append((off, off + n))

    def _spans(self, pieces: list[tuple[_Page, int, int]], lo: int, hi: int) -> list[tuple[int, int, int]]:
        """``(file index, stream start, stream end)`` of record bytes ``[lo, hi)``."""
        out, at = [], 0
        for page, start, n in pieces:
            a, b = max(lo, at), min(at + n, hi)
            if a < b:
                f = self.files[page.file]
                s = f.stream_offset(page.offset + start + (a - at))
                out.append((page.file, s, s + b - a))
            at += n
        return out

    def walk(self, page: _Page, pos: int) -> None:
        f = self.files[page.file]
        self.entered.add((page.file, page.offset))
        data, bs, spans = f.data, f.blcksz, self.covered[page.file]
        head = _HEAD.unpack_from
        records = 0
        try:
            while True:
                if pos >= bs:
                    nxt = self._next(page, None)
                    if nxt is None or nxt.info & _CONTRECORD:
                        return
                    page, pos = nxt, nxt.header
                    f = self.files[page.file]
                    data, bs, spans = f.data, f.blcksz, self.covered[page.file]
                    self.entered.add((page.file, page.offset))
                    continue
                off = page.offset + pos
                if pos + 26 <= bs:
                    total, _, prev, _, _, _, _, first, short = head(data, off)
                    if prev >= page.addr + pos:
                        return  # not a record: xl_prev must point back
                else:
                    total, first, short = _unpack_i(data, off)[0], -1, -1
                if total < _REC or total > _MAX_RECORD:
                    return  # end of the WAL (zeros) or not a record
                if pos + total <= bs:  # the whole record on this page
                    if first == 255 and total == 26 + short:  # main data only: nothing to decode
                        blocks, payload = (), 26
                    elif first == 0 and short & 0x90 == 0 and pos + 46 <= bs and (
                            bool(short & 0x20) == bool(dlen := _unpack_h(data, off + 26)[0])) and (
                            total == 44 + dlen or (data[off + 44] == 255 and total == 46 + dlen + data[off + 45])):
                        blocks, payload = (), 0  # one block, its data, no image (the common record)
                    else:
                        rec = data[off: off + total]
                        try:
                            blocks, payload = _decode_headers(rec, total, page.version, bs)
                        except DecodeError:
                            return
                    records += 1
                    if spans and 0 <= off - spans[-1][1] < 8:
                        spans[-1] = (spans[-1][0], off + total)
                    else:
                        spans.append((off, off + total))
                    if blocks and any(b.image_len for b in blocks):
                        self._images(rec, blocks, payload, [(page, pos, total)], page, pos, bs)
                    pos = (pos + total + 7) & ~7
                    continue
                rec, pieces, complete = self._gather(page, pos, total)
                if len(rec) < 16 or _unpack_q(rec, 8)[0] >= page.addr + pos:
                    return
                try:
                    blocks, payload = _decode_headers(rec, total, page.version, bs)
                except DecodeError:
                    if not complete:
                        self._cut(rec, total, page, pieces)
                    return
                if not complete:
                    self._cut(rec, total, page, pieces)
                    return
                records += 1
                self._cover(pieces)
                for p, _, _ in pieces:
                    self.entered.add((p.file, p.offset))
                if blocks and any(b.image_len for b in blocks):
                    self._images(rec, blocks, payload, pieces, page, pos, bs)
                last, start, n = pieces[-1]
                page, f = last, self.files[last.file]
                data, bs, spans = f.data, f.blcksz, self.covered[page.file]
                pos = _maxalign(start + n)
        finally:
            self.out.records += records

    def _images(self, rec: bytes, blocks: list[_Block], at: int, pieces: list, page: _Page, pos: int,
                bs: int) -> None:
        f = self.files[page.file]
        for b in blocks:
            if b.image_len:
                if b.method is None:
                    self.out.images_plain += 1
                else:
                    img = rec[at: at + b.image_len]
                    where = (f"{f.label}@{page.offset + pos} [full-page image of {b.rel[0]}/{b.rel[1]}/{b.rel[2]}"
                             f"{'' if b.fork == 0 else f' fork {b.fork}'} block {b.block}, {b.method}]")
                    page_bytes, error = None, None
                    if b.method == "unknown":
                        error = "an unknown compression method"
                    else:
                        try:
                            raw = decompress(b.method, img, bs - b.hole_length)
                            page_bytes = restore_page(raw, b.hole_offset, b.hole_length)
                        except ImportError:
                            error = f"the {b.method} package is not installed"
                        except DecodeError as exc:
                            error = f"it does not decompress ({exc})"
                    self.out.images.append(WalImage(where, page_bytes, error, b.method,
                                                    self._spans(pieces, at, at + b.image_len)))
                at += b.image_len
            at += b.data_len

    def _cut(self, rec: bytes, total: int, page: _Page, pieces: list) -> None:
        """A record whose later pages are gone: its present bytes are read as raw
        bytes unless its headers (when present) show a compressed image."""
        try:
            blocks, _ = _decode_headers(rec, total, page.version, self.files[page.file].blcksz)
        except DecodeError:
            return  # headers cut off or not a record: its bytes stay a fragment
        compressed = sum(1 for b in blocks if b.image_len and b.method)
        if compressed:
            self.out.cut_images += compressed
            return
        self._cover(pieces)


def read_wal(paths: Sequence[tuple[Path, str]]) -> WalRead:
    """Read the files of ``pg_wal`` (module doc).

    Args:
        paths: ``(path, label)`` of every file; labels name it in locations.

    Returns:
        :class:`WalRead` (its files stay mapped until :meth:`WalRead.close`).
    """
    files = [WalFile(p, label, i) for i, (p, label) in enumerate(paths)]
    out = WalRead(files)
    out.unknown = [f.label for f in files if f.unknown_magic is not None and not f.pages]
    walker = _Walker(files, out)
    order = sorted((p for f in files for p in f.pages), key=lambda p: (p.addr, p.tli, p.file))
    for p in order:
        if (p.file, p.offset) in walker.entered:
            continue
        start = p.header + (_maxalign(p.rem_len) if p.info & _CONTRECORD else 0)
        if start >= files[p.file].blcksz:
            continue
        walker.walk(p, start)
    for f in files:
        if not f.pages:
            continue
        a = np.frombuffer(f.data, dtype=np.uint8)
        loose = np.zeros(len(a), dtype=bool)  # only WAL pages: other blocks are read as raw bytes
        for p in f.pages:
            loose[p.offset + p.header: p.offset + f.blcksz] = True
        for lo, hi in walker.covered[f.index]:
            loose[lo:hi] = False
        loose &= a != 0
        n = int(loose.sum())
        if n:
            out.fragment_bytes += n
            out.fragment_pages += int(loose[: len(a) // f.blcksz * f.blcksz].reshape(-1, f.blcksz).any(axis=1).sum())
    return out
