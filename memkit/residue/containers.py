"""Open compressed files and archives for the residue scanner.

A backup such as ``memories.json.gz`` holds a secret only in compressed form, which no
byte pattern can see. :func:`container_kind` recognises a container by its signature
(and, for formats without a reliable one, by its name); :func:`open_members` yields
its members, each labelled by its path inside the container, decompressed with the
standard library (``gzip``, ``bz2``, ``lzma``, ``zipfile``, ``tarfile``) or
``zstandard``. Nothing here parses a format by hand.

The work is bounded so that a decompression bomb cannot hang a scan
(:class:`Limits`): each member is read up to ``max_member_bytes``, one given path's
members up to ``max_total_bytes`` together, archives up to ``max_members`` members and
containers nested ``max_depth`` deep. Whatever a limit, an encrypted member, a
truncated or corrupt stream or an unsupported format leaves unread is reported in the
member's ``left`` (the scanner then calls the verdict incomplete), never dropped.
"""

from __future__ import annotations

import bz2
import io
import lzma
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, BinaryIO

__all__ = ["Budget", "Limits", "Member", "as_file", "container_kind", "open_members"]

_CHUNK = 1 << 20

_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"(\xb5/\xfd", "zstd"),
    (b"PK\x03\x04", "zip"),
    (b"PK\x05\x06", "zip"),
    (b"PK\x07\x08", "zip"),
    (b"7z\xbc\xaf'\x1c", "unsupported:7z archive"),
    (b"Rar!\x1a\x07", "unsupported:RAR archive"),
    (b"\x04\x22\x4d\x18", "unsupported:LZ4 frame"),
    (b"\x1f\x9d", "unsupported:Unix compress (.Z)"),
    (b"\x1f\xa0", "unsupported:LZH (.Z)"),
    (b"LZIP", "unsupported:lzip"),
    (b"\xff\x06\x00\x00sNaPpY", "unsupported:Snappy framed"),
    (b"MSCF", "unsupported:Microsoft cabinet"),
)
"""Leading bytes of the containers recognised (those opened and those reported)."""

_SUFFIXES: dict[str, str] = {
    ".lzma": "lzma",
    ".br": "unsupported:Brotli (no signature; named .br)",
    ".lz4": "unsupported:LZ4",
    ".sz": "unsupported:Snappy",
    ".lzo": "unsupported:LZO",
    ".7z": "unsupported:7z archive",
    ".rar": "unsupported:RAR archive",
    ".z": "unsupported:Unix compress (.Z)",
    ".lz": "unsupported:lzip",
    ".cab": "unsupported:Microsoft cabinet",
}
"""Names of containers whose signature is missing or weak."""

_STREAM_SUFFIXES = (".gz", ".gzip", ".bz2", ".xz", ".zst", ".zstd", ".lzma", ".tgz", ".tbz2", ".txz")


@dataclass(frozen=True)
class Limits:
    """Bounds on the work spent inside containers (module doc). Sizes in bytes.

    Attributes:
        max_member_bytes: decompressed bytes read from one member (256 MiB).
        max_total_bytes: decompressed bytes read from all members under one given
            path (1 GiB).
        max_members: members read from one archive (10,000).
        max_depth: containers inside containers (4: a ``.tar.gz`` inside a ``.zip`` is
            depth 3).
    """

    max_member_bytes: int = 256 << 20
    max_total_bytes: int = 1 << 30
    max_members: int = 10_000
    max_depth: int = 4


@dataclass
class Budget:
    """Decompressed bytes still allowed under one given path (:class:`Limits`)."""

    left: int


@dataclass
class Member:
    """One member of a container, decompressed.

    Attributes:
        name: path inside the container (``dir/file.json``; for a compressed stream,
            the stored or implied name of what it compresses).
        data: the bytes read (possibly fewer than the member holds, see ``left``).
        size: the member's size as the container declares it, else ``len(data)``.
        left: why some of it was not read (limit reached, truncated, encrypted ...).
    """

    name: str
    data: bytes
    size: int
    left: list[str] = field(default_factory=list)


