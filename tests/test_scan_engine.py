"""The multi-secret scan engine: linear time on adversarial families of every
encoding the matcher accepts, and a thousand-secret scan that finds exactly what a
thousand single-secret scans find. Copies are planted with the standard library
(json, urllib.parse, html-style entities written by hand, gzip-free plain bytes),
never with memkit."""

from __future__ import annotations

import io
import json
import random
import time
import unicodedata
import urllib.parse

import pytest
import re2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memkit.scan.engine import ScanEngine
from memkit.scan.matching import matcher, max_copy_bytes, prefilter_pattern

SECRET = "XQ7-VIOLET-3829"
PHONE = "5551234567"

# (secret, repeated unit): near-misses of the secret's first characters in each encoding
# the matcher accepts, the shapes that took quadratic time before the engine.
FAMILIES = {
    "html_decimal_entities": (SECRET, "&#88;&#81;"),
    "html_hex_entities": (SECRET, "&#x58;&#x51;"),
    "json_u_escapes": (SECRET, "\\u0058\\u0051"),
    "json_in_json_escapes": (SECRET, "\\\\u0058\\\\u0051"),
    "percent_ascii": (SECRET, "%58%51"),
    "percent_cjk_phone": (PHONE, urllib.parse.quote("电话号码是555 ")),
    "fullwidth": (SECRET, "\uff38\uff31"),
    "mathematical_bold": (SECRET, "\U0001d417\U0001d410"),
    "combining_marks": (SECRET, "X\u0301Q\u0301"),
    "html_tags": (SECRET, "X<b>Q</b>"),
    "ansi_codes": (SECRET, "\x1b[1mX\x1b[0mQ"),
    "zero_width": (SECRET, "X\u200bQ\u200b"),
    "multi_fold": ("STRASSE-99", "stra\u00df"),
}


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t0)
    return best


_LINEAR_BOUND = 6.0
"""time(4n) / time(n) a linear scan stays under: 4 ideally, 16 for a quadratic one; a
loaded 2-core machine measured 5.3 once with the scan unchanged."""


def _ratio(make, run, n: int) -> float:
    """time(4n) / time(n): CPU time of this thread (other processes on a loaded machine
    do not count), the size doubled until the small run takes 20 ms (timer noise), each
    the best of interleaved runs."""
    run(make(n))  # warm (compiled automata, DFA cache)
    while _best(lambda n=n: run(make(n)), 1) < 0.02 and n < 1 << 20:
        n *= 2
    small, large = make(n), make(4 * n)
    t1 = t4 = float("inf")
    for _ in range(3):
        t1 = min(t1, _best(lambda: run(small), 2))
        t4 = min(t4, _best(lambda: run(large), 2))
    return t4 / t1


