r"""What counts as a copy of a secret: the one matcher forget, redaction, the residue
scanner, the LLM cache and the probe detectors share (README, "What counts as a copy").

A copy of a secret is its *skeleton* (the letters and digits of its NFKC, case-folded
form, in order) with any number of *separators* between them; the secret exactly as
given always counts too. Each skeleton character matches every spelling a store, a
model or a reader's tools can produce for it:

* any Unicode normal form and case: ``X``, ``x``, fullwidth ``Ｘ``, mathematical ``𝐗``
  (every code point whose NFKC case fold is that character), a base letter followed
  by combining marks (``e`` + U+0301 for ``é``), dotless ``ı``, small capitals,
  regional-indicator, squared, circled and parenthesized letters, and the decimal
  digits of other scripts (``٥``, ``५``);
* characters that fold to several (``ß`` for ``ss``, ligatures, Roman numerals),
  in both directions (a second pass over the text with those characters folded);
* the character written as an escape: JSON ``\uXXXX`` (a surrogate pair above the
  BMP; any number of backslashes, i.e. JSON inside JSON), an HTML numeric entity
  (``&#57;``), percent-encoded UTF-8 (``%39``).

Separators: every character of Unicode categories Z (spaces), P (punctuation: ``-``
``_`` ``.`` ``/``, quotes, backslashes, the dashes U+2010–U+2015, fullwidth forms),
S (symbols: U+2212 minus, markdown's ``*``), Cf (format: soft hyphen, zero-width
U+200B–U+200D, U+2060, U+FEFF), Cc (control: newline, tab), Mn/Me (combining and
variation marks) and any whitespace, plus Hangul fillers; and the encodings a reader's
tools render away: JSON escapes, HTML tags, comments and entities, percent-encoding,
ANSI colour codes. In bytes, any non-ASCII UTF-8 character may also separate (a
superset of the text separators), but NUL and other non-whitespace control bytes do
not (binary files would otherwise match short digit runs everywhere).

A run of separators is atomic, holds at most :data:`MAX_SEPARATORS` (16) separators,
and stops where the next character's spelling starts, so an encoded character of the
secret is never taken for a separator. Every repetition inside a spelling or a
separator is bounded too (64 backslashes, 8 leading zeros, 500 characters of a tag or
comment), so a copy is at most :attr:`SecretMatcher.max_bytes` long.

Complexity: one match attempt reads at most ``max_bytes`` characters and never
backtracks into a separator run (atomic groups, possessive repeats), so a search over
``n`` characters takes ``O(n * max_bytes)`` time in the worst case and ``O(n)`` for a
fixed secret -- linear, whatever the text (``tests/test_scan_engine.py`` checks it on
adversarial families of every encoding: time at 4x the size within 5x the time). Many
secrets at once: :mod:`memkit.scan.engine` finds, in one automaton pass (Hyperscan, no
backtracking), every *window token* (:data:`WINDOW_TOKENS`, :func:`escaped_spellings`,
:func:`spelling_points`), finds plain candidates by literal search, confirms them with
:func:`plain_match` and searches the windows around tokens with these patterns;
memory is independent of the input size, speed is compared with GNU grep
(``benchmarks/bench_scan.py``).

A match is ``exact`` when it is the secret verbatim, else ``normalized``. Text
patterns work on ``str``; byte patterns on UTF-8 bytes (files on disk, blobs).
Patterns are compiled once per secret (cached); the Unicode tables they are built
from once per machine (half a second, then kept in memkit's cache directory).

Matching is deliberately generous: a reader who sees ``x q 7 violet 3829`` has the
secret, so a verdict of "clean" must not count that as absent. Left out: homoglyphs
of other scripts (Cyrillic ``Х``), text reversed by bidi overrides, a secret split
across two stored values, and more than :data:`MAX_SEPARATORS` separators between two
of its characters.

Why this module is long: it is the one definition of a copy (README, "What counts
as a copy"): the spelling tables, the text and byte patterns built from them, their
bounds, and the redaction and prefilter built on the same tables; one module keeps
every consumer (forget, redaction, the scanner, the cache, the detectors, the scan
engine) on the same definition.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache, cached_property, lru_cache
from typing import Any

from memkit.scan.spellings import (
    BACKSLASHES,
    BREAKER_BYTES,
    alnum_fold,
    byte_alternatives,
    char_chars,
    char_spellings,
    decomposed,
    encoded_forms,
    escapes,
    fold,
    multi_char_pattern,
    sep_bytes,
    sep_bytes_plain,
    sep_text,
    skeleton,
    spelling_tables,
    spellings,
    variants_table,
)

__all__ = ["BREAKERS_AS_SPACES", "BREAKER_BYTES", "TOKEN_MAX_BYTES", "WINDOW_TOKENS", "alnum_fold",
           "escaped_spellings", "fewest_spellings", "SecretMatcher", "contains_secret", "matcher",
           "max_copy_bytes", "merge_copies", "plain_match", "prefilter_pattern", "redact_json", "redact_text",
           "secret_bytes_regex", "scalar_text", "secret_regex", "skeleton", "spelling_points"]


BREAKERS_AS_SPACES = {c: " " for c in [*range(0x00, 0x09), *range(0x0E, 0x1B), *range(0x1C, 0x20), 0x7F]}
"""The control characters a text pattern reads as separators and the byte pattern as
breakers (:data:`memkit.scan.matching.BREAKER_BYTES`), as spaces: one separator each in
both patterns. A space may extend a tag, comment or ANSI code the control ended:
:func:`memkit.scan.multi.text_bytes` writes the text for the byte pattern."""



MAX_SEPARATORS = 16
"""The most separators (characters or encoded constructs of :data:`SEP_PATTERNS`)
between two consecutive characters of a copy. Bounding the run bounds a copy's length
(:attr:`SecretMatcher.max_bytes`), which makes matching linear-time and lets a stream
be scanned in chunks with a fixed overlap."""

MAX_SEPARATOR_BYTES = 2008
"""An upper bound on the UTF-8 length of one separator (the longest: an HTML comment
of 500 characters of 4 bytes each, 2,007 bytes)."""

MAX_SPELLING_BYTES = 320
"""An upper bound on the UTF-8 length of one character's spelling. The longest: a
letter whose decomposition is two astral code points, escaped mark by mark, each a
surrogate pair of JSON escapes behind 64 backslashes (Kaithi VA, RHA and DDDHA:
4 x 69 = 276 bytes); a surrogate-pair escape alone is 138. Checked over every
character of Unicode by ``tests/test_scan_engine.py``."""


def _run(sep: Any, nxt: Any) -> Any:
    """An atomic run of at most :data:`MAX_SEPARATORS` separators that stops where
    ``nxt`` (the next character's spellings) starts:
    ``(?>(?:(?!nxt)sep){0,MAX_SEPARATORS})``. A separator can never swallow an encoded
    character of the secret, and no attempt reads past a bounded window (module doc,
    Complexity)."""
    if isinstance(sep, bytes):
        return b"(?>(?:(?!" + nxt + b")" + sep + b"){0,%d})" % MAX_SEPARATORS
    return "(?>(?:(?!" + nxt + ")" + sep + f"){{0,{MAX_SEPARATORS}}})"


def merge_copies(found: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """``(start, end, kind)`` copies in order, overlapping ones merged into one (``exact``
    only where an exact copy and its merged span coincide): what
    :meth:`SecretMatcher.spans` reports of the copies it found."""
    out: list[tuple[int, int, str]] = []
    for s, e, kind in sorted(found):
        if out and s < out[-1][1]:
            ps, pe, pk = out[-1]
            out[-1] = (ps, max(pe, e), "exact" if "exact" in (pk, kind) and (ps, pe) == (s, e) else pk)
        else:
            out.append((s, e, kind))
    return out


@dataclass(frozen=True)
class SecretMatcher:
    """Compiled patterns for one secret (module doc).

    Attributes:
        secret: the secret as given.
        skeleton: :func:`skeleton` of it.
        text_source / bytes_source: the two patterns' sources.
        text: pattern over ``str`` (compiled on first use).
        bytes: pattern over UTF-8 bytes (compiled on first use: a scan of bytes never
            pays for the text pattern, and the reverse; each takes tens of ms).
    """

    secret: str
    skeleton: str
    text_source: str = field(repr=False)
    bytes_source: bytes = field(repr=False)
    first_source: bytes = field(default=b"", repr=False)
    """The byte spellings of the first character, with which the byte pattern begins."""
    steps: tuple[tuple[str, frozenset[str]], ...] = field(default=(), repr=False)
    """Each skeleton character with the secret's own characters that fold to it, when
    the byte pattern is one unit per character (no character folds to several):
    :meth:`match_at` reads the pattern unit by unit. Empty otherwise."""

    @cached_property
    def text(self) -> re.Pattern[str]:
        return re.compile(self.text_source)

    @cached_property
    def bytes(self) -> re.Pattern[bytes]:
        return re.compile(self.bytes_source)

    @cached_property
    def starts(self) -> re.Pattern[bytes]:
        """An empty match at every offset where a spelling of the secret's first
        character begins: the only offsets where :attr:`bytes` can match, so a search for
        copies that *start* in a window need not read past it
        (:mod:`memkit.scan.engine`)."""
        return re.compile(b"(?=" + self.first_source + b")")

    def match_at(self, data: Any, pos: int, endpos: int) -> int | None:
        """Where :attr:`bytes` matches at ``pos`` in ``data[:endpos]`` (the end of
        ``self.bytes.match(data, pos, endpos)``, or ``None``), read unit by unit from
        per-character patterns shared by every secret (:func:`_unit`, and one pattern of
        the separators, :func:`_separator`) instead of compiling the secret's own
        pattern (tens of ms): the scan engine confirms a few candidates per secret, and
        each process would compile each secret it meets.

        The byte pattern is ``U1 R2 U2 ... Rm Um``: ``Uj`` an alternation of the
        spellings of character ``j`` (:func:`~memkit.scan.spellings.byte_alternatives`),
        ``Rj`` an atomic separator run that stops where ``Uj`` would match. A run is
        atomic, so the regex engine backtracks only into the units: the alternatives of
        each, in order, and within an entity whether it took its optional ``;``. This
        reads the same paths in the same order (depth first), and remembers which
        ``(unit, offset)`` fail, so it returns the regex engine's match. A run,
        ``(?>(?:(?!Uj)S){0,16})``, is read as the regex engine reads it: up to 16 times,
        stop where ``Uj`` matches, else take the separator ``S`` matches (its first
        alternative that does: what follows a separator inside the run always
        succeeds, so the engine never tries another), else stop. Secrets whose pattern
        is not one unit per character use the compiled pattern.
        """
        if not self.steps or len(self.steps) > 400:
            m = self.bytes.match(data, pos, endpos)
            return None if m is None else m.end()
        units = [_unit(c, own) for c, own in self.steps]
        separator = _separator()
        last = len(units) - 1
        failed: set[tuple[int, int]] = set()

        def run(j: int, p: int) -> int:
            for _ in range(MAX_SEPARATORS):
                if next(ends(j, p), None) is not None:
                    break
                m = separator.match(data, p, endpos)
                if m is None:
                    break
                p = m.end()
            return p

        def ends(j: int, p: int) -> Iterator[int]:
            if p >= endpos:
                return
            by_first, escs = units[j]
            for lit in by_first.get(data[p], ()):
                q = p + len(lit)
                if q <= endpos and data[p:q] == lit:
                    yield q
            for pattern, semicolon in escs:
                m = pattern.match(data, p, endpos)
                if m is not None:
                    q = m.end()
                    if semicolon and q < endpos and data[q] == 0x3B:
                        yield q + 1
                    yield q

        def read(j: int, p: int) -> int | None:
            if (j, p) in failed:
                return None
            for q in ends(j, p):
                if j == last:
                    return q
                done = read(j + 1, run(j + 1, q))
                if done is not None:
                    return done
            failed.add((j, p))
            return None

        return read(0, pos)

    @property
    def max_bytes(self) -> int:
        """An upper bound on the length of a copy, in UTF-8 bytes (and so in
        characters): every skeleton character spelled in at most
        :data:`MAX_SPELLING_BYTES`, at most :data:`MAX_SEPARATORS` separators of at
        most :data:`MAX_SEPARATOR_BYTES` between two of them; never less than the
        secret as given. A stream scanned in chunks that overlap by this many bytes
        misses no copy (:mod:`memkit.scan.engine`)."""
        return max_copy_bytes(self.secret)

    def search(self, text: str) -> bool:
        """Whether ``text`` holds a copy (the secret as given always counts)."""
        if self.secret in text or self.text.search(text) is not None:
            return True
        return multi_char_pattern().search(text) is not None and bool(self._folded_spans(text))

    def contains(self, value: Any) -> bool:
        """Whether ``value`` (a string, bytes, or nested dicts/lists of them) holds a
        copy; a string that is JSON is also searched decoded (:func:`contains_secret`).
        Hold the matcher to test many values against many secrets: :func:`matcher`'s
        cache keeps 256 secrets."""
        if isinstance(value, (bytes, bytearray, memoryview)):
            return self.bytes.search(bytes(value)) is not None
        for s in strings_of(value):
            if self.search(s):
                return True
            if s[:1] in "[{\"":
                try:
                    decoded = json.loads(s)
                except ValueError:
                    continue
                if any(self.search(x) for x in strings_of(decoded)):
                    return True
        return False

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """``(start, end, kind)`` of every copy in ``text``, in order and not
        overlapping; kind ``exact``/``normalized``."""
        found = [(m.start(), m.end(), "exact" if m.group(0) == self.secret else "normalized")
                 for m in self.text.finditer(text)]
        found += [(m.start(), m.end(), "exact") for m in re.finditer(re.escape(self.secret), text)]
        if multi_char_pattern().search(text) is not None:
            found += self._folded_spans(text)
        return merge_copies(found)

    def _folded_spans(self, text: str) -> list[tuple[int, int, str]]:
        """Copies written with characters that fold to several (``Straße`` for
        ``STRASSE``, ``ﬁ`` for ``fi``): search the text with those characters folded and
        map the spans back."""
        multi = spelling_tables()[3]
        chars: list[str] = []
        origin: list[int] = []
        for i, ch in enumerate(text):
            f = multi.get(ch, ch)
            chars.append(f)
            origin.extend([i] * len(f))
        folded = "".join(chars)
        return [(origin[m.start()], origin[m.end() - 1] + 1, "normalized")
                for m in self.text.finditer(folded)]

    def byte_spans(self, data: Any) -> list[tuple[int, int, str]]:
        """``(start, end, kind)`` of every copy in a bytes-like object (UTF-8)."""
        exact = self.secret.encode("utf-8")
        found = {(m.start(), m.end()): "exact" if m.group(0) == exact else "normalized"
                 for m in self.bytes.finditer(data)}
        if exact not in {bytes(data[s:e]) for s, e in found}:  # the secret as given, if the pattern missed it
            for m in re.finditer(re.escape(exact), data):
                found.setdefault((m.start(), m.end()), "exact")
        return [(s, e, k) for (s, e), k in sorted(found.items())]

    def redact(self, text: str, replacement: str = "[REDACTED]") -> str:
        """``text`` with every copy replaced by ``replacement``, repeated until none is
        left (removing one copy can join the pieces around it into another).

        Raises:
            ValueError: copies keep appearing (a replacement that rebuilds the secret).
        """
        for _ in range(100):
            spans = self.spans(text)
            if not spans:
                return text
            for s, e, _ in reversed(spans):
                text = text[:s] + replacement + text[e:]
        raise ValueError("redact: the text still holds the secret after 100 passes")


def max_copy_bytes(secret: str) -> int:
    """:attr:`SecretMatcher.max_bytes` without compiling the matcher: for a skeleton of
    ``n`` characters, ``n * MAX_SPELLING_BYTES + (n - 1) * MAX_SEPARATORS *
    MAX_SEPARATOR_BYTES`` bytes, and never less than the secret as given.

    Raises:
        TypeError / ValueError: as :func:`skeleton`.
    """
    n = len(skeleton(secret))
    bound = n * MAX_SPELLING_BYTES + (n - 1) * MAX_SEPARATORS * MAX_SEPARATOR_BYTES
    return max(bound, len(secret.encode("utf-8")))


def fewest_spellings(secret: str) -> int:
    """The fewest characters' spellings any copy of ``secret`` holds: one per stretch of
    its skeleton (:func:`_structure`), which is fewer than the skeleton's characters
    where one character folds to several (``ß`` or ``ẞ`` spells the ``ss`` of
    ``Straße``). :mod:`memkit.scan.windows` drops token windows with room for fewer.

    Raises:
        TypeError / ValueError: as :func:`skeleton`.
    """
    return len(_structure(secret)[1])


@cache
def _core(ch: str) -> str:
    """The letters and digits of one character's fold (``_structure``'s unit)."""
    return "".join(c for c in fold(ch) if c.isalnum())


@lru_cache(maxsize=1 << 18)
def _structure(secret: str) -> tuple[str, list[str], dict[str, frozenset[str]]]:
    """(skeleton; its stretches, one per character of the secret -- a character whose
    fold is several, ``ß`` -> ``ss``, may be written either way, so its stretch gets
    both spellings; the secret's own characters by the skeleton character they fold to).
    Cached for as many secrets as a fingerprint holds (an engine asks three times per
    secret).

    Raises:
        TypeError / ValueError: as :func:`skeleton`.
    """
    sk = skeleton(secret)
    groups = [g for g in map(_core, unicodedata.normalize("NFKC", secret)) if g]
    if "".join(groups) != sk:  # combining sequences fold differently one by one
        groups = list(sk)
    own: dict[str, frozenset[str]] = {}
    for ch in unicodedata.normalize("NFC", secret):
        core = _core(ch)
        if len(core) == 1:
            own[core] = own.get(core, frozenset()) | {ch}
    return sk, groups, own


@lru_cache(maxsize=256)
def matcher(secret: str) -> SecretMatcher:
    """The :class:`SecretMatcher` of ``secret`` (compiled once, cached).

    Raises:
        TypeError: not a string. ValueError: no letter or digit in the secret.
    """
    sk, groups, own = _structure(secret)
    multi = spelling_tables()[2]
    sep_t, sep_b = sep_text(), sep_bytes()
    # units: (text fragment, bytes fragment, text first-spellings, bytes first-spellings)
    units: list[tuple[str, bytes, str, bytes]] = []
    for span in groups:
        chars = [char_spellings(c, own.get(c, frozenset())) for c in span]
        t_frag, b_frag = chars[0]
        for ct, cb in chars[1:]:
            t_frag += _run(sep_t, ct) + ct
            b_frag += _run(sep_b, cb) + cb
        first_t, first_b = chars[0]
        if len(span) > 1 and span in multi:
            mt, mb = spellings(set(multi[span]))
            t_frag, b_frag = f"(?:{mt}|{t_frag})", b"(?:" + mb + b"|" + b_frag + b")"
            first_t, first_b = f"(?:{mt}|{first_t})", b"(?:" + mb + b"|" + first_b + b")"
        units.append((t_frag, b_frag, first_t, first_b))
    text_pat, byte_pat, head = units[0][0], units[0][1], units[0][3]
    for t_frag, b_frag, first_t, first_b in units[1:]:
        text_pat += _run(sep_t, first_t) + t_frag
        byte_pat += _run(sep_b, first_b) + b_frag
    return SecretMatcher(secret, sk, text_pat, byte_pat, head, unit_keys(secret))


def unit_keys(secret: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """:attr:`SecretMatcher.steps` of ``secret``: each skeleton character with the
    secret's own characters that fold to it, or ``()`` where a character folds to
    several (the byte pattern is then not one unit per character).

    Raises:
        TypeError / ValueError: as :func:`skeleton`.
    """
    sk, groups, own = _structure(secret)
    return tuple((c, own.get(c, frozenset())) for c in sk) if all(len(g) == 1 for g in groups) else ()


def prepare_units(keys: list[tuple[str, frozenset[str]]]) -> None:
    """Compile the per-character patterns of :meth:`SecretMatcher.match_at` for these
    :func:`unit_keys` now (a worker process about to confirm copies)."""
    _separator()
    for c, own in keys:
        _unit(c, own)


@lru_cache(maxsize=4096)
def _unit(c: str, own: frozenset[str]) -> tuple[dict[int, tuple[bytes, ...]], tuple[tuple[re.Pattern[bytes], bool], ...]]:
    """One unit of the byte pattern (:meth:`SecretMatcher.match_at`): the literal
    spellings of ``c`` by first byte (in their order: only those with the byte at hand
    can match), and each escape compiled alone, with whether it ends in an optional
    ``;`` (an entity), stripped and tried with and without it as the regex engine
    does (with it first)."""
    lits, escs = byte_alternatives(char_chars(c, own), own)
    by_first: dict[int, list[bytes]] = {}
    for lit in lits:
        by_first.setdefault(lit[0], []).append(lit)
    compiled = tuple((_compiled(e[:-2] if e.endswith(";?") else e), e.endswith(";?")) for e in escs)
    return {b: tuple(v) for b, v in by_first.items()}, compiled


@lru_cache(maxsize=1 << 14)
def _compiled(source: str) -> re.Pattern[bytes]:
    return re.compile(source.encode("ascii"))


@lru_cache(maxsize=1)
def _separator() -> re.Pattern[bytes]:
    """One separator of the byte pattern (:func:`~memkit.scan.spellings.sep_bytes`),
    compiled once: :meth:`SecretMatcher.match_at` reads each run with it."""
    return re.compile(sep_bytes())


WINDOW_TOKENS: tuple[bytes, ...] = (
    rb"<!--",              # HTML comments
    rb"\x1b\[",            # ANSI codes
    rb"\\{65}",            # a backslash run past the possessive bound of an escape
)
"""Byte regexes (RE2 and Hyperscan syntax) for the separators :func:`plain_match`
leaves out: with :func:`escaped_spellings` and :func:`spelling_points`, every
alternative of the byte pattern that the plain pattern lacks can only succeed where
one of these matches. Bytes with none are *plain*: there the byte pattern and the
plain pattern behave alike (:mod:`memkit.scan.engine`, windows)."""

TOKEN_MAX_BYTES = 512
"""An upper bound on how far before the end of a :data:`WINDOW_TOKENS`,
:func:`escaped_spellings` or :func:`spelling_points` match the alternative it stands
for starts (a surrogate-pair JSON escape behind 64 backslashes each: 138 bytes)."""


def _hs_escape(regex: str) -> str:
    """An :func:`encoded_forms` regex as a superset in RE2 and Hyperscan syntax: backslash
    runs and leading zeros unbounded instead of the bounded, possessive, look-behind
    form (unbounded repeats also compile faster in Hyperscan)."""
    return regex.replace(BACKSLASHES, r"\\+").replace(r"\\{1,64}+", r"\\+").replace("0{0,8}", "0*")


def escaped_spellings(secrets: Any) -> list[tuple[bytes, str]]:
    """``(regex, character)``: per skeleton character of ``secrets``, one alternation of
    every escaped spelling of it (:func:`encoded_forms`: JSON ``\\u``, HTML numeric entities,
    percent-encoding; decomposed letters escaped mark by mark) that :func:`matcher`'s
    byte patterns accept, as a superset in RE2 and Hyperscan syntax. With
    :data:`WINDOW_TOKENS` and :func:`spelling_points`, what :func:`plain_match`
    leaves out.

    Raises:
        TypeError / ValueError: as :func:`skeleton`.
    """
    variants, multi = variants_table(), spelling_tables()[2]
    keys: set[tuple[str, frozenset[str], bool]] = set()  # (character, its own spellings, a multi group)
    for secret in secrets:
        _, groups, own = _structure(secret)
        for span in groups:
            keys.update((c, own.get(c, frozenset()), False) for c in span)
            if len(span) > 1 and span in multi:
                keys.add((span, frozenset(), True))
    by_char: dict[str, dict[str, None]] = {}  # an escape may spell several characters (\u0131: ı and i)
    for c, own_c, is_multi in sorted(keys, key=lambda k: (k[0], sorted(k[1]), k[2])):
        chars = multi[c] if is_multi else frozenset(set(variants.get(c, {c})) | {c} | own_c)
        by_char.setdefault(c, {}).update(dict.fromkeys(_escaped_of(chars, own_c)))
    # one alternation per character: a handful of patterns compile in milliseconds
    return [(("(?:" + "|".join(rs) + ")").encode("ascii"), c) for c, rs in sorted(by_char.items())]


def _escaped_of(chars: frozenset[str], own: frozenset[str]) -> tuple[str, ...]:
    """:func:`escapes` in RE2 and Hyperscan syntax (:func:`_hs_escape`)."""
    return tuple(_hs_escape(e) for e in escapes(chars, own))


@lru_cache(maxsize=4096)
def _points_of(chars: frozenset[str]) -> frozenset[bytes]:
    out: set[bytes] = set()
    for ch in chars:
        for form in {ch} | decomposed(ch):
            first = next((x for x in form if ord(x) >= 0x80), None)
            if first is not None:
                out.add(first.encode("utf-8"))
    return frozenset(out)


def spelling_points(secrets: Any) -> dict[bytes, frozenset[str]]:
    """The UTF-8 encodings of the non-ASCII characters that start the non-ASCII part of
    a spelling of any of ``secrets``' characters (``Ｘ`` and ``𝐗`` for ``x``, the
    combining mark of ``e`` + U+0301 for ``é``, the ``и`` of ``и`` + U+0306 for ``й``,
    ``ß`` for a secret written with ``ß``): every non-ASCII literal alternative of
    :func:`matcher`'s byte patterns starts at one of these. With :data:`WINDOW_TOKENS`
    and :func:`escaped_spellings`, what :func:`plain_match` leaves out.

    Returns:
        each point (in byte order) with the skeleton characters whose spellings it can
        start.

    Raises:
        TypeError / ValueError: as :func:`skeleton`.
    """
    variants, multi = variants_table(), spelling_tables()[2]
    keys: set[tuple[str, frozenset[str]]] = set()
    spans: set[str] = set()
    for secret in secrets:
        _, groups, own = _structure(secret)
        for span in groups:
            keys.update((c, own.get(c, frozenset())) for c in span)
            if len(span) > 1 and span in multi:
                spans.add(span)
    out: dict[bytes, set[str]] = {}
    for c, own_c in keys:
        for pt in _points_of(frozenset(variants.get(c, {c}) | {c} | own_c)):
            out.setdefault(pt, set()).add(c)
    for span in spans:
        for pt in _points_of(multi[span]):
            out.setdefault(pt, set()).update(span)
    return {pt: frozenset(out[pt]) for pt in sorted(out)}


@lru_cache(maxsize=1 << 18)
def _plain_units(secret: str) -> tuple[frozenset[int], ...] | None:
    """Per skeleton character, the byte values of its ASCII spellings (``None`` when
    one has none)."""
    _, groups, own = _structure(secret)
    variants = variants_table()
    units = []
    for c in "".join(groups):
        chars = set(variants.get(c, {c})) | {c} | set(own.get(c, ()))
        ascii_ = frozenset(ord(ch) for ch in chars if ch.isascii())
        if not ascii_:
            return None
        units.append(ascii_)
    return tuple(units)


@lru_cache(maxsize=1)
def _plain_run() -> re.Pattern[bytes]:
    return re.compile(b"(?>" + sep_bytes_plain() + b"{0,%d})" % MAX_SEPARATORS)


def plain_match(secret: str, data: Any, pos: int, endpos: int) -> int | None:
    """Where :func:`matcher`'s byte pattern for ``secret``, less the alternatives that
    need a window token (:data:`WINDOW_TOKENS`, :func:`escaped_spellings`,
    :func:`spelling_points`), matches at ``pos`` in ``data[:endpos]``: the end of the
    match, or ``None``. That *plain pattern* spells each character in ASCII and keeps
    every separator but ANSI codes and comments (tags, entities, percent-encoding and
    escapes stay), with the same bounds, runs and order; no separator starts with a
    letter or digit, so its runs do not depend on the next character and one compiled
    run serves every secret (no per-secret compile). Where the bytes it reads hold no
    window token it behaves exactly as the byte pattern (every alternative it lacks
    fails there): :mod:`memkit.scan.engine` confirms plain candidates with it.
    ``None`` too when a character of the secret has no ASCII spelling.

    Raises:
        TypeError / ValueError: as :func:`skeleton`.
    """
    units = _plain_units(secret)
    if units is None:
        return None
    run = _plain_run()
    p = pos
    last = len(units) - 1
    for k, unit in enumerate(units):
        if p >= endpos or data[p] not in unit:
            return None
        p += 1
        if k < last:
            p = run.match(data, p, endpos).end()  # type: ignore[union-attr]  # {0,16} always matches
    return p


_PRE_SEP = (r"(?:[\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]|[\x80-\xff]|<!--[\s\S]*-->|</?[A-Za-z][^<>]*>"
            r"|&#?[A-Za-z0-9]+|%[0-9A-Fa-f]{2}|\\+(?:[uUx][0-9A-Fa-f]+|[ntrbfv0/'\"])"
            r"|\x1b\[[0-?]*[ -/]*[@-~])")
"""Prefilter separator: a superset of :func:`sep_bytes` and of the UTF-8 encoding of
:func:`sep_text`, without bounds or lookarounds (every ASCII byte that is not a
letter or digit -- control characters separate in text --, any non-ASCII byte, tags,
comments, entities, percent-encoding, escapes, ANSI codes)."""

def _pre_unit(chars: set[str], own: frozenset[str] = frozenset()) -> str:
    """Prefilter alternation for any of ``chars``, a superset of :func:`spellings`:
    the ASCII characters (and the ASCII bases of decomposed spellings), any UTF-8
    sequence whose lead byte one of the others has, and the same escapes
    :func:`spellings` accepts."""
    ascii_chars: set[str] = set()
    leads: set[int] = set()
    escs: set[str] = set()
    for ch in chars:
        for form in {ch} | decomposed(ch):
            b = form.encode("utf-8")
            if b[0] < 0x80:
                ascii_chars.add(form[0])
            else:
                leads.add(b[0])
                escs.add(encoded_forms(form[0])[0])
        if ord(ch) < 0x80:
            escs.update(encoded_forms(ch))
        elif ord(ch) < 0x2000 or 0xFF00 <= ord(ch) <= 0xFFEF or ch in own:
            escs.add(encoded_forms(ch)[0])
    alts = []
    if ascii_chars:
        alts.append("[" + "".join(f"\\x{ord(c):02x}" for c in sorted(ascii_chars)) + "]")
    if leads:
        alts.append("[" + "".join(f"\\x{b:02x}" for b in sorted(leads)) + "][\\x80-\\xbf]+")
    alts += sorted(_hs_escape(e) for e in escs)
    return "(?:" + "|".join(alts) + ")"


@lru_cache(maxsize=4096)
def prefilter_pattern(secret: str) -> str:
    """An RE2 pattern over Latin-1 bytes whose language contains every copy
    :func:`matcher`'s byte pattern (and :meth:`SecretMatcher.byte_spans`) accepts:
    each skeleton character by its ASCII spellings, any UTF-8 sequence with the lead
    byte of one of its other spellings, or one of its escapes; any number of
    :data:`_PRE_SEP` separators between. No lookaround, no bound, no backreference,
    so an automaton runs it in one linear pass; it may accept more than a copy, so a
    hit is confirmed by the matcher (:class:`memkit.scan.multi.MultiMatcher`, for
    text values).

    Raises:
        TypeError / ValueError: as :func:`skeleton`.
    """
    sk, groups, own = _structure(secret)
    multi = spelling_tables()[2]
    gap = _PRE_SEP + "*"
    units = []
    for span in groups:
        chars = [(set(variants_table().get(c, {c})) | {c} | set(own.get(c, ())), own.get(c, frozenset()))
                 for c in span]
        frag = gap.join(_pre_unit(cs, o) for cs, o in chars)
        if len(span) > 1 and span in multi:
            frag = f"(?:{_pre_unit(set(multi[span]))}|{frag})"
        units.append(frag)
    exact = "".join(f"\\x{b:02x}" for b in secret.encode("utf-8"))
    return f"(?:{gap.join(units)}|{exact})"


def secret_regex(secret: str) -> re.Pattern[str]:
    """The text pattern of :func:`matcher` (every spelling of ``secret``, module doc)."""
    return matcher(secret).text


def secret_bytes_regex(secret: str) -> re.Pattern[bytes]:
    """The UTF-8 bytes pattern of :func:`matcher`."""
    return matcher(secret).bytes


def scalar_text(value: Any) -> str | None:
    """The text a stored scalar shows a reader: a string itself, a number as written
    (a card or phone number stored as an int is still that number; floats by
    ``repr``); ``None`` for booleans, ``None`` and anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return repr(value) if isinstance(value, float) else str(value)