def container_kind(head: bytes, name: str) -> str | None:
    """What container ``head`` (the first 512+ bytes of a file) and its ``name`` show:
    ``"gzip"``, ``"bzip2"``, ``"xz"``, ``"lzma"``, ``"zstd"``, ``"zip"``, ``"tar"``;
    ``"unsupported:<format>"`` for a container memkit cannot open; ``None`` for a
    file that is not a container."""
    for sig, kind in _SIGNATURES:
        if head.startswith(sig):
            return kind
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "tar"
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in _SUFFIXES:
        return _SUFFIXES[suffix]
    if suffix == ".tar" and len(head) >= 512:
        return "tar"  # a pre-POSIX tar has no magic; tarfile checks the header checksum
    return None


def _inner_name(name: str, header_name: str | None = None) -> str:
    if header_name:
        return header_name
    p = PurePosixPath(name)
    if p.suffix.lower() in (".tgz", ".tbz2", ".txz"):
        return p.stem + ".tar"
    if p.suffix.lower() in _STREAM_SUFFIXES:
        return p.stem
    return p.name + "~"


def _read_limited(fh: BinaryIO, limits: Limits, budget: Budget) -> tuple[bytes, list[str]]:
    """Read ``fh`` to its end or to the first limit; return the bytes and what was left.
    A stream that breaks off (truncated, corrupt) keeps what was read before."""
    cap = min(limits.max_member_bytes, budget.left)
    out = io.BytesIO()
    try:
        while out.tell() < cap:
            chunk = fh.read(min(_CHUNK, cap - out.tell()))
            if not chunk:
                budget.left -= out.tell()
                return out.getvalue(), []
            out.write(chunk)
        more = fh.read(1)
    except Exception as exc:  # EOFError, OSError, zlib/lzma/zstd errors: a broken stream
        if not isinstance(exc, _STREAM_ERRORS) and type(exc).__module__.split(".")[0] != "zstandard":
            raise
        budget.left -= out.tell()
        return out.getvalue(), [f"stream cannot be decompressed to its end (truncated or corrupt: "
                                f"{type(exc).__name__}: {exc}); the {out.tell()} bytes before "
                                "the break were scanned"]
    budget.left -= out.tell()
    if not more:
        return out.getvalue(), []
    which = ("max_member_bytes" if cap == limits.max_member_bytes
             else "max_total_bytes (all members under this path)")
    return out.getvalue(), [f"limit reached: {which} = {cap} bytes read, the rest was not "
                            "decompressed (a possible decompression bomb)"]


_STREAM_ERRORS = (EOFError, OSError, lzma.LZMAError, zlib.error, ValueError, zipfile.BadZipFile,
                  tarfile.TarError, NotImplementedError, RuntimeError)


def _stream(kind: str, data: Any, name: str, limits: Limits, budget: Budget) -> Iterator[Member]:
    """The one member of a compressed stream (gzip members and zstd frames that
    follow each other are read as one stream, as ``gunzip``/``zstd -d`` do)."""
    inner = _inner_name(name)
    fh = _Decompressing(kind, data)
    with fh:
        out, left = _read_limited(fh, limits, budget)
    if not left and not fh.complete:
        left = [f"{kind} stream is truncated (its last frame does not end); the "
                f"{len(out)} bytes decompressed before the cut were scanned"]
    yield Member(inner, out, len(out), left)


_FRAME_MAGIC = {"gzip": b"\x1f\x8b", "bzip2": b"BZh", "xz": b"\xfd7zXZ\x00", "zstd": b"(\xb5/\xfd"}


