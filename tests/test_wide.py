"""The wide readings (memkit/scan/encodings.py, memkit/scan/_wide.c) against plain readings.

* the C pass's skipping (each skip proof) finds exactly the runs a unit-by-unit reading
  of every unit finds, with every way of computing its masks;
* its UTF-8 is what Python's codecs decode (errors="replace");
* :func:`wide_spans` equals the numpy implementation memkit used before
  (``tests/wide_reference.py``) on random bytes with copies planted by Python's codecs
  at every alignment, odd offsets, BOMs, surrogates, non-ASCII secrets, characters
  that fold to several, tags; every planted copy is found where it was planted; no copy
  the previous rule (any ``<`` takes the 512 units after it) found is lost;
* :func:`memkit.scan.multi.may_hold` names every text the matcher finds a copy in.
"""

from __future__ import annotations

import random
import re
import unicodedata

import numpy as np
import pytest
import wide_reference as ref

from memkit.scan import _wide
from memkit.scan import encodings as enc
from memkit.scan.matching import matcher
from memkit.scan.multi import MultiMatcher, may_hold

SECRETS = ["XQ7-VIOLET-3829", "Zoë-Ørsted 4471", "STRASSE-9", "ﬁle-42-ok"]
SPELLINGS = ["XQ7-VIOLET-3829", "xq7 violet 3829", "ＸＱ７-violet-３８２９", "x\u0301q7violet3829",
             "Zoë-Ørsted 4471", "ZOE\u0308 ØRSTED 4471", "Straße-9", "STRASSE-9", "ﬁle 42 ok", "x<b>q</b>7violet3829"]
KINDS = ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"]


def sample(rng: random.Random, n: int) -> tuple[bytes, list[tuple[int, str, str]]]:
    """Random bytes with spellings planted by Python's codecs: ``(data, [(offset,
    codec, spelling)])`` (planted after random bytes of any length: every alignment)."""
    parts: list[bytes] = []
    planted = []
    size = 0
    while size < n:
        k = rng.random()
        if k < 0.3:
            parts.append(rng.randbytes(rng.randrange(1, 120)))
        elif k < 0.4:
            parts.append(bytes(rng.randrange(0, 3) for _ in range(rng.randrange(1, 30))))
        elif k < 0.75:
            spelling = rng.choice(SPELLINGS)
            codec = rng.choice(KINDS + ["utf-8"])
            bom = "\ufeff".encode(codec) if rng.random() < 0.2 else b""
            pre = rng.choice(["", "<", "x<b>", " ", "\U0001F600 ", "a\u00df ", "\ud800"]).encode(codec, "surrogatepass")
            parts.append(bom + pre + spelling.encode(codec))
            planted.append((size + len(bom) + len(pre), codec, spelling))
        else:
            parts.append(rng.choice([b"<\x00", b"<\x00b\x00", b"\x00\x00\x00<", b"\xff\xfe", b"\xd8\x00",
                                     b"\x00\xd8", b"\xdc\x00", b"the cat ", b"\x00<\x00/"]) * rng.randrange(1, 4))
        size += len(parts[-1])
    return b"".join(parts), planted


def tables(secrets: tuple[str, ...]) -> tuple[bytes, ...]:
    t16, t32, high, spell = enc._tables_for(secrets)
    return t16, t32, high, enc._folding()[0], spell


def runs(buf: bytes, secrets: tuple[str, ...], mode: int, lo: int = 0, hi: int | None = None,
         min_len: int | None = None, spellings: int = 0) -> tuple[list[tuple[int, ...]], bytes]:
    raw, text = _wide.runs(buf, lo, len(buf) if hi is None else hi, *tables(secrets), spellings,
                           min_len or enc._min_len(secrets), 512, mode)
    return sorted(map(tuple, np.frombuffer(raw, dtype=np.int64).reshape(-1, 7).tolist())), text


@pytest.mark.parametrize("seed", range(4))
def test_skipping_finds_the_runs_of_a_unit_by_unit_reading(seed):
    rng = random.Random(seed)
    secrets = tuple(SECRETS)
    for _ in range(150):
        buf, _ = sample(rng, rng.randrange(1, 700))
        lo = rng.randrange(0, min(5, len(buf)))
        hi = len(buf) - rng.randrange(0, min(5, len(buf) - lo))
        min_len = rng.choice([1, 2, 3, 5, 8, 20, 40])
        plain, _ = runs(buf, secrets, 2, lo, hi, min_len)
        assert plain == sorted(set(plain))
        for mode in (0, 1, 3):  # fastest masks, byte-by-byte masks, SSE2 masks
            got, _ = runs(buf, secrets, mode, lo, hi, min_len)
            assert [r[:3] for r in got] == [r[:3] for r in plain], (seed, mode, lo, hi, min_len)


