"""The automaton that names the secrets a window may hold (memkit/scan/_names.c, used by
memkit/scan/windows.py): it accepts exactly what each secret's pattern over the spelling
events accepts, searched alone. The patterns here are written from the definition in
:meth:`memkit.scan.windows.TokenWindows.events` (a unit: the plain or the special
event of a character; any specials between units), with Python's ``re``."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memkit.scan import _names
from memkit.scan.windows import TokenWindows

_SPECIALS = bytes(range(0x41, 0x5B)) + bytes(range(0x80, 0xFF))


def _special(c: int) -> int:
    """The special event of a plain one (``a`` -> ``A``, ``7`` -> ``0x87``)."""
    return c - 32 if 0x61 <= c <= 0x7A else 0x80 + c - 0x30


def _pattern(units: bytes) -> re.Pattern[bytes]:
    """A key's pattern, from the definition: each unit is its special event, or the
    plain event that stands for it; specials may come between units."""
    parts = []
    for u in units:
        plain = [c for c in b"abcdefghijklmnopqrstuvwxyz0123456789" if _special(c) == u]
        parts.append(b"[" + b"".join(b"\\x%02x" % c for c in [u, *plain]) + b"]")
    skip = b"[" + re.escape(_SPECIALS) + b"]*"
    return re.compile(skip.join(parts), re.DOTALL)


def _stretches(keys: list[bytes], events: bytes) -> list[tuple[int, int, int]]:
    trie = _names.build(keys, sorted(range(len(keys)), key=keys.__getitem__))
    return _names.find(trie, events)


def _named(keys: list[bytes], events: bytes) -> list[int]:
    return sorted({k for k, _, _ in _stretches(keys, events)})


_ALPHA = b"abx17" + bytes([_special(c) for c in b"abx17"]) + b"\x00QZ\x90\x91\x95 "


@st.composite
def _cases(draw: st.DrawFn) -> tuple[list[bytes], bytes]:
    """Keys over a small alphabet (so they share prefixes and meet in the events) and
    events mixing their plain and special events, other specials, codes of non-ASCII
    characters and breakers."""
    unit = st.sampled_from(list(b"AB" + bytes([0x81, 0x87]) + b"X\x90\x91"))
    any_unit = st.sampled_from(list(_SPECIALS))
    keys = draw(st.lists(st.lists(unit, min_size=1, max_size=5).map(bytes)
                         | st.lists(any_unit, min_size=1, max_size=3).map(bytes), min_size=1, max_size=12))
    events = draw(st.lists(st.sampled_from(list(_ALPHA)), max_size=60).map(bytes))
    return keys, events


@settings(max_examples=600, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_the_automaton_names_what_each_pattern_finds_alone(case):
    keys, events = case
    want = [i for i, k in enumerate(keys) if _pattern(k).search(events) is not None]
    assert _named(keys, events) == want
    stretches = _stretches(keys, events)
    for i, k in enumerate(keys):  # every reading, at every start, lies in a stretch of its key
        mine = [(a, b) for j, a, b in stretches if j == i]
        for start in range(len(events)):
            m = _pattern(k).match(events, start)
            if m is not None:
                assert any(a <= start and m.end() - 1 <= b for a, b in mine), (k, start, m.span(), mine)


def test_named_across_skipped_specials_and_never_across_a_plain_event_or_a_breaker():
    keys = [b"ABC", b"A\x81", b"\x90B"]
    assert _named(keys, b"aZbQQc") == [0]  # specials between: skipped
    assert _named(keys, b"aZbqc") == []  # a plain event between: not skipped
    assert _named(keys, b"ab\x00c") == []  # a breaker ends every reading
    assert _named(keys, b"AB\x43") == [0]  # each character spelled special
    assert _named(keys, b"a1") == [1]  # a digit's plain event
    assert _named(keys, b"\x90Yb") == [2]  # a non-ASCII character's code has no plain event
    assert _named(keys, b"AAbc") == [0]  # the special A skipped, or read: both live
    assert _named(keys, b"Aabc") == [0]  # a special read, then not: the plain a starts again


def test_duplicate_keys_and_keys_that_are_prefixes_of_others_are_all_named():
    keys = [b"AB", b"ABC", b"AB", b"A"]
    assert _named(keys, b"abc") == [0, 1, 2, 3]
    assert _named(keys, b"ab") == [0, 2, 3]


def test_stretches_say_where_readings_begin_and_end():
    assert _stretches([b"AB"], b"xxabxxxxab") == [(0, 2, 3), (0, 8, 9)]
    assert _stretches([b"AB"], b"abQQQab") == [(0, 0, 6)]  # read on through skipped specials
    assert _stretches([b"AB"], b"aQQb") == [(0, 0, 3)]


def test_bad_tries_and_keys_are_refused():
    with pytest.raises(ValueError, match="non-empty"):
        _names.build([b""], [0])
    with pytest.raises(ValueError, match="sort"):
        _names.build([b"B", b"A"], [0, 1])
    with pytest.raises(ValueError, match="not a trie"):
        _names.find(b"\x00" * 8, b"ab")


def test_the_windows_units_are_the_special_events_of_the_skeleton():
    tw = TokenWindows({0: "xq7", 1: "é1"}, [], {}, 64, 2)
    assert tw.units("xq7") == b"XQ\x87"
    assert tw.units("é1")[1:] == b"\x81" and tw.units("é1")[0] >= 0x90


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.lists(st.integers(0, 2**64 - 1), min_size=2, max_size=2), min_size=1, max_size=20),
       st.lists(st.lists(st.integers(0, 2**64 - 1), min_size=2, max_size=2), min_size=1, max_size=20),
       st.integers(0, 2**64 - 1))
def test_the_prefilter_says_which_windows_hold_every_character_of_some_secret(masks, windows, thin):
    import numpy as np

    s = np.array(masks, dtype=np.uint64)
    s[::2, 0] &= np.uint64(thin)  # some secrets of few characters, inside many windows
    w = np.array(windows, dtype=np.uint64)
    want = [bool(((s & ~row) == 0).all(axis=1).any()) for row in w]
    counts = np.unpackbits(s.view(np.uint8), axis=1).sum(axis=1).astype(np.int32)
    order = np.argsort(counts, kind="stable")
    got = _names.covered(s[order].tobytes(), counts[order].tobytes(), 2, w.tobytes())
    assert [bool(x) for x in got] == want


def _windows_reference(arr, ends, lo, limit, n_min, reach, near, unit_lut, break_lut):
    """TokenWindows.find as numpy read it before memkit/scan/_names.c did: a narrow look
    (16 bytes) then a wider one (``near``) for the breakers around each token, then the
    windows in order, the last breaker before a token read left to right once."""
    import numpy as np

    n = len(arr)
    q = np.unique(np.asarray(ends, dtype=np.int64)) - 1
    lb = np.full(len(q), -1, dtype=np.int64)
    keep = np.ones(len(q), dtype=bool)
    todo = np.arange(len(q))
    for g in (16, near):
        if not todo.size:
            break
        qt = q[todo]
        idx = qt[:, None] + np.arange(-g, g + 1)
        np.clip(idx, 0, n - 1, out=idx)
        sub = arr[idx]
        brk = break_lut[sub]
        left = brk[:, g - 1::-1]
        has_l = left.any(axis=1)
        col_l = np.where(has_l, g - np.argmax(left, axis=1), 0)
        right = brk[:, g + 1:]
        has_r = right.any(axis=1)
        col_r = np.where(has_r, g + 1 + np.argmax(right, axis=1), 2 * g + 1)
        cols = np.arange(2 * g + 1)
        inside = (cols >= col_l[:, None]) & (cols < col_r[:, None])
        units = np.count_nonzero(unit_lut[sub] & inside, axis=1)
        closed = has_l & has_r & (qt - g >= 0) & (qt + g < n)
        lb[todo[has_l & (qt - g >= 0)]] = (qt - g + col_l)[has_l & (qt - g >= 0)]
        keep[todo[closed & (units < n_min)]] = False
        todo = todo[~closed]
    if not keep.any():
        return []
    q, lb = q[keep], lb[keep]
    out, scanned, far_lb = [], -reach - 1, 0
    for qi, lbi in zip(q.tolist(), lb.tolist(), strict=True):
        if lbi < 0:
            lo_s = max(0, qi - reach) if qi - scanned > reach else scanned
            seg = np.flatnonzero(break_lut[arr[lo_s:qi]])
            if seg.size:
                far_lb = lo_s + int(seg[-1]) + 1
            elif qi - scanned > reach:
                far_lb = lo_s
            scanned = qi
            lbi = far_lb
        w0, w1 = max(lo, lbi, qi + 1 - reach), min(limit, qi + 1 + 4)
        if w0 >= w1:
            continue
        if out and w0 <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], w1))
        else:
            out.append((w0, w1))
    return out


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_token_windows_are_the_numpy_reading_of_them(data):
    """The windows of random tokens over bytes of breakers, spelling bytes and others, at
    every distance from the edges and from each other, as the numpy reading gave them."""
    import numpy as np

    from memkit.scan import windows as w

    n = data.draw(st.integers(1, 3000))
    alphabet = data.draw(st.sampled_from([b"\x00a", b"\x00\x01a-b ", b"ab- ", b"\x00" * 3 + b"xyz%&\\ \n"]))
    raw = bytes(data.draw(st.lists(st.sampled_from(list(alphabet)), min_size=n, max_size=n)))
    arr = np.frombuffer(raw, dtype=np.uint8)
    ends = data.draw(st.lists(st.integers(1, n), max_size=40))
    lo = data.draw(st.integers(0, n))
    limit = data.draw(st.integers(lo, n))
    n_min = data.draw(st.integers(0, 12))
    reach = data.draw(st.integers(1, 600))
    unit_lut = np.zeros(256, dtype=bool)
    unit_lut[list(b"ax%&\\")] = True
    want = _windows_reference(arr, ends, lo, limit, n_min, reach, w._NEAR, unit_lut, w._BREAK_LUT)
    got = _names.windows(arr, ends, lo, limit, n_min, reach, w._NEAR, unit_lut.tobytes(), w._BREAK_BYTES)
    flat = np.frombuffer(got, dtype=np.int64).tolist()
    assert list(zip(flat[0::2], flat[1::2], strict=True)) == want


def test_token_windows_at_every_offset_near_the_edges_and_breakers():
    """Each token alone, at every end offset of buffers with breakers every few bytes
    (closer and further than 16 and than _NEAR bytes), against the numpy reading."""
    import numpy as np

    from memkit.scan import windows as w

    unit_lut = np.zeros(256, dtype=bool)
    unit_lut[list(b"ax")] = True
    for gap in (3, 15, 16, 17, 40, 63, 64, 65, 90):
        n = 2 * gap + 100
        raw = bytes(0 if k % gap == gap - 1 else b"axy-"[k % 4] for k in range(n))
        arr = np.frombuffer(raw, dtype=np.uint8)
        for end in range(1, n + 1):
            for n_min, reach in ((0, 50), (3, 500), (40, 20)):
                want = _windows_reference(arr, [end], 0, n, n_min, reach, w._NEAR, unit_lut, w._BREAK_LUT)
                got = np.frombuffer(_names.windows(arr, [end], 0, n, n_min, reach, w._NEAR, unit_lut.tobytes(),
                                                   w._BREAK_BYTES), dtype=np.int64).tolist()
                assert list(zip(got[0::2], got[1::2], strict=True)) == want, (gap, end, n_min, reach)


def _events_reference(content: bytes, covers: list[tuple[int, int]], nonascii: bool,
                      extra: list[tuple[int, int]]) -> tuple[bytes, list[int]]:
    """The per-byte part of the spelling events as numpy read it (each ASCII letter or
    digit plain, special inside a cover or before a non-ASCII byte or a backslash;
    breakers 0x00), merged with the decoded events by a stable sort on offsets."""
    import numpy as np

    from memkit.scan import windows as w
    from memkit.scan.plain import ALNUM, LOWER_LUT

    arr = np.frombuffer(content, dtype=np.uint8)
    n = len(arr)
    alnum = ALNUM[arr]
    covered = np.zeros(n + 1, dtype=np.int32)
    for s, e in covers:
        covered[s] += 1
        covered[e] -= 1
    inside = np.cumsum(covered[:n]) > 0
    if nonascii:
        nxt = np.zeros(n, dtype=bool)
        nxt[:-1] = (arr[1:] >= 0x80) | (arr[1:] == 0x5C)
        inside |= nxt
    code = np.zeros(n, dtype=np.uint8)
    low = LOWER_LUT[arr]
    code[alnum] = low[alnum]
    spec = alnum & inside
    code[spec] = w._SPECIAL_CODE[low[spec]]
    code[w._BREAK_LUT[arr]] = 0
    pos = np.flatnonzero(alnum | w._BREAK_LUT[arr])
    codes = code[pos]
    xp = np.asarray([e[0] for e in extra], dtype=np.int64)
    xc = np.asarray([e[1] for e in extra], dtype=np.uint8)
    pos = np.concatenate([pos, xp])
    codes = np.concatenate([codes, xc])
    order = np.argsort(pos, kind="stable")
    return codes[order].tobytes(), pos[order].tolist()


def _events(content: bytes, covers: list[tuple[int, int]], nonascii: bool,
            extra: list[tuple[int, int]]) -> tuple[bytes, list[int]]:
    import numpy as np

    from memkit.scan import windows as w

    extra = sorted(extra, key=lambda e: e[0])  # stable: the caller's order at one offset
    codes, pos = _names.events(content, np.asarray(covers, dtype=np.int64).tobytes(), nonascii, w._BREAK_BYTES,
                               np.asarray([e[0] for e in extra], dtype=np.int64).tobytes(),
                               bytes(e[1] for e in extra))
    return codes, np.frombuffer(pos, dtype=np.int64).tolist()


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_spelling_events_are_the_numpy_reading_of_them(data):
    """Random bytes (letters and digits of both cases, breakers, backslashes, non-ASCII
    lead and continuation bytes, others), covers that nest, overlap and touch the edges,
    and decoded events at any offset (several at one, at the first and last byte), as
    the numpy reading gave them."""
    n = data.draw(st.integers(0, 400))
    alphabet = list(b"aZq09\x00\n\\%&<>- .") + [0xC3, 0xA9, 0xE2, 0x80, 0xFF]
    content = bytes(data.draw(st.lists(st.sampled_from(alphabet), min_size=n, max_size=n)))
    covers = data.draw(st.lists(st.tuples(st.integers(0, n), st.integers(0, n)).map(sorted).map(tuple),
                                max_size=12))
    extra = data.draw(st.lists(st.tuples(st.integers(0, max(n - 1, 0)), st.sampled_from([0x41, 0x5A, 0x80, 0x89, 0x90, 0xFE])),
                               max_size=20))
    nonascii = data.draw(st.booleans())
    assert _events(content, covers, nonascii, extra) == _events_reference(content, covers, nonascii, extra)


def test_spelling_events_of_a_window_read_its_constructs_and_decoded_characters():
    """A window's events end to end: letters inside an entity, a tag and an escape are
    special, plain text is plain, a breaker is 0x00, and an escape's decoded character is
    a special event at the escape's start, after the byte events there."""
    tw = TokenWindows({0: "AB"}, [], {}, 16, 2)
    codes, pos = tw.events(b"ab <b>x</b> \\u0041\x00q")
    got = list(zip(pos.tolist(), codes, strict=True))
    assert got[:2] == [(0, ord("a")), (1, ord("b"))]
    assert (4, ord("B")) in got and (6, ord("x")) in got and (9, ord("B")) in got  # the tags' letters, x plain
    esc = [p for p, c in got if 12 <= p < 18]
    assert esc[:1] == [12] and (12, ord("A")) in got  # \u0041 spells A, a special at the backslash
    assert (13, ord("U")) in got and (14, 0x80) in got  # the escape's own letters and digits are special
    assert (18, 0) in got and got[-1] == (19, ord("q"))
