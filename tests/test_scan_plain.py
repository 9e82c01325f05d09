"""The plain letters of a buffer (memkit/scan/_letters.c, used by memkit/scan/plain.py): the C
pass parses every construct exactly as the matcher's own separator patterns
(``memkit.scan.spellings.SEP_PATTERNS_BYTES``, read here with Python's ``re``) parse it from its
first byte, and maps every letter back to its offset."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memkit.scan import _letters
from memkit.scan.spellings import SEP_PATTERNS_BYTES as _SEP_PATTERNS

# tags, entities, percent-encoding, escapes: the separators the plain letters skip (ANSI
# codes and comments are window tokens, searched elsewhere)
_CONSTRUCT = re.compile(b"(?:" + b"|".join(p.encode() for p in _SEP_PATTERNS[2:]) + b")")
_ALNUM = re.compile(rb"[A-Za-z0-9]")


def _parse(b: bytes, p: int, end: int) -> tuple[int, int] | None:
    """``(construct end or 0, where to resume)`` at ``p`` by the regex: a backslash run
    after a backslash (it starts before the chunk) or longer than 64 (a window token)
    starts none."""
    if b[p] == 0x5C:
        t = p
        while t < len(b) and b[t] == 0x5C:
            t += 1
        if (p > 0 and b[p - 1] == 0x5C) or t - p > 64:
            return 0, t
    m = _CONSTRUCT.match(b, p)
    if m and _ALNUM.search(m.group()):
        return m.end(), m.end()
    return 0, (m.end() if m and m.end() > p else p + 1)


def _reference(b: bytes, lo: int):
    letters, offsets, tops, nested = bytearray(), [], [], []
    p = lo
    while p < len(b):
        e, nxt = _parse(b, p, len(b))
        if e:
            tag = b[p] == 0x3C
            tops.append((p, e, len(letters), int(tag)))
            if tag:
                q = p + 1
                while q < e:
                    e2, n2 = _parse(b, q, e)
                    if e2:
                        nested.append((q, e2))
                    q = n2
            p = e
            continue
        for x in range(p, nxt):
            if _ALNUM.match(b, x):
                letters += bytes([b[x]]).lower()
                offsets.append(x)
        p = nxt
    return bytes(letters), offsets, tops, nested


_FRAGMENTS = ["\\", "u", "U", "x", "n", "0", "/", "'", '"', "%", "&", "#", ";", "<", ">", "a", "Z", "f", "E", "7",
              " ", "\t", "\n", "\x00", "\x1b", "\x7f", "=", "é", "\u2014", "x" * 40, "9" * 8]
_NAMES = ["nbsp", "amp", "lt", "gt", "quot", "apos", "shy", "ndash", "mdash", "thinsp", "ensp", "emsp",
          "nbspx", "am", "copy", "x" * 31, "x" * 32]
_TAILS = ["n", "t", "r", "b", "f", "v", "0", "/", "'", '"', "u00e9", "u00E", "UDEADBEEF", "U0000004", "x41", "x4",
          "q", ""]


@st.composite
def _construct(draw):
    """A construct or a near miss of one, whole: escapes behind runs around the 64 limit,
    entities around the name and digit limits, percent codes, tags."""
    kind = draw(st.sampled_from(["escape", "entity", "percent", "tag"]))
    if kind == "escape":
        return "\\" * draw(st.sampled_from([1, 2, 3, 63, 64, 65, 66])) + draw(st.sampled_from(_TAILS))
    if kind == "entity":
        body = draw(st.one_of(st.sampled_from(_NAMES), st.from_regex(r"#[0-9]{1,9}", fullmatch=True),
                              st.from_regex(r"#[xX][0-9a-fA-F]{0,8}", fullmatch=True)))
        return "&" + body + draw(st.sampled_from([";", "", "a", " "]))
    if kind == "percent":
        return "%" + draw(st.from_regex(r"[0-9a-fA-Fg]{0,3}", fullmatch=True))
    name = draw(st.sampled_from(["a", "/b", "/", "1", "span"]))
    inner = draw(st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.sampled_from(["&amp;", "\\n", "%41"])),
                          max_size=6))
    return "<" + name + " " + "".join(inner) + draw(st.sampled_from([">", "", "<"]))


@st.composite
def _buffers(draw):
    parts = draw(st.lists(st.one_of(st.sampled_from(_FRAGMENTS), _construct()), min_size=1, max_size=40))
    b = "".join(parts).encode("utf-8")
    if draw(st.booleans()):  # a tag body of about 500 characters: ASCII, 2 to 4 bytes each, or cut sequences
        k = draw(st.integers(495, 505))
        unit = draw(st.sampled_from([b"b", "é".encode(), "一".encode(), "𝐀".encode(), b"\xe4\xb8", b"\x80", b"\xf5"]))
        b = b"<a " + unit * k + b"&amp;>" + b
    return b, draw(st.integers(0, len(b))), draw(st.integers(1, 64))


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_buffers())
def test_plain_letters_parse_constructs_as_the_separator_patterns(case):
    b, lo, block = case
    letters, tops, nested, cps = _letters.project(b, lo, block)
    want_letters, want_offsets, want_tops, want_nested = _reference(b, lo)
    assert letters == want_letters
    assert _pairs(tops, 4) == want_tops
    assert _pairs(nested, 2) == want_nested
    cps = _pairs(cps, 2)
    for k, off in enumerate(want_offsets):  # every letter maps back from the last checkpoint before it
        start, before = [c for c in cps if c[1] <= k][-1]
        assert _letters.locate(b, start, k - before) == off


def _pairs(raw: bytes, width: int) -> list[tuple[int, ...]]:
    xs = [int.from_bytes(raw[i:i + 8], "little", signed=True) for i in range(0, len(raw), 8)]
    return [tuple(xs[i:i + width]) for i in range(0, len(xs), width)]


def test_plain_letters_errors():
    with pytest.raises(IndexError, match="no such plain letter"):
        _letters.locate(b"a-b-c", 0, 3)
    with pytest.raises(ValueError, match="lo outside the buffer"):
        _letters.project(b"abc", 4, 1)
    with pytest.raises(TypeError):
        _letters.project("abc", 0, 1)  # text, not bytes