@pytest.mark.timeout(600)
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_adversarial_families_scale_linearly(family):
    secret, unit = FAMILIES[family]
    m = matcher(secret)
    engine = ScanEngine([secret])

    def make(n):
        return (unit * (n // len(unit) + 1))[:n]

    n = 6000
    runs = {"text": (make, m.search), "bytes": (lambda k: make(k).encode(), m.bytes.search),
            "engine": (lambda k: make(k).encode(), engine.scan_bytes)}
    ratios = {}
    for name, (mk, run) in runs.items():
        r = _ratio(mk, run, n)
        for _ in range(2):  # a shared machine: a ratio above the bound is measured again, the best kept
            if r > _LINEAR_BOUND:
                r = min(r, _ratio(mk, run, n))
        ratios[name] = r
    assert all(r <= _LINEAR_BOUND for r in ratios.values()), ratios
    assert not m.search(make(n)) and not engine.scan_bytes(make(n).encode())


# --------------------------------------------------------------------------- many secrets


def _secrets(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = ["VIOLET", "AMBER", "CEDAR", "DELTA", "EMBER", "FALCON", "GARNET", "HARBOR",
             "INDIGO", "JASPER", "KESTREL", "LUNAR", "MAPLE", "NECTAR", "ORCHID", "PEBBLE"]
    alnum = "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"
    out: set[str] = set()
    while len(out) < n:
        out.add("".join(rng.choice(alnum) for _ in range(3)) + "-" + rng.choice(words) + "-"
                + "".join(rng.choice("0123456789") for _ in range(4)))
    return sorted(out)


def _spell(secret: str, how: str) -> str:
    """A copy of ``secret`` in one encoding, written with the standard library."""
    if how == "verbatim":
        return secret
    if how == "spaced_lower":
        return " ".join(secret.lower().replace("-", ""))
    if how == "en_dash":
        return secret.replace("-", "\u2013")
    if how == "fullwidth":
        return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in secret)
    if how == "html_decimal":
        return "".join(f"&#{ord(c)};" for c in secret)
    if how == "percent":
        return urllib.parse.quote(secret, safe="")
    if how == "json_ascii":
        return json.dumps(secret.replace("-", "\u2013"))
    if how == "json_in_json":
        return json.dumps(json.dumps(secret.replace("-", "\n")))
    if how == "html_tags":
        return secret.replace("-", "</span><span>")
    if how == "zero_width":
        return "\u200b".join(secret)
    raise AssertionError(how)


HOWS = ["verbatim", "spaced_lower", "en_dash", "fullwidth", "html_decimal", "percent",
        "json_ascii", "json_in_json", "html_tags", "zero_width"]


def _fixture(secrets: list[str], planted: list[str], seed: int) -> bytes:
    rng = random.Random(seed)
    parts: list[bytes] = []
    filler = ("I walked the dog to the lake; \u5f88\u597d. {\"k\": 12, \"v\": \"caf\\u00e9\"} "
              "<p>table 2012</p> %20 &amp; \\n ").encode()
    for i, s in enumerate(planted):
        parts.append(filler * rng.randint(1, 4))
        parts.append(bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 100))))  # binary
        parts.append(_spell(s, HOWS[i % len(HOWS)]).encode("utf-8"))
    parts.append(filler * 2)
    return b"\n".join(parts)


@pytest.mark.timeout(600)
def test_thousand_secret_scan_equals_single_secret_scans():
    """A thousand-secret scan finds the same copies as single-secret scans (every
    planted secret, in every encoding the matcher covers, and a sample of the rest);
    about 20 s on two idle cores, most of it building the RE2 sets of 1,000 secrets."""
    secrets = _secrets(1000, seed=22)
    planted = secrets[:: 50]  # 20 secrets, each in one encoding
    blob = _fixture(secrets, planted, seed=7)
    engine = ScanEngine(secrets, chunk=1 << 20)
    many = engine.scan_stream(io.BytesIO(blob))
    found = {secrets[i]: spans for i, spans in many.items()}
    # every planted copy, nothing else
    assert set(found) == set(planted), sorted(set(found) ^ set(planted))
    # a single-secret scan per secret: its own prefilter alone (an RE2 search; no match
    # means no copy), then the matcher's byte pattern over the whole buffer
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.max_mem = 64 << 20
    # every planted secret and a seeded sample of 100 others (a thousand single scans
    # cost minutes and add nothing the sample does not: the others are absent by
    # construction, and the engine's own result above already covers all 1,000)
    others = random.Random(5).sample([s for s in secrets if s not in planted], 100)
    for s in planted + others:
        if re2.compile(prefilter_pattern(s).encode("latin-1"), options).search(blob) is None:
            assert s not in found, s
        else:
            assert matcher(s).byte_spans(blob) == found.get(s, []), s


