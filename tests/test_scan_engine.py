"""The multi-secret scan engine (issue 22): linear time on adversarial families of every
encoding the matcher accepts, and a thousand-secret scan that finds exactly what a
thousand single-secret scans find. Copies are planted with the standard library
(json, urllib.parse, html-style entities written by hand, gzip-free plain bytes),
never with memkit."""

from __future__ import annotations

import io
import json
import random
import time
import urllib.parse

import pytest
import re2

from memkit.matching import matcher, max_copy_bytes, prefilter_pattern
from memkit.scan_engine import ScanEngine

SECRET = "XQ7-VIOLET-3829"
PHONE = "5551234567"

# (secret, repeated unit): near-misses of the secret's first characters in each encoding
# the matcher accepts, the shapes that took quadratic time before issue 22.
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
        if r > 5.0:  # a shared machine: a ratio above the bound is measured again, the better kept
            r = min(r, _ratio(mk, run, n))
        ratios[name] = r
    assert all(r <= 5.0 for r in ratios.values()), ratios
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