class _Decompressing(io.RawIOBase):
    """A readable stream decompressing ``data`` (frame after frame, as ``gunzip`` and
    ``zstd -d`` read concatenated frames) with the standard library's incremental
    decompressors (``zlib``, ``bz2``, ``lzma``) or ``zstandard``'s. Unlike
    ``gzip.GzipFile`` it keeps what was decompressed before a cut, and it knows whether
    the last frame ended (``complete``), which ``zstandard``'s reader does not say.
    Output is capped per call (``zlib``, ``bz2`` and ``lzma`` keep the input they have
    not used), so no single call can expand a bomb; ``zstandard``'s decompressor has no
    such cap, so its input goes in small pieces (a 64 KiB piece could expand to
    gigabytes; 256-byte pieces made gzip half as fast as ``zlib`` alone)."""

    _FEED = 1 << 16
    _FEED_ZSTD = 256
    _OUT = 1 << 20

    def __init__(self, kind: str, data: Any) -> None:
        self._kind = kind
        self._data = memoryview(data)
        self._pos = 0
        self._buf = bytearray()
        self._obj: Any = self._new()
        self._fresh = True
        self._pending = b""  # zlib's unconsumed tail
        self._done = False
        self.complete = True

    def _new(self) -> Any:
        if self._kind == "gzip":
            return zlib.decompressobj(wbits=31)
        if self._kind == "bzip2":
            return bz2.BZ2Decompressor()
        if self._kind in ("xz", "lzma"):
            return lzma.LZMADecompressor(lzma.FORMAT_XZ if self._kind == "xz" else lzma.FORMAT_ALONE)
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj()

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._data.release()  # an mmap cannot close while a view of it is held
        super().close()

    def _step(self) -> bool:
        """Decompress a little more; False when the input is used up."""
        if self._done:
            return False
        obj, kind = self._obj, self._kind
        if kind == "gzip":
            if self._pending:
                chunk, self._pending = self._pending, b""
            elif self._pos < len(self._data):
                chunk = bytes(self._data[self._pos: self._pos + self._FEED])
                self._pos += len(chunk)
            else:
                return False
            self._fresh = False
            self._buf += obj.decompress(chunk, self._OUT)
            self._pending = obj.unconsumed_tail
        elif kind in ("bzip2", "xz", "lzma"):
            if obj.needs_input:
                if self._pos >= len(self._data):
                    return False
                chunk = bytes(self._data[self._pos: self._pos + self._FEED])
                self._pos += len(chunk)
            else:
                chunk = b""
            self._fresh = False
            self._buf += obj.decompress(chunk, self._OUT)
        else:
            if self._pos >= len(self._data):
                return False
            chunk = bytes(self._data[self._pos: self._pos + self._FEED_ZSTD])
            self._pos += len(chunk)
            self._fresh = False
            self._buf += obj.decompress(chunk)
        if obj.eof:  # a frame ended: a next one may follow (trailing zeros do not count)
            rest = bytes(obj.unused_data) + bytes(self._data[self._pos:])
            magic = _FRAME_MAGIC.get(kind)
            self._pos = len(self._data) - len(rest)
            self._pending = b""
            if magic is not None and rest.startswith(magic):
                self._obj = self._new()
                self._fresh = True
            else:
                self._fresh = True
                self._done = True  # what follows the last frame (padding) is not a frame
                return False
        return True

    def read(self, n: int = -1) -> bytes:  # type: ignore[override]
        while n < 0 or len(self._buf) < n:
            if not self._step():
                if not self._fresh:
                    self.complete = False  # the input ended inside a frame
                break
        if n < 0:
            n = len(self._buf)
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out


