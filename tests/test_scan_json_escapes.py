"""memkit.scan.json_escapes: a JSON text proven to decode to nothing more than its raw
text holds does so, held to the decoding itself (:func:`scan_value`, which decodes
every JSON text down to four levels)."""

from __future__ import annotations

import bisect
import json
import random

import pytest

from memkit.residue.report import ResidueReport
from memkit.residue.values import scan_value
from memkit.scan.json_escapes import decoding_adds_nothing, harmless
from memkit.scan.multi import MultiMatcher

SECRETS = ["XQ7-VIOLET-3829", "STRASSE-41", "100000.0"]
M = MultiMatcher(SECRETS)


def _decoded_hits(text: str) -> int:
    report = ResidueReport(target="t")
    scan_value(report, "disk_sqlite", "row", text, M)
    return report.total


# each: a JSON text whose raw reading holds no copy and whose decoding holds one
HIDDEN = [
    '{"a": "XQ7-\\ud835\\udc15IOLET-3829"}',                           # a mathematical V, escaped
    '{"a": "XQ7\\u003cb\\u003eVIOLET-3829"}',                           # a tag only decoding shows
    '{"a": "XQ7<b ' + "\\u00e9" * 90 + '>VIOLET-3829"}',                # a tag 92 characters long, 542 raw
    '{"a": "XQ7<!-- ' + "\\u00e9" * 90 + ' -->VIOLET-3829"}',           # the same as a comment
    '{"a": "STRA\\u00dfE-41"}',                                         # a character that folds to two
    '{"a": "STRA\\u00DFE-41"}',
    '[1e5]',                                                            # read as 100000.0
    '{"n": 1.00000e5}',
    '"[\\n1e5]"',                                                     # JSON in a string: the number
    '{"a": "{\\"k\\":\\t1E5}"}',                                  # after escaped whitespace
    '["[\\r\\n10e4]"]',
]


@pytest.mark.parametrize("text", HIDDEN)
def test_a_copy_only_decoding_shows_is_never_proven_absent(text):
    assert not decoding_adds_nothing([text])[0]
    assert not M.spans(text) and _decoded_hits(text) > 0  # the example is one


def test_an_escaped_combining_mark_is_read_raw_too():
    text = '{"a": "XQ7-VIOL\\u0301ET-3829"}'
    assert decoding_adds_nothing([text])[0] and M.spans(text)


def test_harmless_escapes():
    assert harmless("\\n") and harmless('\\"') and harmless("\\/")
    assert harmless("\\u00e9") and harmless("\\u2014") and harmless("\\uff21")  # é, an em dash, a fullwidth A
    assert not harmless("\\\\")
    assert not harmless("\\u0041")   # ASCII: an entity ends differently before it
    assert not harmless("\\u003c")
    assert not harmless("\\u00df")   # ß folds to ss
    assert not harmless("\\u24b6")   # a circled A, not spelled escaped by the patterns
    assert not harmless("\\ud835")   # a surrogate
    assert not harmless("\\u00g9")


_PIECES = [
    "XQ7", "VIOLET", "3829", "-", " ", "violet", "xq7", "\uff36", "\u00e9", "\u0301", "\U0001d415", "\u24cb",
    "<b>", "<b ", ">", "<!-- c -->", "&amp", "&#86;", "%56", "\n", "\t", '"', "/", "\\", "\u2014", "\u201c",
    "STRA", "\u00df", "SSE", "41", "E", "caf\u00e9", "word", "100000", ".0", "\u0430", "\x1b[1m", "\x07",
]


def _string(rng: random.Random) -> str:
    return "".join(rng.choice(_PIECES) for _ in range(rng.randrange(1, 12)))


def _literal(rng: random.Random, s: str, p: float) -> str:
    """``s`` as a JSON string literal, each character written as an escape with
    probability ``p`` (those JSON requires escaped always)."""
    out = ['"']
    for ch in s:
        cp = ord(ch)
        if ch in '"\\' or cp < 0x20 or rng.random() < p:
            if ch in '"\\/' and rng.random() < 0.5:
                out.append("\\" + ch)
            elif ch in "\n\t" and rng.random() < 0.5:
                out.append({"\n": "\\n", "\t": "\\t"}[ch])
            elif cp > 0xFFFF:
                v = cp - 0x10000
                out.append(f"\\u{0xD800 + (v >> 10):04x}\\u{0xDC00 + (v & 0x3FF):04X}")
            else:
                out.append(f"\\u{cp:04x}" if rng.random() < 0.5 else f"\\u{cp:04X}")
        else:
            out.append(ch)
    return "".join(out) + '"'


