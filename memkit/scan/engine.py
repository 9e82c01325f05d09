"""Many secrets, one linear-time pass: the multi-secret byte scan engine.

What a copy is stays in :mod:`memkit.scan.matching` (one matcher for forget, redaction,
the residue scanner, the LLM cache and the probes); this module only finds the copies
of many secrets at once, in bounded memory, and reports exactly what
:meth:`~memkit.scan.matching.SecretMatcher.byte_spans` of each secret reports over the same
bytes (``tests/test_scan_engine.py`` checks it on mixes of every spelling, construct and
binary). It splits the work by what a copy can read:

1. **One automaton pass over the raw bytes** (Hyperscan: linear time, no backtracking)
   finds every occurrence of each secret as given (``byte_spans`` always counts those),
   and **one compiled pass** (:mod:`memkit.scan.tokens`) every *window token*: an ANSI
   code, a comment, an over-long backslash run
   (:data:`~memkit.scan.matching.WINDOW_TOKENS`), an escape that spells a character of some
   secret (:func:`~memkit.scan.matching.escaped_spellings`: ``&#88;``, ``%58``, ``\\u0058``)
   or a non-ASCII spelling of one (:func:`~memkit.scan.matching.spelling_points`: ``Ｘ``,
   ``𝐗``, a combining mark); a token pattern of a shape that pass does not read is
   matched by the automaton too.
2. **Plain candidates** (:mod:`memkit.scan.plain`): a copy that reads no window token
   spells each character in ASCII, and the byte pattern's separator runs consume tags,
   entities, percent-encoding and escapes whole, so its skeleton is verbatim in the
   letters and digits outside those constructs (or starts inside one construct). A
   literal search over those letters (one C pass, ``memkit/scan/_letters.c``, pulls them
   out, then Hyperscan's literal matcher) finds every start: over every byte for many
   secrets; for :data:`REGEX_SECRETS` or fewer, only over the stretches before the
   places where one prefilter regex per secret (its first :data:`PREFIX_CHARS`
   characters, in the raw pass) says a copy's head may end; where heads are everywhere
   (more than one per 256 bytes), that scan stops and every letter is read. Each start
   is confirmed by
   :func:`~memkit.scan.matching.plain_match` (the byte pattern less the window-token
   alternatives, which behaves exactly as the byte pattern where no token is).
3. **Windows** (:mod:`memkit.scan.windows`): a copy that reads a window token starts
   in the token's window (at most ``max_bytes`` before it, after the last breaker
   byte, at most 3 bytes after it). A window *names* the secrets that may have a copy
   there, with the stretches of it where such a copy may start (one automaton over
   the window's spelling events for all secrets), and each named secret's byte pattern
   is tried at the offsets in those stretches where a spelling of its first character begins
   (:attr:`~memkit.scan.matching.SecretMatcher.starts`), so a search never reads more than
   a copy past its window.
4. **One chain per secret.** Candidates and windows are visited in order of offset,
   each search starting where the secret's previous copy ended and keeping the copies
   that start in the candidate or stretch: exactly the copies, in order, that
   ``finditer`` over the whole buffer yields, because every copy starts at a plain
   candidate or in a stretch its window names.

Streams (:meth:`ScanEngine.scan_file`) are read in chunks; the last ``overlap`` bytes
(the longest copy any secret can have,
:attr:`~memkit.scan.matching.SecretMatcher.max_bytes`) and 64 bytes of look-behind are
carried into the next chunk, so memory is ``O(chunk + overlap)`` whatever the size;
:func:`scan_files` shares files among one process per CPU.

Complexity, for ``n`` input bytes and ``k`` secrets: the automata and the pass that
parses the constructs and pulls out the letters (each construct read once) read each
byte a bounded number of times, whatever ``k``; a confirmation reads at most
``max_bytes`` bytes; a window is searched by the secrets it names, each search linear
in the window (:mod:`memkit.scan.matching`, Complexity). Speed against GNU grep:
``benchmarks/bench_scan.py``.
"""

from __future__ import annotations

import bisect
import mmap
import multiprocessing
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO

import hyperscan
import numpy as np