def stretches(rng: random.Random, n: int) -> bytes:
    """Long stretches of the kinds the fast paths skip (prose without NUL, all NUL as in
    a database page's free space), broken by wide copies, '<' units and single NULs
    at every offset from a 64-byte word's edge."""
    parts: list[bytes] = []
    size = 0
    prose = "the cat sat on the mat, 12 33 - x a b c d e f; caf\u00e9 \u201cquoted\u201d <b>bold</b> "
    while size < n:
        k = rng.random()
        if k < 0.35:
            start = rng.randrange(len(prose))
            parts.append((prose[start:] + prose * rng.randrange(1, 12)).encode()[:rng.randrange(1, 900)])
        elif k < 0.6:
            parts.append(bytes(rng.randrange(1, 900)))
        elif k < 0.8:
            codec = rng.choice(KINDS)
            parts.append(rng.choice(SPELLINGS + ["<b>", "<", "1 2 3 4 5 6"]).encode(codec)[:rng.randrange(1, 80)])
        else:
            parts.append(rng.choice([b"\x00", b"<", b"<\x00", b"\x00<", b"\x00\x00\x00<", b"1 2 3 4 5 6 7 8 9 ",
                                     b"\xff\xfe", b"\x00\xd8"]))
        size += len(parts[-1])
    return b"".join(parts)


@pytest.mark.parametrize("seed", range(4))
def test_the_fast_stretches_find_the_runs_of_a_unit_by_unit_reading(seed):
    """Prose without NUL and all-NUL stretches (skipped 64 bytes at a time where no run can
    start in them) around copies, '<' units forcing runs, and lone NULs, at every offset:
    the same runs as reading every unit."""
    rng = random.Random(500 + seed)
    secrets = tuple(SECRETS)
    for _ in range(60):
        buf = stretches(rng, rng.randrange(200, 6000))
        lo = rng.randrange(0, 70)
        hi = len(buf) - rng.randrange(0, 70)
        if hi <= lo:
            continue
        min_len = rng.choice([1, 2, 3, 5, 8, 20, 40])
        plain, _ = runs(buf, secrets, 2, lo, hi, min_len)
        for mode in (0, 1, 3):
            got, _ = runs(buf, secrets, mode, lo, hi, min_len)
            assert [r[:3] for r in got] == [r[:3] for r in plain], (seed, mode, lo, hi, min_len)


@pytest.mark.parametrize("seed", range(3))
def test_runs_are_what_the_numpy_reading_finds(seed):
    """Every run of at least min_len units of every reading (numpy, no skipping)."""
    rng = random.Random(100 + seed)
    secrets = tuple(SECRETS)
    for _ in range(60):
        buf, _ = sample(rng, rng.randrange(1, 500))
        min_len = rng.choice([1, 3, 5])
        got = [r[:3] for r in runs(buf, secrets, 0, min_len=min_len)[0]]
        assert got == ref.runs(buf, secrets, min_len), seed


@pytest.mark.parametrize("seed", range(3))
def test_utf8_of_each_run_is_what_python_decodes(seed):
    rng = random.Random(200 + seed)
    secrets = tuple(SECRETS)
    for _ in range(80):
        buf, _ = sample(rng, rng.randrange(1, 600))
        found, text = runs(buf, secrets, 0, min_len=1)
        for kind, start, end, u0, _c0, chars, folds in found:
            decoded = buf[start:end].decode(KINDS[kind], errors="replace")
            assert text[u0:u0 + len(decoded.encode())] == decoded.encode()
            assert text[u0 + len(decoded.encode())] == 0
            assert chars == len(decoded)
            assert bool(folds) == any(ch in enc._folding()[1] or ord(ch) in enc._folding()[1] for ch in decoded)


def test_surrogates_and_invalid_units_decode_as_python_does():
    secrets = tuple(SECRETS)
    cases = [b"\x00\xd8\x41\x00", b"\x00\xdc\x41\x00", b"\x3d\xd8\x00\xde\x41\x00", b"\x41\x00\x00\xd8",
             b"\x00\xd8\x00\xd8\x00\xdc", b"\x41\x00\x00\x00\x00\xd8\x00\x00\xff\xff\xff\xff\x42\x00\x00\x00"]
    for buf in cases:
        found, text = runs(buf, secrets, 2, min_len=1)
        for kind, start, end, u0, *_ in found:
            decoded = buf[start:end].decode(KINDS[kind], errors="replace").encode()
            assert text[u0:u0 + len(decoded)] == decoded


def _spans(found: list[enc.WideSpan]) -> list[tuple]:
    return [(w.start, w.end, w.kind, w.encoding, w.text, w.text_start, w.text_end, w.secret_index) for w in found]


