"""Many secrets behind one matcher's interface: :class:`MultiMatcher` (what the residue
scanner, forget and the LLM cache call when they look for many secrets at once), and
how a report shows a secret (:func:`mask_secret`).

Bytes go through :class:`memkit.scan.engine.ScanEngine`; a text (a stored value, a
cache entry) is prefiltered by the same engine over its UTF-8 bytes as
:func:`text_bytes` writes them (the byte pattern then accepts every copy the text
pattern accepts) and confirmed by each named secret's matcher: linear in the text and
in the number of secrets named, never per secret per byte. An ASCII text with no
control character is confirmed by the engine alone (:meth:`MultiMatcher.spans`).
``tests/test_scan_multi.py`` holds both to each secret's own text pattern.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from memkit.scan.engine import ScanEngine, single_engine
from memkit.scan.hsdb import compile_block
from memkit.scan.matching import BREAKERS_AS_SPACES, SecretMatcher, matcher, merge_copies
from memkit.scan.spellings import SEP_PATTERNS_BYTES

__all__ = ["MultiMatcher", "each_secret", "mask_secret", "may_hold", "text_bytes", "texts_holding_folds"]

_BREAKER_BYTES_AS_SPACES = bytes(0x20 if c in BREAKERS_AS_SPACES else c for c in range(256))
""":data:`BREAKERS_AS_SPACES` over UTF-8 bytes (the breakers are ASCII)."""

_BREAKERS = re.compile(rb"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")
_OPENERS = re.compile(rb"[<\x1b]")
_CONSTRUCTS = re.compile("|".join(f"(?:{p})" for p in SEP_PATTERNS_BYTES[:3]).encode())
"""The separators whose body a space may extend (ANSI codes, comments, tags), as the
byte pattern tries them at an opener."""


def text_bytes(text: str) -> bytes:
    """``text`` in UTF-8 as the byte pattern must read it to accept every copy the text
    pattern accepts in ``text`` (the prefilter of :meth:`MultiMatcher.candidates` and
    :func:`may_hold`).

    The text pattern reads a control character the byte pattern breaks at
    (:data:`~memkit.scan.matching.BREAKERS_AS_SPACES`) as one separator that no tag,
    comment or ANSI code holds; the byte pattern has no such byte. So each is written as
    a space (one separator in both), and each ``<`` or ESC whose construct would, in
    these bytes, hold one of those spaces is written as ``(`` (a separator that opens
    nothing): in the text that opener opens nothing either, and in the bytes its
    construct, one atomic separator, could swallow a letter the copy reads. Openers are
    judged from the last, so each sees the bytes after it as they will be read (a
    ``<`` written as ``(`` no longer ends a tag begun before it)."""
    data = text.encode("utf-8", "surrogatepass")
    spaced = data.translate(_BREAKER_BYTES_AS_SPACES)
    if spaced == data:
        return data
    openers = [m.start() for m in _OPENERS.finditer(data)]
    if not openers:
        return spaced
    breakers = [m.start() for m in _BREAKERS.finditer(data)]
    out = bytearray(spaced)
    for q in reversed(openers):
        m = _CONSTRUCTS.match(out, q)
        if m is not None:
            k = bisect.bisect_left(breakers, q)
            if k < len(breakers) and breakers[k] < m.end():
                out[q] = 0x28
    return bytes(out)


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
    """The interface of :class:`~memkit.scan.matching.SecretMatcher` that the residue
    scanner uses, for many secrets at once: spans are ``(start, end, kind, index)``
    with the index of the secret in :attr:`secrets`. Bytes go through
    :meth:`ScanEngine.scan_bytes`; each text (a stored value, a cache entry) is
    prefiltered by the same engine (:meth:`candidates`) and confirmed by the matcher
    of each secret it names.

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
        """Indices of the secrets that may have a copy in ``text`` (a superset): those
        the scan engine finds in the text's UTF-8 bytes, and in those of the text with
        characters that fold to several (``ß`` -> ``ss``) folded, as
        :meth:`SecretMatcher.spans` reads it; each read as :func:`text_bytes`
        writes it."""
        from memkit.scan.matching import multi_char_pattern, spelling_tables

        forms = [text]
        if multi_char_pattern().search(text) is not None:
            multi = spelling_tables()[3]
            forms.append("".join(multi.get(ch, ch) for ch in text))
        named: set[int] = set()
        for form in forms:
            named.update(self.engine.scan_bytes(text_bytes(form)))
        return sorted(named)

    def search(self, text: str) -> bool:
        """Whether ``text`` holds a copy of any of the secrets."""
        return any(self.engine._entry(i).matcher.search(text) for i in self.candidates(text))

    def spans(self, text: str) -> list[tuple[int, int, str, int]]:
        """``(start, end, kind, index)`` of every copy of every secret in ``text``: each
        secret's :meth:`SecretMatcher.spans`.

        An ASCII text with no control character the byte pattern breaks at is read by
        the scan engine alone, with no secret's text pattern compiled (tens of ms each,
        in every process): over such a text the byte pattern is the text pattern (the
        same ASCII alternatives, in an order that agrees wherever two match at one
        offset; the same separators, since the byte pattern's non-ASCII ones cannot
        match; the same constructs, their bodies counted alike), and :meth:`SecretMatcher.spans`
        adds to the pattern's copies only the secret as given (added here too, then
        merged alike) and a folded reading that needs a non-ASCII character."""
        if text.isascii():
            data = text.encode("ascii")
            if data.translate(_BREAKER_BYTES_AS_SPACES) == data:
                out: list[tuple[int, int, str, int]] = []
                for i, found in self.engine.scan_bytes(data).items():
                    given = [(m.start(), m.end(), "exact") for m in re.finditer(re.escape(self.secrets[i]), text)]
                    out += [(s, e, k, i) for s, e, k in merge_copies([*found, *given])]
                return sorted(out)
        out = [(s, e, k, i) for i in self.candidates(text)
               for s, e, k in self.engine._entry(i).matcher.spans(text)]
        return sorted(out)

    def contains(self, value: Any) -> bool:
        """Whether ``value`` (a string, bytes, or nested dicts/lists of them) holds a
        copy of any secret; a string that is JSON is also searched decoded
        (:meth:`SecretMatcher.contains`, for each secret the prefilter names)."""
        import json

        from memkit.scan.matching import strings_of

        if isinstance(value, (bytes, bytearray, memoryview)):
            return bool(self.engine.scan_bytes(bytes(value)))
        for text in strings_of(value):
            forms = [text]
            if text[:1] in "[{\"":
                try:
                    forms += list(strings_of(json.loads(text)))
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


@lru_cache(maxsize=1)
def _folding() -> tuple[Any, dict[int, str]]:
    """A Hyperscan database of the UTF-8 of every character that folds to several
    (``ß``, ``ﬁ``, ``㎏``), and their folds for :meth:`str.translate`."""
    from memkit.scan.matching import spelling_tables

    multi = spelling_tables()[3]
    db = compile_block([ch.encode() for ch in sorted(multi)], 0, literal=True)
    return db, {ord(ch): f for ch, f in multi.items()}


def may_hold(m: Any, texts: Sequence[str]) -> list[bool]:
    """Whether each of ``texts`` may hold a copy of ``m``'s secret or secrets (a
    superset, as :meth:`MultiMatcher.candidates`), for a matcher or a
    :class:`MultiMatcher`: one scan engine pass over all of them (joined by NUL bytes,
    which no byte copy holds), and one over those holding a character that folds to
    several, folded; not one per text."""

    engine = m.engine if isinstance(m, MultiMatcher) else single_engine(m.secret)
    if engine is None:
        return [True] * len(texts)
    out = [False] * len(texts)
    fold = _folding()[1]

    def scan(indices: list[int], joined: bytes, starts: list[int], folds: bool) -> list[int]:
        for spans in engine.scan_bytes(joined).values():
            for s, _e, _k in spans:
                out[indices[bisect.bisect_right(starts, s) - 1]] = True
        return [indices[j] for j in sorted(texts_holding_folds(joined, starts))] if folds else []

    folding = scan(list(range(len(texts))), *_joined(texts), True)
    if folding:
        scan(folding, *_joined([texts[i].translate(fold) for i in folding]), False)
    return out


def texts_holding_folds(joined: bytes, starts: Sequence[int]) -> set[int]:
    """Which of the texts joined by NUL in ``joined`` (text ``k`` from ``starts[k]``)
    hold a character that folds to several (``ß``, ``ﬁ``, ``㎏``): the texts
    :func:`may_hold` reads again, folded. One Hyperscan pass."""
    holding: set[int] = set()
    _folding()[0].scan(joined, match_event_handler=lambda i, a, b, f, c: holding.add(
        bisect.bisect_right(starts, b - 1) - 1))
    return holding


_BREAKER_SET = bytes(sorted(BREAKERS_AS_SPACES))
"""The bytes :func:`text_bytes` writes as spaces."""


def _joined(texts: Sequence[str]) -> tuple[bytes, list[int]]:
    """:func:`text_bytes` of each of ``texts`` joined by NUL bytes, and where each
    begins: where no text holds a byte that function rewrites (the NULs joining them
    are then the only breakers), the UTF-8 of the joined text, encoded at once."""
    from memkit.scan.json_escapes import joins

    raw = "\0".join(texts).encode("utf-8", "surrogatepass")
    nuls, breaker, _ = joins(raw)
    if len(nuls) == max(len(texts) - 1, 0) and not breaker:
        return raw, [0, *(nuls + 1).tolist()]
    forms = [text_bytes(t) for t in texts]
    starts = [0]
    for f in forms[:-1]:
        starts.append(starts[-1] + len(f) + 1)
    return b"\0".join(forms), starts


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
    ``[(None, m)]`` for a :class:`~memkit.scan.matching.SecretMatcher`. For the scans that
    ask per secret (full-text ``MATCH`` queries)."""
    if isinstance(m, MultiMatcher):
        return [(i, matcher(secret)) for i, secret in enumerate(m.secrets)]
    return [(None, m)]