def _value(rng: random.Random, depth: int, p: float) -> str:
    kind = rng.randrange(7 if depth < 2 else 4)
    if kind == 0:
        return str(rng.choice([7, 100000, -0, 3829]))
    if kind == 1:
        return rng.choice(["1e5", "100000.0", "3.5", "true", "null"])
    if kind in (2, 3):
        return _literal(rng, _string(rng), p)
    if kind == 4:
        return "[" + rng.choice(["", "\n"]) + rng.choice([", ", ",\n", ",\t"]).join(
            _value(rng, depth + 1, p) for _ in range(rng.randrange(1, 4))) + "]"  # whitespace JSON allows
    if kind == 5:
        return "{" + ", ".join(f"{_literal(rng, _string(rng), p)}: {_value(rng, depth + 1, p)}"
                               for _ in range(rng.randrange(1, 4))) + "}"
    return _literal(rng, _value(rng, depth + 1, p), p)  # JSON inside a string


def test_a_proven_text_decodes_to_no_copy_its_raw_text_lacks():
    """3,000 generated JSON texts, escaped at random (ASCII, surrogates, tags, folds,
    numbers, JSON in JSON): where the text is proven and its raw reading finds nothing,
    the decoding finds nothing either. The generator does hide copies from the raw
    reading (counted), and proves many texts."""
    rng = random.Random(38)
    texts = [_value(rng, 0, rng.choice([0.0, 0.1, 0.5, 1.0])) for _ in range(3000)]
    proven = decoding_adds_nothing(texts)
    assert proven == [decoding_adds_nothing([t])[0] for t in texts]  # a batch answers as each alone
    hidden = 0
    for text, ok in zip(texts, proven, strict=True):
        if M.spans(text):
            continue
        hits = _decoded_hits(text)
        hidden += hits > 0
        assert not (ok and hits), text
    assert hidden >= 50
    assert sum(proven) >= 500


def test_non_ascii_texts_are_not_proven():
    assert decoding_adds_nothing(['{"a": "caf\u00e9"}', '{"a": "cafe"}']) == [False, True]


def test_a_float_in_a_string_or_a_digit_of_an_escape_is_no_number():
    assert decoding_adds_nothing(['{"a": "\\u00e9 v2 x1e"}', '{"a": 2.5}', '["x", -1E3]']) == [True, False, False]


def test_json_as_its_own_file_is_decoded_unless_proven(tmp_path):
    """The file reading uses the same proof: a JSON file whose copy only decoding shows is
    reported; one proven is marked decoded without a copy."""
    from memkit.residue.chroma import scan as residue_scan

    hidden = tmp_path / "hidden.json"
    hidden.write_text(HIDDEN[0])
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"a": "caf\u00e9 \u2014 nothing here"}))
    report = residue_scan(None, secrets=SECRETS, also=[hidden, plain])
    found = [h.location for hits in report.surfaces.values() for h in hits]
    assert any("hidden.json" in loc for loc in found)
    assert not any("plain.json" in loc for loc in found)
    cov = {c.path: c for c in report.coverage}
    assert "json" in next(c for p, c in cov.items() if p.endswith("plain.json")).decoders


@pytest.mark.parametrize("seed", range(4))
def test_the_joined_proof_is_the_proof_of_each(seed):
    """:func:`decoding_adds_nothing_joined` of texts joined by NUL is whether
    :func:`decoding_adds_nothing` proves every one of them."""
    from memkit.scan.json_escapes import decoding_adds_nothing_joined

    parts = ["{", "}", '"a": ', '"', "\\n", "\\u00e9", "\\u0041", "\\ud835\\udc15", "\\\\", "1e5", " 12", "<b>",
             "<!--", "NaN", "x", "\u00e9", "XQ7-VIOLET-3829", ",", "[", "]"]
    rng = random.Random(seed)
    for _ in range(400):
        texts = ["".join(rng.choice(parts) for _ in range(rng.randrange(0, 9))) for _ in range(rng.randrange(0, 5))]
        joined = "\0".join(texts).encode("utf-8")
        assert decoding_adds_nothing_joined(joined) == all(decoding_adds_nothing(texts)), texts


