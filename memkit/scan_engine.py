"""Many secrets, one linear-time pass: the multi-secret byte scan engine.

What a copy is stays in :mod:`memkit.matching` (one matcher for forget, redaction,
the residue scanner, the LLM cache and the probes); this module only finds the copies
of many secrets at once, in bounded memory, without backtracking over the input:

1. **Prefilter.** Every secret's :func:`~memkit.matching.prefilter_pattern` (a
   superset of its byte pattern: no lookaround, no bound) goes into one RE2 set
   (``google-re2``, an automaton that cannot backtrack). For each block of
   :attr:`ScanEngine.block` bytes, the set is run over the block and the
   :attr:`ScanEngine.overlap` bytes after it; it names the secrets that may have a
   copy starting in the block.
2. **Confirm.** For each secret named, the matcher's own byte pattern
   (:attr:`memkit.matching.SecretMatcher.bytes`) runs ``finditer`` over the block and
   its overlap, resuming after the previous copy's end and keeping copies that start
   in the block. A copy is at most :attr:`~memkit.matching.SecretMatcher.max_bytes`
   long, so this yields exactly the copies, in order, that ``finditer`` over the
   whole buffer yields (plus the secret verbatim where the pattern missed it, as
   :meth:`~memkit.matching.SecretMatcher.byte_spans` adds).

Streams (:meth:`ScanEngine.scan_file`) are read in chunks; the last ``overlap`` bytes
are carried into the next chunk, so memory is ``O(chunk + overlap)`` whatever the file
size. ``overlap`` is the longest copy any of the secrets can have
(:attr:`~memkit.matching.SecretMatcher.max_bytes`).

Complexity, for ``n`` input bytes and ``k`` secrets: each of the ``ceil(k / 8)`` RE2
sets reads every byte once per block pass (``n * (1 + overlap / block)`` bytes,
linear in ``n``; an RE2 automaton never revisits input). The confirm step runs only on blocks the prefilter
names, each a bounded window of ``block + overlap`` bytes, where one match attempt of
the byte pattern reads at most ``max_bytes`` bytes (the module doc of
:mod:`memkit.matching`, Complexity): linear in ``n`` for a fixed set of secrets.

Secrets go into RE2 sets of :data:`SET_SIZE` (8), each with ``max_mem``
:data:`RE2_MAX_MEM` (8 MiB; a set that does not compile is split further); every
set reads every block, so the prefilter's time grows with ``k / SET_SIZE``. A DFA
resets its cache when full and continues, and a single secret too large to compile
raises ``re2.error``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import re2

from memkit.matching import SecretMatcher, matcher, max_copy_bytes, prefilter_pattern

__all__ = ["RE2_MAX_MEM", "SET_SIZE", "MultiMatcher", "ScanEngine", "Span", "each_secret", "mask_secret",
           "scan_files"]

RE2_MAX_MEM = 8 << 20
"""Memory budget of one RE2 set (bytes): program and DFA cache. 8 MiB keeps 1,000
secrets (125 sets) under 1 GiB; 128 MiB scans about twice as fast at twice the
memory (200 secrets, 8 MiB of prose and binary: 26.5 s and 272 MiB peak RSS against
13.1 s and 515 MiB)."""

SET_SIZE = 8
"""Secrets per RE2 set. A set's DFA tracks every pattern's progress at once; past
about 8 of these patterns its states multiply (measured on prose plus binary: 2.7 ms
per secret per 4 MiB in sets of 8, 885 ms in sets of 32), so many secrets are
scanned as several sets of 8, each over every block."""

Span = tuple[int, int, str]
"""``(start, end, kind)`` of one copy: byte offsets, kind ``exact`` or ``normalized``."""


@dataclass
class _Entry:
    secret: str
    exact: bytes
    _matcher: SecretMatcher | None = None

    @property
    def matcher(self) -> SecretMatcher:
        """Compiled on first use: only secrets the prefilter names pay for it."""
        if self._matcher is None:
            self._matcher = matcher(self.secret)
        return self._matcher


def _compile_set(patterns: list[str]) -> Any:
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.max_mem = RE2_MAX_MEM
    options.never_capture = True
    options.log_errors = False
    rset = re2.Set.SearchSet(options)
    for p in patterns:
        rset.Add(p)
    rset.Compile()
    return rset


class ScanEngine:
    """All copies of many secrets in bytes, files and streams (module doc).

    Args:
        secrets: the secrets (each with a letter or digit; duplicates are scanned
            once and reported under their first index).
        block: prefilter block size in bytes (default 1 MiB).
        chunk: read size for files and streams in bytes (default 16 MiB).

    Raises:
        ValueError: no secrets, or a secret without letters or digits.
        TypeError: a secret that is not a string.
        re2.error: the set does not compile within :data:`RE2_MAX_MEM`.
    """

    def __init__(self, secrets: Sequence[str], *, block: int = 1 << 20, chunk: int = 16 << 20) -> None:
        secrets = list(secrets)
        if not secrets:
            raise ValueError("ScanEngine: no secrets to scan for")
        self.secrets = secrets
        self._entries = [_Entry(s, s.encode("utf-8")) for s in secrets]
        self._index: dict[str, int] = {}
        for i, s in enumerate(secrets):
            self._index.setdefault(s, i)
        self.overlap = max(max_copy_bytes(s) for s in dict.fromkeys(secrets))
        self.block = max(int(block), 1)
        self.chunk = max(int(chunk), self.block)
        unique = [i for i, s in enumerate(secrets) if self._index[s] == i]
        self._sets: list[tuple[Any, list[int]]] = []
        stack = [unique[j : j + SET_SIZE] for j in range(0, len(unique), SET_SIZE)][::-1]
        while stack:  # one RE2 set, or shards of them when one does not fit RE2_MAX_MEM
            ids = stack.pop()
            try:
                self._sets.append((_compile_set([prefilter_pattern(secrets[i]) for i in ids]), ids))
            except re2.error:
                if len(ids) == 1:
                    raise
                stack += [ids[len(ids) // 2:], ids[: len(ids) // 2]]

    def __repr__(self) -> str:
        return f"ScanEngine({len(self.secrets)} secrets, overlap={self.overlap})"

    # ------------------------------------------------------------------ core

    def _scan(self, buf: Any, limit: int, base: int, last_end: dict[int, int],
              out: dict[int, list[Span]]) -> None:
        """Copies starting in ``buf[:limit]`` (offsets ``+ base`` in ``out``);
        ``buf`` may run ``overlap`` bytes past ``limit``. ``last_end``: per secret,
        the absolute end of its last copy (the resume point of ``finditer``)."""
        n = len(buf)
        for b0 in range(0, limit, self.block):
            b1 = min(b0 + self.block, limit)
            hi = min(n, b1 + self.overlap)
            for i in self._named(memoryview(buf)[b0:hi]):
                e = self._entries[i]
                pos = max(b0, last_end.get(i, 0) - base)
                found: dict[tuple[int, int], str] = {}
                for m in e.matcher.bytes.finditer(buf, pos, hi):
                    if m.start() >= b1:
                        break
                    found[(m.start(), m.end())] = "exact" if m.group(0) == e.exact else "normalized"
                # the secret as given always counts (byte_spans), where the pattern missed it
                if e.exact and "exact" not in found.values():
                    window = bytes(buf[b0:min(n, b1 + len(e.exact) - 1)])
                    j = window.find(e.exact)
                    while j >= 0:
                        found.setdefault((b0 + j, b0 + j + len(e.exact)), "exact")
                        j = window.find(e.exact, j + 1)
                for (s, t), kind in sorted(found.items()):
                    out.setdefault(i, []).append((s + base, t + base, kind))
                    last_end[i] = max(last_end.get(i, 0), t + base)

    def _named(self, data: Any) -> list[int]:
        """Indices of the secrets the prefilter names in ``data`` (every shard)."""
        out: list[int] = []
        for rset, ids in self._sets:
            out += [ids[h] for h in rset.Match(data) or ()]
        return sorted(out)

    # ------------------------------------------------------------------ API

    def scan_bytes(self, data: Any) -> dict[int, list[Span]]:
        """Every copy of every secret in a bytes-like object.

        Returns:
            ``{secret index: [(start, end, kind), ...]}`` for the secrets with at
            least one copy, spans in order (byte offsets).
        """
        out: dict[int, list[Span]] = {}
        self._scan(data, len(data), 0, {}, out)
        return out

    def scan_stream(self, fh: BinaryIO) -> dict[int, list[Span]]:
        """:meth:`scan_bytes` over a binary stream read in :attr:`chunk` pieces, with
        :attr:`overlap` bytes carried between them (memory independent of its size)."""
        out: dict[int, list[Span]] = {}
        last_end: dict[int, int] = {}
        buf = b""
        base = 0
        while True:
            data = fh.read(self.chunk)
            eof = not data
            buf = buf + data if buf else data
            limit = len(buf) if eof else max(0, len(buf) - self.overlap)
            if limit:
                self._scan(buf, limit, base, last_end, out)
            if eof:
                return out
            buf = buf[limit:]
            base += limit

    def scan_file(self, path: str | Path) -> dict[int, list[Span]]:
        """:meth:`scan_stream` over a file opened ``"rb"`` (read-only)."""
        with open(path, "rb") as fh:
            return self.scan_stream(fh)

    def counts(self, found: dict[int, list[Span]]) -> dict[str, int]:
        """Copies per secret (every secret a key, zeros included) from a scan result."""
        return {s: len(found.get(self._index[s], [])) for s in self.secrets}


def scan_files(secrets: Sequence[str], paths: Iterable[str | Path], **kw: Any) -> dict[str, dict[str, int]]:
    """Copies per secret per file: ``{path: {secret: count}}`` (one engine, one pass
    per file; ``kw`` as :class:`ScanEngine`)."""
    engine = ScanEngine(secrets, **kw)
    return {str(p): engine.counts(engine.scan_file(p)) for p in paths}


# --------------------------------------------------------------------------- many secrets, one matcher's interface


class _MultiMask:
    """``.sub(repl, text)`` masking every copy of every secret (``SecretMatcher.text``'s
    use in the residue scanner)."""

    def __init__(self, owner: MultiMatcher) -> None:
        self._owner = owner

    def sub(self, repl: str, text: str) -> str:
        for i in self._owner.candidates(text):
            text = self._owner.engine._entries[i].matcher.text.sub(repl, text)
        return text


class MultiMatcher:
    """The interface of :class:`~memkit.matching.SecretMatcher` that the residue
    scanner uses, for many secrets at once: spans are ``(start, end, kind, index)``
    with the index of the secret in :attr:`secrets`. Each text is prefiltered by the
    RE2 set (one pass for all secrets) and confirmed by the matcher of each secret the
    prefilter names; bytes go through :meth:`ScanEngine.scan_bytes`.

    Args:
        secrets: the secrets (order kept; duplicates scanned once).

    Raises:
        ValueError / TypeError: as :class:`ScanEngine`.
    """

    def __init__(self, secrets: Sequence[str]) -> None:
        self.engine = ScanEngine(secrets)
        self.secrets = self.engine.secrets
        self.text = _MultiMask(self)

    def candidates(self, text: str) -> list[int]:
        """Indices of the secrets that may have a copy in ``text`` (a superset: the
        text's UTF-8 bytes, and the text with characters that fold to several
        (``ß`` -> ``ss``) folded, as :meth:`SecretMatcher.search` reads it)."""
        from memkit.matching import _multi_chars, _tables

        forms = [text.encode("utf-8", "surrogatepass")]
        if _multi_chars().search(text) is not None:
            multi = _tables()[3]
            forms.append("".join(multi.get(ch, ch) for ch in text).encode("utf-8", "surrogatepass"))
        return sorted({i for data in forms for i in self.engine._named(data)})

    def search(self, text: str) -> bool:
        """Whether ``text`` holds a copy of any of the secrets."""
        return any(self.engine._entries[i].matcher.search(text) for i in self.candidates(text))

    def spans(self, text: str) -> list[tuple[int, int, str, int]]:
        """``(start, end, kind, index)`` of every copy of every secret in ``text``."""
        out = [(s, e, k, i) for i in self.candidates(text)
               for s, e, k in self.engine._entries[i].matcher.spans(text)]
        return sorted(out)

    def contains(self, value: Any) -> bool:
        """Whether ``value`` (a string, bytes, or nested dicts/lists of them) holds a
        copy of any secret; a string that is JSON is also searched decoded
        (:meth:`SecretMatcher.contains`, for each secret the prefilter names)."""
        import json

        from memkit.matching import _strings

        if isinstance(value, (bytes, bytearray, memoryview)):
            return bool(self.engine.scan_bytes(bytes(value)))
        for text in _strings(value):
            forms = [text]
            if text[:1] in "[{\"":
                try:
                    forms += list(_strings(json.loads(text)))
                except ValueError:
                    pass
            named = {i for f in forms for i in self.candidates(f)}
            if any(self.engine._entries[i].matcher.contains(text) for i in sorted(named)):
                return True
        return False

    def byte_spans(self, data: Any) -> list[tuple[int, int, str, int]]:
        """``(start, end, kind, index)`` of every copy in a bytes-like object."""
        found = self.engine.scan_bytes(data)
        return sorted((s, e, k, i) for i, spans in found.items() for s, e, k in spans)


def mask_secret(secret: str) -> str:
    """A secret as a report may show it: its first and last character around one
    ``*`` per character in between (``X*************9``); ``*`` only for secrets
    shorter than 6 characters."""
    if len(secret) < 6:
        return "*" * len(secret)
    return secret[0] + "*" * (len(secret) - 2) + secret[-1]


def each_secret(m: Any) -> list[tuple[int | None, SecretMatcher]]:
    """The one-secret matchers behind ``m``: ``[(index, matcher)]`` for a
    :class:`MultiMatcher` (``index`` is the secret's position, as in its hits), or
    ``[(None, m)]`` for a :class:`~memkit.matching.SecretMatcher`. For the scans that
    ask per secret (full-text ``MATCH`` queries)."""
    if isinstance(m, MultiMatcher):
        return [(i, matcher(secret)) for i, secret in enumerate(m.secrets)]
    return [(None, m)]