def test_stream_chunks_overlap_by_the_longest_copy(tmp_path):
    """A copy straddling every chunk boundary is found once, at its offset."""
    copy = _spell(SECRET, "json_in_json").encode()
    engine = ScanEngine([SECRET], block=1000, chunk=4096)
    assert engine.overlap == max_copy_bytes(SECRET) >= len(copy)
    pad = b"z" * (engine.chunk + engine.overlap - len(copy) // 2)
    data = (pad + copy) * 3 + pad
    path = tmp_path / "blob.bin"
    path.write_bytes(data)  # planted by plain file I/O
    spans = engine.scan_file(path)[0]
    expected = [i * (len(pad) + len(copy)) + len(pad) + copy.index(b"X") for i in range(3)]
    assert [s for s, _, _ in spans] == expected
    assert matcher(SECRET).byte_spans(data) == spans


def test_engine_errors():
    with pytest.raises(ValueError, match="no secrets"):
        ScanEngine([])
    with pytest.raises(ValueError, match="no letters or digits"):
        ScanEngine(["--"])


# --------------------------------------------------------------------------- the engine is the matcher, faster

POOL = ["XQ7-VIOLET-3829", "José Ñúñez", "Straße-99", "李雷-88", "a&b%c", "ab", "Q", "5551234567",
        "n41", "bxq7", "nab", "ﬁle-42", "kkk", "Zoë-Ω7", "ệй-ά"]
"""Secrets of every kind the engine treats apart: ASCII canaries, non-ASCII skeleton
characters (every copy is a window), characters that fold to several, token bytes in
the secret itself, one- and two-character secrets, digits only, skeletons that are a
construct's letters (``\\n`` + ``ab``)."""

SEPARATORS = [" ", "-", "_", ".", "\u2013", "\u200b", "\\n", "\\\\n", "<b>", "</span>", "<!-- c -->",
              "\x1b[1m", "&amp;", "&nbsp;", "%20", "%E2%80%93", "\\u2013", "\\\"", "\\\\", "é", "电"]
JUNK = ["&#88;", "&#x51;", "%58", "%51", "\\u0058", "\\\\u0051", "\\n", "<b>", "&amp;", "\u200b", "Ｘ", "𝐐",
        "ß", "ﬁ", "e\u0301", "\x00", "\x7f", "\xff", "&", "%", "<", ">", ";", "#", "\n", "\\", "\x1b[", "%d9", "%C3", "ẞ"]


def _char(ch: str, how: int) -> str:
    """One character of a copy in one spelling (0: as written, 1: NFD; another character
    also its NFD in JSON ``\\u`` escapes, once or twice escaped; an ASCII letter or digit
    also lower, upper, HTML decimal and hex entity, percent-encoded, JSON ``\\u`` escape,
    fullwidth), written with the standard library's formatting."""
    if not (ch.isascii() and ch.isalnum()):  # as written, NFD, NFD in JSON escapes (once or twice)
        nfd = unicodedata.normalize("NFD", ch)
        return [ch, nfd, json.dumps(nfd)[1:-1], json.dumps(json.dumps(nfd)[1:-1])[1:-1]][how % 4]
    if how in (0, 1):
        return unicodedata.normalize("NFD", ch) if how == 1 else ch
    return [ch.lower(), ch.upper(), f"&#{ord(ch)};", f"&#x{ord(ch):x};", f"%{ord(ch):02X}",
            f"\\u{ord(ch):04x}", chr(ord(ch.upper()) + 0xFEE0)][how - 2]


@st.composite
def _blobs(draw):
    secrets = draw(st.lists(st.sampled_from(POOL), min_size=1, max_size=6, unique=True))
    if draw(st.booleans()):  # past REGEX_SECRETS: plain candidates from the literal search
        secrets += [f"F{j:02d}-{draw(st.sampled_from(['AMBER', 'CEDAR', 'DELTA']))}-{j:04d}" for j in range(20)]
    parts = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.integers(0, 3))
        if kind == 0:  # a copy: each character spelled, separators between
            s = draw(st.sampled_from(secrets))
            out = []
            for ch in s:
                out.append(_char(ch, draw(st.integers(0, 11)) % 9))
                if draw(st.integers(0, 3)) == 0:
                    out.append(draw(st.sampled_from(SEPARATORS)))
            parts.append("".join(out))
        elif kind == 1:
            parts.append("".join(draw(st.lists(st.sampled_from(JUNK), max_size=8))))
        elif kind == 2:
            parts.append(draw(st.text("abcxq7violet3829 né-", max_size=20)))
        else:
            parts.append(bytes(draw(st.lists(st.integers(0, 255), max_size=40))).decode("latin-1"))
    return secrets, "".join(parts).encode("utf-8", "surrogatepass"), draw(st.sampled_from([700, 4096, 1 << 20]))


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_blobs())
def test_property_engine_finds_what_each_matcher_finds(case):
    """On any mix of copies (every spelling and separator the matcher accepts, written
    with the standard library), encoded constructs, binary bytes and near misses, the
    engine reports for each secret exactly the spans of its own byte pattern
    (``byte_spans``), in one buffer and streamed in chunks smaller than a copy."""
    secrets, data, chunk = case
    engine = ScanEngine(secrets, chunk=chunk, block=max(64, chunk // 4))
    whole = engine.scan_bytes(data)
    streamed = engine.scan_stream(io.BytesIO(data))
    for i, s in enumerate(secrets):
        expected = matcher(s).byte_spans(data)
        assert whole.get(i, []) == expected, (s, data)
        assert streamed.get(i, []) == expected, (s, data)


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_blobs())
def test_property_unit_by_unit_reading_is_the_compiled_pattern(case):
    """``SecretMatcher.match_at`` (the byte pattern read unit by unit from per-character
    patterns, what the engine confirms with) ends where the secret's own compiled byte
    pattern's ``match`` ends, at every offset and with every end bound."""
    secrets, data, _ = case
    for s in secrets[:6]:
        m = matcher(s)
        for end in (len(data), max(0, len(data) - 7)):
            for pos in range(end + 1):
                r = m.bytes.match(data, pos, end)
                assert m.match_at(data, pos, end) == (None if r is None else r.end()), (s, data, pos, end)


def test_unit_keys_are_the_secrets_characters_with_their_own_spellings():
    """``match_at`` reads one unit per skeleton character (with the secret's own
    characters that fold to it); a secret with a character folding to several (``ß``)
    has no such reading and uses its compiled pattern, with the same result."""
    from memkit.scan.matching import prepare_units, unit_keys

    assert unit_keys("Xq-7") == (("x", frozenset("X")), ("q", frozenset("q")), ("7", frozenset("7")))
    assert unit_keys("Straße-99") == () and matcher("Straße-99").steps == ()
    prepare_units(list(unit_keys("Xq-7")))  # compiled ahead, as a worker does when it starts
    data = "xx STRASSE 99 and Stra\u00dfe-99 and X&#113;-7".encode()
    for s in ("Straße-99", "Xq-7"):
        m = matcher(s)
        for pos in range(len(data) + 1):
            r = m.bytes.match(data, pos)
            assert m.match_at(data, pos, len(data)) == (None if r is None else r.end())


def test_unit_by_unit_reading_takes_sixteen_separators_and_no_more():
    """A run of up to 16 separators (characters or constructs) between two characters is
    read whole, a 17th ends the copy: as the compiled pattern reads it."""
    m = matcher("Xq-7")
    units = [b" ", b"<b>", b"&amp;", b"%2D", b"\\n", b"\xe2\x80\x94", b"<!-- c -->"]
    for n in (15, 16, 17):
        for k in range(len(units)):
            data = b"X" + b"".join(units[(k + i) % len(units)] for i in range(n)) + b"q-7"
            r = m.bytes.match(data, 0)
            assert m.match_at(data, 0, len(data)) == (None if r is None else r.end()), (n, data)
            assert (r is not None) == (n <= 16)


def test_no_spelling_is_longer_than_the_bound():
    """MAX_SPELLING_BYTES bounds every character's spelling: over every letter or digit
    of Unicode that is its own skeleton, each character that spells it and each of its
    decompositions, written with the longest escapes the byte pattern reads (a code
    point in JSON's ``\\uXXXX`` behind 64 backslashes, a surrogate pair above the BMP)."""
    from memkit.scan.matching import MAX_SPELLING_BYTES
    from memkit.scan.spellings import char_chars, decomposed, skeleton

    def longest(form: str) -> int:
        return sum(1 if ord(x) < 0x80 else 2 * 69 if ord(x) > 0xFFFF else 69 for x in form)

    worst = 0
    for cp in range(0x80, 0x110000):
        ch = chr(cp)
        if 0xD800 <= cp <= 0xDFFF or not ch.isalnum():
            continue
        try:
            if skeleton(ch) != ch:
                continue
        except ValueError:
            continue
        for c in char_chars(ch):
            worst = max(worst, longest(c), *(longest(d) for d in decomposed(c)))
    assert 276 <= worst <= MAX_SPELLING_BYTES


def test_a_copy_as_long_as_the_longest_spelling_across_a_chunk_boundary():
    """KAITHI LETTER DDDHA decomposes into two astral code points: escaped mark by mark,
    one character's copy is 276 bytes; cut by a chunk boundary or a stream's carried
    overlap, it is still found."""
    secret = "\U0001109a"
    run = b"\\" * 64
    copy = run + b"ud804" + run + b"udc99" + run + b"ud804" + run + b"udcba"
    engine = ScanEngine([secret], chunk=700, block=175)
    for pad in (425, 600, 690):
        data = b"x" * pad + copy
        expected = matcher(secret).byte_spans(data)
        assert expected == [(pad, pad + len(copy), "normalized")]
        assert engine.scan_bytes(data).get(0, []) == expected
        assert engine.scan_stream(io.BytesIO(data)).get(0, []) == expected


@pytest.mark.parametrize("tokens", [False, True])
def test_few_secrets_heads_that_are_not_copies(tokens):
    """One or two secrets (the prefilter regex spells only a secret's first
    ``PREFIX_CHARS`` characters): text full of heads that do not go on to a copy, copies
    whose head spans tags, entities and escapes, spreads over hundreds of bytes or starts
    inside a tag's attribute, with and without window tokens (escapes that spell a
    character: without them every copy is found from its head), in one buffer and in
    chunks smaller than a copy."""
    from memkit.scan.engine import PREFIX_CHARS

    rng = random.Random(7)
    long_ = "QX4-HARBOR-77215"  # 14 skeleton characters: the regex spells 8
    assert len(long_.replace("-", "")) > PREFIX_CHARS
    wide = '<span class="a-long-attribute-value">'
    heads = ["qx4harbo", "QX4 HARBOR-7", "qx4-harbor-772", "qx4harbor7721x5"]
    copies = ["qx4harbor77215", "Q<i>X</i>4 H&amp;A R\\nBOR 7 7 2 1 5", '<a title="qx4-harbor',
              wide.join("QX4HARBOR77215")]
    if tokens:
        heads.append("q&#88;4<b>harbor</b>-77")
        copies.append("%51X4-harbor-77215")
    parts = []
    for _ in range(300):
        r = rng.random()
        parts.append(rng.choice(heads) if r < 0.2 else rng.choice(copies) if r < 0.25 else
                     rng.choice(["the river", "\n", "<br>", "&nbsp;", "-77215\">", "x", "morning " * 20]))
    parts[150] = wide.join("QX4HARBOR77215")
    data = " ".join(parts).encode()
    for secrets in ([long_], [long_, "5551234567"]):
        expected = {i: matcher(s).byte_spans(data) for i, s in enumerate(secrets)}
        assert any(e - s > 400 for s, e, _ in expected[0])  # the wide copies are there
        engine = ScanEngine(secrets, chunk=1 << 20)
        assert engine.regex
        for got in (engine.scan_bytes(data), ScanEngine(secrets, chunk=900).scan_stream(io.BytesIO(data))):
            assert {i: got.get(i, []) for i in range(len(secrets))} == expected


def test_few_secrets_heads_everywhere():
    """A secret's first characters at nearly every byte (a run of its first letter): the
    prefilter stops and every letter is read instead, finding the same copies, with and
    without window tokens, across chunks."""
    secret = "aaaaaaaaab"
    data = (b"a" * 20000 + b" a-a-a-a-a-a-a-a-a-b " + b"a" * 3000 + b"&#97;aaaaaaaa<b>b</b>" + b"a" * 5000
            + b"aaaaaaaaab")
    expected = matcher(secret).byte_spans(data)
    assert len(expected) == 3
    for chunk in (1 << 20, 4096):
        engine = ScanEngine([secret], chunk=chunk)
        assert engine.scan_bytes(data).get(0) == expected
        assert engine._raw_all is not None  # the scan read every letter
        assert ScanEngine([secret, "q1"], chunk=chunk).scan_stream(io.BytesIO(data)).get(0) == expected


def test_every_decomposable_letter_in_every_spelling():
    """Each letter of Latin-1, Latin Extended-A/B, Greek, Cyrillic and Latin Extended
    Additional that has a decomposition, as a secret (``letter + "7"``), written as is,
    NFD, NFKD, NFD in JSON escapes once and twice, upper case and upper case NFD (the
    standard library's unicodedata and json), between spaces, control bytes or letters:
    the engine finds what each secret's byte pattern finds, with 40, 2 and 1 secrets."""
    rng = random.Random(11)
    letters = [chr(c) for c in [*range(0xC0, 0x250), *range(0x386, 0x3D0), *range(0x400, 0x460),
                                *range(0x1E00, 0x1F00)]]
    letters = [c for c in letters if c.isalpha() and unicodedata.normalize("NFD", c) != c]
    assert len(letters) > 500
    for k in range(0, len(letters), 40):
        group = letters[k:k + 40]
        parts = []
        for c in group:
            nfd = unicodedata.normalize("NFD", c)
            for form in sorted({c, nfd, unicodedata.normalize("NFKD", c), json.dumps(nfd)[1:-1],
                                json.dumps(json.dumps(nfd)[1:-1])[1:-1], c.upper(),
                                unicodedata.normalize("NFD", c.upper())}):
                left, right = rng.choice([(" ", " "), ("\x00", "\x00"), ("x", "y"), ("\x00", " ")])
                parts.append(left + form + rng.choice(["", " ", "-"]) + "7" + right)
        data = "|".join(parts).encode("utf-8", "surrogatepass")
        secrets = [c + "7" for c in group]
        for chosen in (secrets, secrets[:2], secrets[:1]):
            found = ScanEngine(chosen, chunk=700).scan_stream(io.BytesIO(data))
            for i, s in enumerate(chosen):
                assert found.get(i, []) == matcher(s).byte_spans(data), s


def test_plain_pattern_is_the_byte_pattern_where_no_token_is():
    """Bytes with no window token (no comment, ANSI code, escaped spelling of a
    character of the secret, non-ASCII spelling point): the plain pattern and the byte
    pattern give the same copies, with tags, entities, percent-encoding and escapes as
    separators, separator runs at the bound and backslash runs."""
    import re

    from memkit.scan.matching import WINDOW_TOKENS, escaped_spellings, plain_match, spelling_points

    rng = random.Random(3)
    checked = 0
    seps = [" ", "-", "--", "\\\\", "\\\"", "\\n", "\\\\n", "\\u2013", "%20", "%E2%80%93", "&amp;", "&nbsp",
            "&#8203;", "&#x2013;", "<b>", "</span>", "<a href='x'>", "\u2013", "电", "&", "%", "<", "\\"]
    for secret in ["XQ7-VIOLET-3829", "5551234567", "ab", "nab"]:
        full = matcher(secret).bytes

        def plain(data, secret=secret):  # finditer of the plain pattern
            out, pos = [], 0
            while pos < len(data):
                end = plain_match(secret, data, pos, len(data))
                if end is None:
                    pos += 1
                else:
                    out.append((pos, end))
                    pos = end
            return out

        token = re.compile(b"|".join(WINDOW_TOKENS + tuple(r for r, _ in escaped_spellings([secret]))
                                     + tuple(re.escape(p) for p in spelling_points([secret]))))
        for _ in range(400):
            sep = lambda: rng.choice(seps + ["." * rng.choice([15, 16, 17])])  # noqa: E731
            text = "".join(c + (sep() if rng.random() < 0.7 else "") for c in secret)
            data = (rng.choice(["", "x", "\u00e9 ", "<i ", "\\"]) + text + rng.choice(["", "9", " \\\\"])).encode()
            if token.search(data):  # "&#97;" spells "a": a window token, where the patterns may differ
                continue
            checked += 1
            assert [m.span() for m in full.finditer(data)] == plain(data), data
    assert checked > 1000


def test_tags_and_comments_end_at_control_bytes():
    """No copy holds a breaker byte: a tag or comment with a NUL in it is no separator
    (text and bytes alike), so the engine may bound its windows at NULs."""
    assert matcher("XQ7").byte_spans(b"X<b>Q7") and not matcher("XQ7").byte_spans(b"X<b\x00>Q7")
    assert not matcher("XQ7").byte_spans(b"X<!-- \x01 -->Q7")
    assert not matcher("XQ7").search("X<b\x00>Q7") and matcher("XQ7").search("X<b>Q7")


def test_scan_files_in_worker_processes_equals_one_process(tmp_path):
    from memkit.scan.engine import scan_files

    rng = random.Random(11)
    paths = []
    for k in range(5):
        p = tmp_path / f"f{k}.bin"
        p.write_bytes(rng.randbytes(5000) + _spell(SECRET, HOWS[k]).encode() + rng.randbytes(3000))
        paths.append(p)
    (tmp_path / "empty").write_bytes(b"")
    paths.append(tmp_path / "empty")
    one = scan_files([SECRET, PHONE], paths, workers=1)
    two = scan_files([SECRET, PHONE], paths, workers=2)
    assert one == two and list(one) == [str(p) for p in paths]
    assert [one[str(p)][SECRET] for p in paths] == [1, 1, 1, 1, 1, 0]


def test_damaged_table_cache_is_rebuilt(tmp_path, monkeypatch):
    """The Unicode tables kept in the cache directory: a truncated file (a killed run)
    is rebuilt, not an error."""
    import subprocess
    import sys

    monkeypatch.setenv("MEMKIT_CACHE_DIR", str(tmp_path))
    code = "from memkit.scan.matching import matcher; print(bool(matcher('XQ7').search('x q 7')))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          check=True).stdout.strip() == "True"
    (cached,) = tmp_path.glob("matching-tables-*.pickle")
    cached.write_bytes(cached.read_bytes()[:100])
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          check=True).stdout.strip() == "True"
    assert len(cached.read_bytes()) > 1000