_RULE_PIECES = [
    "\\", "\\\\", "\\n", "\\t", "\\r", "\\u", "\\U", "\\u00", "\\u00e9", "\\u00E9", "\\u00df", "\\U00DF", "\\u00Df",
    "\\u0041", "\\u007f", "\\u0080", "\\u2014", "\\u206f", "\\u2070", "\\u24b6", "\\ud835", "\\udc00", "\\uff21",
    "\\uffef", "\\ufff0", "\\u12", "\\u123", "\\u123g", "\\x41", "<", ">", "<b", "<b>", "</b>", "<!--", "<!-", "-->",
    "NaN", "Na", "Infinity", "Infinit", "1", "12", "1.5", "1.", ".5", "1e5", "1E+5", "1e-", "1e", "e5", "x1e5",
    "_1e5", "a", "Z", "N", "I", " ", '"', "{", "}", ":", ",", "[", "]", "0x1f", "caf", "word ", "\\n1e5", "\\t2.5",
    "\u00e9", "\u20141e5", "\u00df",
]


def _rule_text(rng: random.Random) -> bytes:
    n = rng.choice([0, 1, 2, 3, 5, 8, 20, 60])
    return "".join(rng.choice(_RULE_PIECES) for _ in range(n)).encode("utf-8")


@pytest.mark.parametrize("seed", range(4))
def test_the_compiled_pass_applies_the_rules_as_written(seed):
    """memkit/scan/_escapes.c against the rules as Hyperscan regexes
    (tests/json_escapes_reference.py), on texts built from their pieces (some not ASCII),
    joined: the same texts are left unproven, and with ``ascii`` every text that is not
    ASCII too."""
    import json_escapes_reference as ref

    from memkit.scan.json_escapes import unproven

    rng = random.Random(900 + seed)
    for _ in range(300):
        texts = [_rule_text(rng) for _ in range(rng.randrange(1, 12))]
        want = ref.unproven_texts(texts)
        data = b"\0".join(texts)
        starts = [0]
        for t in texts:
            starts.append(starts[-1] + len(t) + 1)
        for ascii in (False, True):  # with ascii, a text holding a byte above 0x7F too
            got = [False] * len(texts)
            for to in unproven(data, ascii):
                got[bisect.bisect_right(starts, to - 1) - 1] = True
            expect = [w or (ascii and not t.isascii()) for t, w in zip(texts, want, strict=True)]
            assert got == expect, [t for t, g, w in zip(texts, got, expect, strict=True) if g != w]
        assert decoding_adds_nothing([t.decode() for t in texts]) == [not w and t.isascii() for t, w in zip(texts, want, strict=True)]


def test_every_escape_is_judged_as_harmless_says():
    """Each ``\\uXXXX`` alone, every code point, both cases of 'u': unproven exactly where
    the reference's rules say."""
    import json_escapes_reference as ref

    texts = [b"\\%s%04x" % (u, cp) for u in (b"u", b"U") for cp in range(0x10000)]
    assert decoding_adds_nothing([t.decode() for t in texts]) == [not w for w in ref.unproven_texts(texts)]


def test_the_harmless_table_is_the_rule_code_point_by_code_point():
    """The table :func:`harmless` reads (every fold at once) against its rule applied to
    each BMP code point alone: at or above U+0080, no surrogate, not folding to several,
    and below U+2000, a halfwidth or fullwidth form, or folding to no letter or digit."""
    from memkit.scan.json_escapes import _harmless_points
    from memkit.scan.spellings import alnum_fold, spelling_tables

    multi = spelling_tables()[3]
    rule = bytes(0x80 <= cp and not 0xD800 <= cp <= 0xDFFF and chr(cp) not in multi
                 and (cp < 0x2000 or 0xFF00 <= cp <= 0xFFEF or not alnum_fold(chr(cp))) for cp in range(0x10000))
    assert _harmless_points() == rule


def test_joins_names_the_nuls_breakers_and_high_bytes_as_a_byte_by_byte_reading():
    """The one pass a batch of joined texts is checked with, against numpy and the
    breaker set itself, on every byte value at every offset of a 16-byte block and on
    random bytes."""
    import random

    import numpy as np

    from memkit.scan.json_escapes import joins
    from memkit.scan.multi import _BREAKER_SET

    def reference(data: bytes) -> tuple[list[int], bool, bool]:
        arr = np.frombuffer(data, dtype=np.uint8)
        return (np.flatnonzero(arr == 0).tolist(), any(b in _BREAKER_SET and b for b in data),
                not data.isascii())

    rng = random.Random(5)
    cases = [b"", b"\0", b"plain text\0more"] + [rng.randbytes(rng.randrange(0, 300)) for _ in range(300)]
    cases += [b"x" * k + bytes([c]) + b"y" * (40 - k) for c in range(256) for k in (0, 15, 16, 17, 40)]
    for data in cases:
        nuls, breaker, high = joins(data)
        assert (nuls.tolist(), breaker, high) == reference(data), data[:40]