@pytest.mark.parametrize("seed", range(6))
def test_wide_spans_equal_the_plain_reading_and_find_every_planted_copy(seed):
    rng = random.Random(300 + seed)
    single, many = matcher(SECRETS[0]), MultiMatcher(SECRETS)
    for _ in range(40):
        buf, planted = sample(rng, rng.randrange(1, 900))
        for m in (single, many):
            got = enc.wide_spans(buf, m)
            assert _spans(got) == _spans(ref.wide_spans(buf, m)), seed
            # no copy the previous rule found (any '<' forcing a run) is lost
            for w in ref.wide_spans(buf, m, forced_by_any_lt=True):
                assert any(x.secret_index == w.secret_index and x.start < w.end and w.start < x.end for x in got)
        # every copy planted in a wide encoding is found where it was planted
        found = enc.wide_spans(buf, many)
        for at, codec, spelling in planted:
            if codec in KINDS:
                stop = at + len(spelling.encode(codec))
                assert any(w.start < stop and at < w.end for w in found), (seed, at, codec, spelling)


def test_copies_across_windows(monkeypatch):
    """A buffer read in several windows: every copy found once, where it was planted."""
    monkeypatch.setattr(enc, "_WINDOW_BYTES", 4096)
    rng = random.Random(7)
    m = MultiMatcher(SECRETS)
    parts, where = [], []
    size = 0
    for k in range(60):
        parts.append(rng.randbytes(rng.randrange(1, 400)))
        size += len(parts[-1])
        codec = KINDS[k % 4]
        raw = SECRETS[k % 3].encode(codec)
        where.append((size, codec))
        parts.append(raw)
        size += len(raw)
    buf = b"".join(parts)
    got = enc.wide_spans(buf, m)
    assert [(w.start, w.encoding) for w in got if w.start in {a for a, _ in where}] == where


def test_a_run_with_room_for_too_few_spellings_is_skipped():
    """Units of the alphabet that spell no character of a secret (symbols, marks) make
    long runs in binary data; with fewer spelling characters than any copy holds they
    are not matched, and a run holding a copy is."""
    secrets = (SECRETS[0],)
    junk = "".join(chr(c) for c in range(0x2190, 0x21C0)).encode("utf-16-le")
    need = enc._spellings_needed(secrets)
    assert runs(junk, secrets, 0, spellings=need)[0] == []
    assert runs(junk, secrets, 0, spellings=0)[0]
    copy = ("\u2190" + SECRETS[0]).encode("utf-16-le")
    assert runs(copy, secrets, 0, spellings=need)[0]


def test_text_without_nul_has_no_utf32_runs_and_ascii_letters_no_utf16_runs():
    secrets = tuple(SECRETS)
    prose = b"the cat sat on the mat " * 400
    assert [r for r in runs(prose, secrets, 0, min_len=1)[0] if r[0] >= 2] == []
    letters = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" * 40
    assert runs(letters, secrets, 0, min_len=1)[0] == []


def _old_base_table() -> np.ndarray:
    """The alphabet's base as memkit first built it: the separator regex over every code point."""
    from memkit.scan.matching import spelling_tables

    sep = re.compile("[" + spelling_tables()[1] + "]")
    table = np.zeros(0x110001, dtype=bool)
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    table[[ord(ch) for ch in sep.findall(every)]] = True
    table[:0x80] = True
    for c in list(range(0x20)) + list(range(0x7F, 0xA0)):
        table[c] = chr(c).isspace() or c == 0x1B
    return table


def test_alphabet_is_the_one_built_char_by_char():
    from memkit.scan.matching import skeleton, spelling_tables

    base = _old_base_table()
    assert (enc._base_table() == base).all()
    variants, _, _, multi_rev = spelling_tables()
    for secrets in [("XQ7-VIOLET-3829",), ("Straße-77",), ("ab", "Zoë-Ørsted 4471", "1234")]:
        chars: set[str] = set()
        for secret in secrets:
            sk = set(skeleton(secret))
            mine = set(secret) | sk
            for c in sk:
                mine |= set(variants.get(c, ()))
            mine |= {ch for ch, fold in multi_rev.items() if sk & set(fold)}
            for ch in list(mine):
                for form in ("NFD", "NFKD"):
                    for x in (ch, ch.upper(), ch.lower()):
                        mine.add(unicodedata.normalize(form, x)[:1] or x)
            chars |= mine
        want = base.copy()
        want[[ord(c) for c in chars]] = True
        want[0x110000] = False
        assert (enc.alphabet_of(secrets) == want).all(), secrets


@pytest.mark.parametrize("seed", range(3))
def test_may_hold_names_every_text_with_a_copy(seed):
    rng = random.Random(400 + seed)
    pieces = SPELLINGS + ["\x00", "\x01", "\x1c", "\x1b[31m", "\u0301", "&#88;", "%58", "\\u0058", " ", "-", "ß",
                          "ﬁ", "é", "\ud800", "nothing", "42", "ok"]
    single, many = matcher(SECRETS[2]), MultiMatcher(SECRETS)
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randrange(0, 8))) for _ in range(400)]
    for m in (single, many):
        flags = may_hold(m, texts)
        for text, flag in zip(texts, flags, strict=True):
            if m.spans(text):
                assert flag, (text, m)
    assert sum(may_hold(many, texts)) < len(texts)