# Found by fresh adversarial helpers: a numeric entity read as a prefix of its digits
# ("&#820" holds "&#82", R), a surrogate-pair escape in lower case, an escape that
# spells characters of two secrets (\u0131 is ı, and a spelling of i); a percent run
# whose bytes are not UTF-8 (each % is then its own character: "%d9%75" holds the 9 of
# %d9, then u), and one character that spells two of the skeleton (ẞ or \u00df for the
# ss of ß) between control bytes; decomposed spellings whose mark is escaped behind two
# backslashes, whose base is not ASCII (и + U+0306 for й) or that hold two marks.
MISSED_BEFORE = [
    (["\u00e9"], b"e\\\\u0301"), (["\u1ec7"], b"e\xcc\xa3\xcc\x82"), (["\u1ec7"], b"e\\u0323\\u0302"),
    (["\u01d81"], b"u\\u0308\\u0301 1"), (["\u0439"], b"\xd0\xb8\xcc\x86"), (["\u0439"], b"\\u0438\\u0306"),
    (["\u03ac"], b"x \xce\xb1\xcc\x81 y"), (["\u03ac"] + [f"q{j}z" for j in range(20)], b"\xce\xb1\xcc\x81"),
    (["9u"], b"%d9%75"), (["0Cf"], b"%f0%43f"), (["c3a"], b"%c3%61"), (["e2x"], b"%e2%78"),
    (["c3a"] + [f"q{j}z{j * 7}" for j in range(20)], b"x %c3%61 y"), (["9u", "ab", "cd"], b"%d9%75"),
    (["\u00df"], b" " * 13 + b"\x00\xe1\xba\x9e" + b" " * 15 + b"\x00"),
    (["\u00df"], b" " * 10 + b"\x00\\u00df\x00" + b" " * 15),
    (["Stra\u00dfe"], b" " * 9 + b"\x00STRA\xe1\xba\x9eE\x00" + b" " * 14),
    (["\u00df", "ab", "cd"], b" " * 13 + b"\x00\xe1\xba\x9e" + b" " * 15 + b"\x00"),
    (["R"], b"&#820"), (["H"], b"&#1046"), (["M2"], b"&#X4d2"), (["ab"], b"&#x61b"), (["a1"], b"xx &#971 yy"),
    (["M2", "zq9x", "Wm4k", "p0p0"], b"&#772"), (["\U0001d400"], b"\\ud835\\uDC00"),
    (["X\U0001d400"], b"X\\ud835\\uDC00"), (["\u0131", "I"], b"x \\u0131 y"), (["\u0130", "\u0131"], b"\\u0131"),
    (["\u00fcdq\u0131", "\ufb01I\u0130N\u00e7G"], b"\xc3\xbc&#100%71\\u0131"),
]


@pytest.mark.parametrize(("secrets", "data"), MISSED_BEFORE)
def test_copies_an_adversarial_helper_found(secrets, data):
    for chunk, block in ((1 << 20, 1 << 20), (600, 64)):
        engine = ScanEngine(secrets, chunk=chunk, block=block)
        for found in (engine.scan_bytes(data), engine.scan_stream(io.BytesIO(data))):
            assert found.get(0)  # the first secret has a copy there
            for i, s in enumerate(secrets):
                assert found.get(i, []) == matcher(s).byte_spans(data), (s, data)
