"""memkit.scan.tokens: the compiled pass reports every window token Hyperscan reports
for the same patterns (a superset), on both of its paths, and the engine built on it
finds what the byte pattern finds."""

from __future__ import annotations

import random

import hyperscan
import pytest

import memkit.scan._tokens as _tokens
from memkit.scan.matching import WINDOW_TOKENS, escaped_spellings, matcher, spelling_points
from memkit.scan.tokens import TokenTable, alternatives

pytestmark = pytest.mark.timeout(120)

SECRETS = ["XQ7-VIOLET-3829", "Straße-ǅ-ﬁx-𝐗yz-İi-ǖ-9", "пароль-й-42", "sk-ÅÆØ-ŉ-½"]

PIECES = [b"\\", b"\\\\", b"\\u", b"00", b"58", b"&#", b"&#x", b"&#X", b"0", b"4", b"9", b";", b"%", b"3", b"<!--",
          b"\x1b[", b"a", b"X", b"Q", b"7", "Ｘ".encode(), "²".encode(), "é".encode(), "\u0307".encode(), b"\xc3", b"\xa9",
          b"\xef", b"\xbc", b"\xb8", b"\\" * 64, b"\\" * 70, b"D835", b"dc17", b"\\ud835\\udc17", "й".encode(),
          "и\u0306".encode(), b"i\\u0307", b"u\\u0308\\u0304", b"&#88;", b"&#088", b"%58", b"%5", b"&#x58", b"&#X0058;",
          b"\\u0058", b"\\U0058", b"&#0000049;", b"\\u00DF", b"\xf0\x9d\x90\x97", b"\xf0", "ß".encode(), b"<", b"!", b"["]


def _hyperscan(secrets: list[str]) -> tuple[TokenTable, hyperscan.Database]:
    """The pass's table and the Hyperscan database of the same patterns, kinds as ids."""
    esc = [r for r, _ in escaped_spellings(secrets)]
    pts = list(spelling_points(secrets))
    table = TokenTable(list(WINDOW_TOKENS), esc, pts)
    pats = list(WINDOW_TOKENS) + esc + [b"".join(b"\\x%02x" % c for c in p) for p in pts]
    db = hyperscan.Database()
    db.compile(expressions=pats, flags=[hyperscan.HS_FLAG_DOTALL] * len(pats))
    return table, db


def _samples(seed: int, n: int) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for k in range(n):
        if k % 3 == 0:
            out.append(rng.randbytes(rng.randrange(0, 400)))
        else:
            out.append(b"".join(rng.choice(PIECES) for _ in range(rng.randrange(0, 80))))
    return out


@pytest.fixture(params=[True, False], ids=["avx2", "portable"])
def path(request: pytest.FixtureRequest):
    """Each path of the pass (AVX2 where the CPU has it; the portable one)."""
    used = _tokens.set_avx2(request.param)
    if request.param and not used:
        pytest.skip("no AVX2 on this CPU")
    yield used
    _tokens.set_avx2(True)


def test_every_pattern_has_a_shape_the_pass_reads():
    table, _ = _hyperscan(SECRETS)
    assert table.leftovers == []


def test_the_events_hold_every_hyperscan_match_and_are_in_order(path):
    table, db = _hyperscan(SECRETS)
    extra = 0
    for data in _samples(7, 2500):
        found: set[tuple[int, int]] = set()
        db.scan(data, match_event_handler=lambda i, _a, b, _f, _c, found=found: found.add((b, i)))
        ends, kinds = table.events(data)
        mine = set(zip(ends.tolist(), kinds.tolist(), strict=True))
        assert found <= mine, (data, sorted(found - mine))
        assert ends.tolist() == sorted(ends.tolist())
        extra += len(mine - found)
    assert extra  # a superset where it says so: a decomposed spelling at each of its escapes


def test_both_paths_agree_on_long_buffers():
    table, _ = _hyperscan(SECRETS)
    rng = random.Random(3)
    data = b"".join(rng.choice(PIECES) + rng.randbytes(rng.randrange(0, 64)) for _ in range(20000))
    got = []
    for avx2 in (True, False):
        _tokens.set_avx2(avx2)
        got.append([a.tolist() for a in table.events(data)])
    _tokens.set_avx2(True)
    assert got[0] == got[1]


def test_a_pattern_of_no_known_shape_is_left_to_hyperscan():
    table = TokenTable([b"<!--", b"zz[0-9]"], [b"(?:\\\\+u0058|X\\\\+u0301y|%[cC]3%[aA]9)"], [b"\xc3\xa9", b"\xff"])
    assert table.leftovers == [(b"zz[0-9]", 1), (b"X\\\\+u0301y", 2), (b"%[cC]3%[aA]9", 2), (b"\\xff", 4)]
    ends, kinds = table.events(b"<!-- \\u0058 \xc3\xa9")
    assert list(zip(ends.tolist(), kinds.tolist(), strict=True)) == [(4, 0), (11, 2), (14, 3)]


def test_alternatives_split_at_the_top_level_only():
    assert alternatives(b"(?:a|b[|]|(?:c|d))") == ["a", "b[|]", "(?:c|d)"]
    assert alternatives(b"abc") == ["abc"]


@pytest.mark.parametrize("spelling", ["X\\u0051 7-violet-3829", "&#88;Q7 VIOLET 3829", "%58Q7-VIOLET-3829",
                                      "ＸＱ７-ＶＩＯＬＥＴ-３８２９", "X<!-- c -->Q7-VIOLET-3829", "X\x1b[1mQ7-VIOLET-3829"])
def test_the_engine_finds_spellings_that_read_a_token(spelling):
    from memkit.scan.engine import single_engine

    m = matcher("XQ7-VIOLET-3829")
    data = b"\x00 pad " * 50 + spelling.encode() + b" tail \xc3\xa9" * 50
    want = [(s, e) for s, e, *_ in m.byte_spans(data)]
    assert want
    got = [(s, e) for spans in single_engine(m.secret).scan_bytes(data).values() for s, e, _ in spans]
    assert got == want
