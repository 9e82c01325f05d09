"""Many secrets behind one matcher's interface: :class:`MultiMatcher` (what the residue
scanner, forget and the LLM cache call when they look for many secrets at once), and
how a report shows a secret (:func:`mask_secret`).

Bytes go through :class:`memkit.scan_engine.ScanEngine`; a text (a stored value, a
cache entry) is prefiltered by RE2 sets of every secret's
:func:`~memkit.matching.prefilter_pattern` and confirmed by each named secret's matcher.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import re2

from memkit.matching import SecretMatcher, matcher, prefilter_pattern
from memkit.scan_engine import ScanEngine

__all__ = ["RE2_MAX_MEM", "SET_SIZE", "MultiMatcher", "each_secret", "mask_secret"]

RE2_MAX_MEM = 8 << 20
"""Memory budget of one RE2 set of :class:`MultiMatcher`'s text prefilter (bytes)."""

SET_SIZE = 8
"""Secrets per RE2 set of :class:`MultiMatcher`'s text prefilter. A set's DFA tracks
every pattern's progress at once; past about 8 of these patterns its states multiply,
so many secrets are prefiltered as several sets of 8."""


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


class _MultiMask:
    """``.sub(repl, text)`` masking every copy of every secret (``SecretMatcher.text``'s
    use in the residue scanner)."""

    def __init__(self, owner: MultiMatcher) -> None:
        self._owner = owner

    def sub(self, repl: str, text: str) -> str:
        for i in self._owner.candidates(text):
            text = self._owner.engine._entry(i).matcher.text.sub(repl, text)
        return text


class MultiMatcher:
    """The interface of :class:`~memkit.matching.SecretMatcher` that the residue
    scanner uses, for many secrets at once: spans are ``(start, end, kind, index)``
    with the index of the secret in :attr:`secrets`. Bytes go through
    :meth:`ScanEngine.scan_bytes`; each text (a stored value, a cache entry) is
    prefiltered by RE2 sets of every secret's
    :func:`~memkit.matching.prefilter_pattern` (built on first use, :data:`SET_SIZE`
    secrets a set) and confirmed by the matcher of each secret they name.

    Args:
        secrets: the secrets (order kept; duplicates scanned once).

    Raises:
        ValueError / TypeError: as :class:`ScanEngine`.
    """

    def __init__(self, secrets: Sequence[str]) -> None:
        self.engine = ScanEngine(secrets)
        self.secrets = self.engine.secrets
        self.text = _MultiMask(self)
        self._sets: list[tuple[Any, list[int]]] | None = None

    def _named(self, data: bytes) -> list[int]:
        """Indices of the secrets the RE2 prefilter names in ``data`` (every shard)."""
        if self._sets is None:
            self._sets = []
            unique = self.engine._unique
            stack = [unique[j: j + SET_SIZE] for j in range(0, len(unique), SET_SIZE)][::-1]
            while stack:  # one RE2 set, or shards of them when one does not fit RE2_MAX_MEM
                ids = stack.pop()
                try:
                    self._sets.append((_compile_set([prefilter_pattern(self.secrets[i]) for i in ids]), ids))
                except re2.error:
                    if len(ids) == 1:
                        raise
                    stack += [ids[len(ids) // 2:], ids[: len(ids) // 2]]
        out: list[int] = []
        for rset, ids in self._sets:
            out += [ids[h] for h in rset.Match(data) or ()]
        return sorted(out)

    def candidates(self, text: str) -> list[int]:
        """Indices of the secrets that may have a copy in ``text`` (a superset: the
        text's UTF-8 bytes, and the text with characters that fold to several
        (``ß`` -> ``ss``) folded, as :meth:`SecretMatcher.search` reads it)."""
        from memkit.matching import _multi_chars, _tables

        forms = [text.encode("utf-8", "surrogatepass")]
        if _multi_chars().search(text) is not None:
            multi = _tables()[3]
            forms.append("".join(multi.get(ch, ch) for ch in text).encode("utf-8", "surrogatepass"))
        return sorted({i for data in forms for i in self._named(data)})

    def search(self, text: str) -> bool:
        """Whether ``text`` holds a copy of any of the secrets."""
        return any(self.engine._entry(i).matcher.search(text) for i in self.candidates(text))

    def spans(self, text: str) -> list[tuple[int, int, str, int]]:
        """``(start, end, kind, index)`` of every copy of every secret in ``text``."""
        out = [(s, e, k, i) for i in self.candidates(text)
               for s, e, k in self.engine._entry(i).matcher.spans(text)]
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
            if any(self.engine._entry(i).matcher.contains(text) for i in sorted(named)):
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