def _zip_members(src: BinaryIO, limits: Limits, budget: Budget) -> Iterator[Member]:
    try:
        zf = zipfile.ZipFile(src)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        yield Member("", b"", 0, [f"zip archive cannot be opened (truncated or corrupt: {exc})"])
        return
    with zf:
        infos = zf.infolist()
        if len(infos) > limits.max_members:
            yield Member("", b"", 0, [f"limit reached: max_members = {limits.max_members}; "
                                      f"{len(infos) - limits.max_members} members not read"])
            infos = infos[: limits.max_members]
        for info in infos:
            if info.is_dir():
                continue
            if info.flag_bits & 0x1:
                yield Member(info.filename, b"", info.file_size,
                             ["encrypted zip member: cannot be read without its password"])
                continue
            try:
                with zf.open(info) as fh:
                    out, left = _read_limited(fh, limits, budget)
            except NotImplementedError as exc:
                yield Member(info.filename, b"", info.file_size,
                             [f"zip member uses a compression memkit cannot read ({exc})"])
                continue
            except (zipfile.BadZipFile, EOFError, OSError, zlib.error, lzma.LZMAError,
                    ValueError) as exc:
                yield Member(info.filename, b"", info.file_size,
                             [f"zip member cannot be decompressed (truncated or corrupt: {exc})"])
                continue
            yield Member(info.filename, out, info.file_size, left)


def _tar_members(src: BinaryIO, limits: Limits, budget: Budget) -> Iterator[Member]:
    try:
        tf = tarfile.open(fileobj=src, mode="r:")
    except (tarfile.TarError, OSError, EOFError) as exc:
        yield Member("", b"", 0, [f"tar archive cannot be opened (truncated or corrupt: {exc})"])
        return
    with tf:
        n = 0
        while True:
            try:
                info = tf.next()
            except (tarfile.TarError, OSError, EOFError) as exc:
                yield Member("", b"", 0, [f"tar archive is truncated or corrupt after "
                                          f"{n} members ({exc})"])
                return
            if info is None:
                return
            if not info.isreg():
                continue  # directories, links (their target is a member or outside), devices
            n += 1
            if n > limits.max_members:
                yield Member("", b"", 0, [f"limit reached: max_members = {limits.max_members}; "
                                          "later members not read"])
                return
            try:
                fh = tf.extractfile(info)
                assert fh is not None
                with fh:
                    out, left = _read_limited(fh, limits, budget)
            except (tarfile.TarError, OSError, EOFError) as exc:
                yield Member(info.name, b"", info.size,
                             [f"tar member cannot be read (truncated: {exc})"])
                continue
            if len(out) < info.size and not left:
                left = [f"tar member is truncated: {len(out)} of {info.size} bytes present"]
            yield Member(info.name, out, info.size, left)


class _View(io.RawIOBase):
    """A seekable read-only file over a buffer (an ``mmap``), without copying it."""

    def __init__(self, data: Any) -> None:
        self._view = memoryview(data)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: len(self._view)}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, b: Any) -> int:
        chunk = self._view[self._pos: self._pos + len(b)]
        n = len(chunk)
        b[:n] = chunk
        self._pos += n
        return n

    def close(self) -> None:
        self._view.release()
        super().close()


def as_file(data: Any) -> BinaryIO:
    """A seekable binary file over ``data``: bytes in :class:`io.BytesIO`, any other
    buffer (an ``mmap``) through a view, without copying it. Close it when done."""
    if isinstance(data, (bytes, bytearray)):
        return io.BytesIO(data)
    return io.BufferedReader(_View(data))


def open_members(kind: str, data: Any, name: str, limits: Limits, budget: Budget) -> Iterator[Member]:
    """The members of container ``data`` (bytes or a read-only ``mmap``;
    :func:`container_kind` ``kind``; ``name`` is the container's own name, used to name
    a compressed stream's content).

    A member with ``name == ""`` stands for the container itself when it cannot be
    opened or a limit cut its listing; its ``left`` says why.

    Raises:
        ValueError: ``kind`` is not a kind :func:`container_kind` returns.
    """
    if kind in ("gzip", "bzip2", "xz", "lzma", "zstd"):
        yield from _stream(kind, data, name, limits, budget)
    elif kind in ("zip", "tar"):
        src = as_file(data)
        try:
            yield from (_zip_members if kind == "zip" else _tar_members)(src, limits, budget)
        finally:
            src.close()
    elif kind.startswith("unsupported:"):
        yield Member("", b"", 0, [f"{kind.split(':', 1)[1]}: a format memkit cannot open"])
    else:
        raise ValueError(f"unknown container kind {kind!r}")