def strings_of(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings_of(k)
            yield from strings_of(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from strings_of(v)


def contains_secret(value: Any, secret: str) -> bool:
    """Whether ``value`` (a string, bytes, or nested dicts/lists of them) holds a copy of
    ``secret`` in any spelling of the module doc. A string that is JSON is also searched
    decoded, so a secret split by an escaped newline inside a JSON value is found.

    Raises:
        ValueError: the secret has no letter or digit.
    """
    return matcher(secret).contains(value)


def redact_text(text: str, secret: str, replacement: str = "[REDACTED]") -> str:
    """``text`` with every copy of ``secret`` replaced (module doc).

    Raises:
        ValueError: the replacement itself holds the secret, or no letter or digit.
    """
    m = matcher(secret)
    if m.search(replacement):
        raise ValueError("redact: the replacement contains the secret")
    return m.redact(text, replacement)


def redact_json(value: Any, secret: str, replacement: str = "[REDACTED]") -> Any:
    """A copy of a decoded JSON-like value (dicts, lists, tuples, strings, scalars) with
    every copy of ``secret`` in every string (keys included) replaced, and every number
    whose written form (:func:`scalar_text`) holds a copy (a PIN stored as
    ``{"pin": 44107731}``) replaced by ``replacement`` itself: the value keeps its
    shape (keys, nesting, list lengths), only that leaf changes type. A string that is
    itself a JSON document is decoded, redacted and re-serialised, so it still parses.

    Raises:
        ValueError: the replacement itself holds the secret, or no letter or digit.
    """
    m = matcher(secret)
    if m.search(replacement):
        raise ValueError("redact: the replacement contains the secret")

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            if v[:1] in "[{" and m.search(v):
                # A string that is itself a JSON document: redact its decoded values, so
                # a copy split by an escape goes and the document still parses.
                try:
                    return json.dumps(walk(json.loads(v)), ensure_ascii=False)
                except ValueError:
                    pass
            return m.redact(v, replacement)
        if isinstance(v, dict):
            return {walk(k) if isinstance(k, str) else k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, tuple):
            return tuple(walk(x) for x in v)
        number = scalar_text(v)
        if number is not None and m.search(number):
            return replacement
        return v

    return walk(value)