from memkit.scan.hsdb import compile_block
from memkit.scan.matching import (
    BREAKER_BYTES,
    MAX_SEPARATOR_BYTES,
    MAX_SEPARATORS,
    MAX_SPELLING_BYTES,
    WINDOW_TOKENS,
    SecretMatcher,
    escaped_spellings,
    fewest_spellings,
    matcher,
    max_copy_bytes,
    plain_match,
    skeleton,
    spelling_points,
)
from memkit.scan.plain import PlainFinder
from memkit.scan.tokens import TokenTable
from memkit.scan.windows import TokenWindows

__all__ = ["single_engine", "REGEX_SECRETS", "ScanEngine", "Span", "scan_files"]

PREFIX_CHARS = 8
"""The few-secret prefilter regex spells a secret's first this many skeleton characters
(all of a shorter one): a copy starts at most a bounded distance before the end of its
head, and the plain letters of that stretch are searched for the whole skeleton. A
shorter head compiles faster and runs faster on binary data; a longer one matches
fewer stretches of text that are not copies."""

REGEX_SECRETS = 2
"""Up to this many secrets, the letters are read only before the places one Hyperscan
regex per secret over the raw bytes finds (the regex adds almost nothing to the raw
pass on text for one secret); above it, the letters of every byte are read (the C pass
of :mod:`memkit.scan.plain`, about 0.65 ns a byte, then Hyperscan's literal matcher,
whose speed hardly depends on the number of secrets). Measured with
``benchmarks/bench_scan.py``: the regex database slows as secrets are added (400 MB/s
at 100)."""

Span = tuple[int, int, str]
"""``(start, end, kind)`` of one copy: byte offsets, kind ``exact`` or ``normalized``."""

_LOOKBEHIND = 64
"""Bytes kept before a chunk for the byte pattern's look-behind (it reads 3)."""



def _merge(regions: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Sorted regions with overlapping searches (kind 1) joined."""
    out: list[tuple[int, int, int]] = []
    for r in regions:
        if out and r[2] == 1 and out[-1][2] == 1 and r[0] <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], r[1]), 1)
        else:
            out.append(r)
    return out


@lru_cache(maxsize=1)
def _separators() -> bytes:
    """A superset of every separator run between two characters of a copy that reads no
    window token, for the few-secret prefilter (Hyperscan, prefilter mode): any byte
    that is neither a letter, a digit nor a breaker (every ASCII separator and UTF-8
    character of the matcher), and any byte that starts an encoded construct (``<``,
    ``&``, ``%``, ``\\``) with whatever follows it up to ``<``, ``>`` or a breaker (every
    tag, entity, percent code and escape, with what they hold: a tag's ``>`` is then a
    separator of its own). Never a byte of :data:`~memkit.scan.matching.BREAKER_BYTES`, so
    runs die fast in binary data. Writing out each construct's own pattern instead makes
    Hyperscan's automaton several times slower on prose (5-8 ns a byte where a secret's
    first characters are common words, against about 1.5) and twice as slow on binary
    data, for fewer heads to confirm."""
    breakers = b"".join(sorted(BREAKER_BYTES))
    cls = b"".join(b"\\x%02x" % c for c in breakers)
    return rb"(?:[^A-Za-z0-9" + cls + rb"]|[<&%\\][^<>" + cls + rb"]*)*"


def _database(patterns: list[bytes], flags: list[int]) -> Any:
    """One Hyperscan block-mode database of ``patterns`` (ids: their positions), compiled
    once per machine (:func:`memkit.scan.hsdb.compile_block`)."""
    return compile_block(patterns, flags)


def _hx(data: bytes) -> bytes:
    return b"".join(b"\\x%02x" % c for c in data)


@dataclass
class _Entry:
    secret: str
    exact: bytes
    skeleton: str
    _matcher: SecretMatcher | None = None

    @property
    def matcher(self) -> SecretMatcher:
        """Compiled on first use: only secrets a window names pay for it (tens of ms)."""
        if self._matcher is None:
            self._matcher = matcher(self.secret)
        return self._matcher


@dataclass
class _State:
    """One stream's (or part's) progress: per secret, the end of its last copy (absolute offset,
    the resume point of the chain), its copies, whether the byte pattern found the
    secret as given, and the secret-as-given occurrences (non-overlapping)."""

    last_end: dict[int, int] = field(default_factory=dict)
    found: dict[int, dict[tuple[int, int], str]] = field(default_factory=dict)
    exact_seen: set[int] = field(default_factory=set)
    exact: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    exact_end: dict[int, int] = field(default_factory=dict)


class ScanEngine:
    """All copies of many secrets in bytes, files and streams (module doc).

    Args:
        secrets: the secrets (each with a letter or digit; duplicates are scanned
            once and reported under their first index).
        block: input bytes between two checkpoints of the map from a letter back to
            its offset (a literal hit is placed by reading from the checkpoint before
            it: about this many bytes at most; default 4 KiB).
        chunk: read size for files and streams in bytes (default 8 MiB: each chunk
            costs a few tenths of a millisecond beside its bytes, a fifth of the time at
            2 MiB, and larger ones gain nothing more).

    Raises:
        ValueError: no secrets, or a secret without letters or digits.
        TypeError: a secret that is not a string.
        hyperscan.error: a pattern Hyperscan does not compile (a bug: the patterns are
            built from the matcher's tables).
    """

    def __init__(self, secrets: Sequence[str], *, block: int = 1 << 12, chunk: int = 8 << 20) -> None:
        secrets = list(secrets)
        if not secrets:
            raise ValueError("ScanEngine: no secrets to scan for")
        self.secrets = secrets
        self._index: dict[str, int] = {}
        for i, s in enumerate(secrets):
            self._index.setdefault(s, i)
        self._unique = [i for i, s in enumerate(secrets) if self._index[s] == i]
        self._entries: list[_Entry | None] = [None] * len(secrets)
        for i in self._unique:
            s = secrets[i]
            sk = skeleton(s)
            self._entries[i] = _Entry(s, s.encode("utf-8"), sk)
        self.overlap = max(max_copy_bytes(secrets[i]) for i in self._unique)
        self.block = max(int(block), 1)
        self.chunk = max(int(chunk), self.block)
        self.n_min = min(fewest_spellings(secrets[i]) for i in self._unique)
        """Fewest spellings any copy holds (a letter or digit, an escape, a non-ASCII
        character: each holds at least one byte the windows' filter counts)."""
        self._plain = [i for i in self._unique if self._entry(i).skeleton.isascii()]
        live = [secrets[i] for i in self._unique]
        points = spelling_points(live)
        escaped = escaped_spellings(live)
        self._tw = TokenWindows({i: self._entry(i).skeleton for i in self._unique},
                                [""] * len(WINDOW_TOKENS) + [c for _, c in escaped], points, self.overlap, self.n_min)
        self.regex = len(self._plain) <= REGEX_SECRETS
        # the window tokens: one compiled pass (memkit.scan.tokens), but for any pattern of
        # a shape it does not read, which joins the database
        self._tokens = TokenTable(list(WINDOW_TOKENS), [r for r, _ in escaped], list(points))
        # one database over the raw bytes: secrets as given, [leftover tokens], [plain regexes]
        u = len(self._unique)
        pats = [_hx(self._entry(i).exact) for i in self._unique]
        flags = [0] * u
        self._left_kinds = [kind for _, kind in self._tokens.leftovers]
        self._t0, self._t1 = u, u + len(self._left_kinds)
        pats += [pat for pat, _ in self._tokens.leftovers]
        flags += [hyperscan.HS_FLAG_DOTALL] * len(self._left_kinds)
        self._reach = 0
        if self.regex:
            for i in self._plain:
                head = self._entry(i).skeleton[:PREFIX_CHARS]
                pats.append(_separators().join(re.escape(c.encode()) for c in head))
                flags.append(hyperscan.HS_FLAG_CASELESS | hyperscan.HS_FLAG_DOTALL | hyperscan.HS_FLAG_PREFILTER)
                m = len(head)  # a copy starts at most this far before the end of its head
                self._reach = max(self._reach, m * MAX_SPELLING_BYTES + (m - 1) * MAX_SEPARATORS * MAX_SEPARATOR_BYTES)
        self._raw = _database(pats, flags)
        self._raw_args = (pats[:self._t1], flags[:self._t1])
        self._raw_all: Any = None  # the raw database without the regexes, compiled if heads are everywhere
        self._finder = None
        if self._plain:
            self._finder = PlainFinder({i: self._entry(i).skeleton for i in self._plain}, self.block)

    def __repr__(self) -> str:
        return f"ScanEngine({len(self.secrets)} secrets, overlap={self.overlap})"

    def _entry(self, i: int) -> _Entry:
        e = self._entries[i]
        assert e is not None
        return e

    # ------------------------------------------------------------------ one chunk

    def _scan(self, buf: bytes, lo: int, limit: int, base: int, st: _State) -> None:
        """Copies starting in ``buf[lo:limit]`` (offsets ``+ base`` in ``st``); ``buf``
        may run ``overlap`` bytes past ``limit`` and holds look-behind before ``lo``."""
        raw: list[tuple[int, int, int]] = []
        u, t0, t1 = len(self._unique), self._t0, self._t1
        everywhere = False  # few secrets, heads past one per 256 bytes: read every letter instead
        most, heads = max(64, len(buf) >> 8), [0]

        def on_match(i: int, a: int, b: int, f: int, c: Any) -> bool:
            raw.append((i, a, b))
            if i < t1:
                return False
            heads[0] += 1
            return heads[0] > most  # True stops the scan (ScanTerminated)

        try:
            self._raw.scan(buf, match_event_handler=on_match)
        except hyperscan.ScanTerminated:
            everywhere = True
            if self._raw_all is None:
                self._raw_all = _database(*self._raw_args)
            raw = []
            self._raw_all.scan(buf, match_event_handler=lambda i, a, b, f, c: raw.append((i, a, b)))
        left_ends: list[int] = []
        left_kinds: list[int] = []
        hits: list[tuple[int, int]] = []  # (secret index, start): plain candidates
        near: list[tuple[int, int]] = []  # (secret index, end): a copy may end here (few secrets)
        for pid, _a, b in raw:
            if pid < u:
                i = self._unique[pid]
                s = b - len(self._entry(i).exact)
                if lo <= s < limit:
                    self._exact_at(i, s + base, b + base, st)
            elif pid < t1:
                if b > lo - 4:
                    left_ends.append(b)
                    left_kinds.append(self._left_kinds[pid - t0])
            elif b > lo:
                near.append((self._plain[pid - t1], b))
        ends_a, kinds_a = self._tokens.events(buf)
        keep = ends_a > lo - 4
        ends, kinds = ends_a[keep].tolist(), kinds_a[keep].tolist()
        if left_ends:  # in order of end, as the windows are found
            both = sorted(zip(ends + left_ends, kinds + left_kinds, strict=True), key=lambda ek: ek[0])
            ends, kinds = [e for e, _ in both], [k for _, k in both]
        arr = np.frombuffer(buf, dtype=np.uint8)
        if self._finder is not None and (everywhere or not self.regex):
            hits = self._finder.hits(buf, arr, lo, limit)
        elif near:  # few secrets: the letters only where a head ends, from as far back as a copy can start
            assert self._finder is not None
            spans: list[list[int]] = []  # stretches whose letters are read ([r0, r1) + overlap) overlap: one
            for r0, r1 in sorted((max(lo, b - self._reach), min(limit, b)) for _, b in near):
                if r0 >= r1:
                    continue
                if spans and r0 <= spans[-1][1] + self.overlap:
                    spans[-1][1] = max(spans[-1][1], r1)
                else:
                    spans.append([r0, r1])
            if sum(r1 - r0 + self.overlap for r0, r1 in spans) >= limit - lo:  # heads everywhere: read it all
                hits = self._finder.hits(buf, arr, lo, limit)
            else:
                view = memoryview(buf)
                for r0, r1 in spans:
                    hi = min(len(buf), r1 + self.overlap)
                    hits += self._finder.hits(view[:hi], arr[:hi], r0, r1)
        windows = self._tw.find(arr, ends, lo, limit)
        regions: dict[int, list[tuple[int, int, int]]] = {}
        if windows:
            windows, named = self._tw.name(buf, arr, windows, ends, kinds)
            for stretches in named:
                for i, r0, r1 in stretches:
                    regions.setdefault(i, []).append((r0, r1, 1))
        searched = {i: ([r[0] for r in rs], [r[1] for r in rs]) for i, rs in regions.items()}
        for i, a in hits:
            if i in searched:
                r0s, r1s = searched[i]
                k = bisect.bisect_right(r0s, a) - 1
                if k >= 0 and a < r1s[k]:
                    continue  # inside a stretch the window search reads: it decides
            regions.setdefault(i, []).append((a, a + 1, 0))
        for i, rs in regions.items():
            self._confirm(i, _merge(sorted(rs)), buf, base, st)

    def _exact_at(self, i: int, s: int, e: int, st: _State) -> None:
        """The secret as given at ``[s, e)`` (absolute): kept when it does not overlap
        the previous one (``re.finditer`` of the literal)."""
        if s >= st.exact_end.get(i, 0):
            st.exact.setdefault(i, []).append((s, e))
            st.exact_end[i] = e

    def _confirm(self, i: int, regions: list[tuple[int, int, int]], buf: bytes, base: int, st: _State) -> None:
        """The chain of secret ``i`` over its regions (``(start, end, kind)``; kind 0: a
        plain candidate, confirmed by the plain pattern at its start; 1: a window,
        searched by the byte pattern), resuming after its previous copy."""
        e = self._entry(i)
        n = len(buf)
        last = st.last_end.get(i, 0) - base
        found = st.found.setdefault(i, {})
        for start, end, kind in regions:
            pos = max(start, last)
            if pos >= end:
                continue
            spans: list[tuple[int, int]] = []
            if kind == 0:
                stop = plain_match(e.secret, buf, pos, min(n, pos + self.overlap))
                if stop is not None:
                    spans.append((pos, stop))
            else:  # the byte pattern at each offset in the window where a first character begins
                sm, stop, after = e.matcher, min(n, end + self.overlap), pos
                for s in sm.starts.finditer(buf, pos, min(n, end + MAX_SPELLING_BYTES)):
                    at = s.start()
                    if at >= end:
                        break
                    if at < after:
                        continue
                    stop_at = sm.match_at(buf, at, stop)
                    if stop_at is not None:
                        spans.append((at, stop_at))
                        after = stop_at
            for s, t in spans:
                is_exact = bytes(buf[s:t]) == e.exact
                if is_exact:
                    st.exact_seen.add(i)
                found[(s + base, t + base)] = "exact" if is_exact else "normalized"
                last = t
        st.last_end[i] = last + base

    def _finish(self, st: _State) -> dict[int, list[Span]]:
        """Spans per secret; the secret as given added where the byte pattern never
        matched it exactly (as :meth:`~memkit.scan.matching.SecretMatcher.byte_spans`)."""
        out: dict[int, list[Span]] = {}
        for i in sorted(set(st.found) | set(st.exact)):  # the secrets this stream touched, not all
            spans = dict(st.found.get(i, {}))
            if i not in st.exact_seen:
                for s, e in st.exact.get(i, []):
                    spans.setdefault((s, e), "exact")
            if spans:
                out[i] = [(s, e, k) for (s, e), k in sorted(spans.items())]
        return out

    # ------------------------------------------------------------------ API

    def scan_bytes(self, data: Any) -> dict[int, list[Span]]:
        """Every copy of every secret in a bytes-like object (bytes, bytearray,
        memoryview, mmap), read in :attr:`chunk` pieces without copying them.

        Returns:
            ``{secret index: [(start, end, kind), ...]}`` for the secrets with at
            least one copy, spans in order (byte offsets).
        """
        return self._finish(self.scan_part(data))

    def scan_part(self, data: Any, lo: int = 0, hi: int | None = None) -> _State:
        """The copies that start in ``data[lo:hi]`` (default all of it), each secret's
        chain begun at ``lo`` (bytes before ``lo`` are read only as look-behind, those
        after ``hi`` only to finish a copy): the state :meth:`scan_bytes` finishes.
        :mod:`memkit.residue.pool` joins the parts of a file read by several processes."""
        st = _State()
        with memoryview(data) as whole:
            view = whole.cast("B") if whole.format != "B" or whole.ndim != 1 else whole
            size = len(view)
            stop = size if hi is None else min(hi, size)
            start = max(0, lo)  # first offset this chunk reports
            while start < stop or (start == stop == 0):
                end = min(stop, start + self.chunk)
                eof = end >= size
                b0 = max(0, start - _LOOKBEHIND)
                buf = view[b0:min(size, end + (0 if eof else self.overlap))]
                try:
                    self._scan(buf, start - b0, end - b0, b0, st)
                finally:
                    buf.release()
                if end >= stop:
                    break
                start = end
            if view is not whole:
                view.release()
        return st

    def scan_stream(self, fh: BinaryIO) -> dict[int, list[Span]]:
        """:meth:`scan_bytes` over a binary stream read in :attr:`chunk` pieces, with
        :attr:`overlap` bytes (and 64 of look-behind) carried between them: memory
        independent of its size."""
        st = _State()
        buf = b""
        base = 0  # absolute offset of buf[0]
        lo = 0  # first offset (in buf) this round reports
        while True:
            data = fh.read(self.chunk)
            eof = not data
            buf = buf + data if buf else data
            limit = len(buf) if eof else max(lo, len(buf) - self.overlap)
            if limit > lo:
                self._scan(buf, lo, limit, base, st)
            if eof:
                return self._finish(st)
            cut = max(0, limit - _LOOKBEHIND)
            buf = buf[cut:]
            base += cut
            lo = limit - cut

    def scan_file(self, path: str | Path) -> dict[int, list[Span]]:
        """Every copy in a file opened ``"rb"`` (read-only): memory-mapped and read as
        :meth:`scan_bytes` (no copy of its pages), or as :meth:`scan_stream` where it
        cannot be mapped (a pipe, an empty or special file)."""
        with open(path, "rb") as fh:
            try:
                mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            except (ValueError, OSError):
                return self.scan_stream(fh)
            with mm:
                return self.scan_bytes(mm)

    def counts(self, found: dict[int, list[Span]]) -> dict[str, int]:
        """Copies per secret (every secret a key, zeros included) from a scan result."""
        return {s: len(found.get(self._index[s], [])) for s in self.secrets}


_WORKER_ENGINE: ScanEngine | None = None
"""The engine a forked :func:`scan_files` worker inherits."""


def _scan_counts(path: str) -> dict[str, int]:
    assert _WORKER_ENGINE is not None
    return _WORKER_ENGINE.counts(_WORKER_ENGINE.scan_file(path))


def scan_files(secrets: Sequence[str], paths: Iterable[str | Path], *, workers: int | None = None,
               **kw: Any) -> dict[str, dict[str, int]]:
    """Copies per secret per file: ``{path: {secret: count}}``, in the order of
    ``paths``: one engine (``kw`` as :class:`ScanEngine`), one pass per file, the files
    shared among ``workers`` processes forked from this one (default: one per CPU; 1,
    or a platform without ``fork``, scans here), largest files first.

    Raises:
        as :class:`ScanEngine`; OSError: a file that cannot be read.
    """
    global _WORKER_ENGINE
    engine = ScanEngine(secrets, **kw)
    paths = [str(p) for p in paths]
    workers = min(workers or os.cpu_count() or 1, len(paths))
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return {p: engine.counts(engine.scan_file(p)) for p in paths}
    order = sorted(paths, key=lambda p: -os.path.getsize(p))
    _WORKER_ENGINE = engine
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            counts = dict(zip(order, pool.map(_scan_counts, order, chunksize=1), strict=True))
    finally:
        _WORKER_ENGINE = None
    return {p: counts[p] for p in paths}


# --------------------------------------------------------------------------- many secrets, one matcher's interface


@lru_cache(maxsize=256)
def single_engine(secret: str) -> Any:
    """A :class:`memkit.scan.engine.ScanEngine` for one secret (its spans equal the
    matcher's :meth:`~memkit.scan.matching.SecretMatcher.byte_spans`), or ``None`` where the
    engine takes no such secret."""
    try:
        return ScanEngine([secret])
    except (ValueError, TypeError):
        return None
