"""memkit.scan.multi: many secrets report what each secret's own matcher reports."""

from __future__ import annotations

import random

import pytest

from memkit.scan.json_escapes import joins
from memkit.scan.matching import matcher
from memkit.scan.multi import MultiMatcher, may_hold, text_bytes

SECRETS = ["XQ7-VIOLET-3829", "caf\u00e9-42", "Gie\u00dfen-Ost", "AMP-7", "100000.0", "x-1"]

_PIECES = [
    "XQ7", "xq7", "VIOLET", "violet", "3829", "-", " ", "  ", "<b>", "</b>", "<b class=x>", "<!-- c -->", "<!--",
    "-->", "&amp;", "&amp", "&#88;", "&#x51;", "&nbsp;", "%58", "%2D", "\\u0058", "\\\\u0051", "\\n", "\\", '"',
    "\x1b[1m", "\t", "\n", "\r", "\x0b", "\x0c", "cafe", "CAFE", "&#233;", "\\u00e9", "%C3%A9", "42", "GIESSEN",
    "gie", "ssen", "OST", "ost", "AMP", "amp", "7", "100000", ".0", "x", "1", "word", "'", "/", "*",
]
_OTHER = ["\u00e9", "\uff38", "\u00df", "\u2014", "\x00", "\x07", "\x7f", "\x1f", "\U0001d417"]


def _reference(text: str) -> list[tuple[int, int, str, int]]:
    """Each secret's text pattern (:meth:`SecretMatcher.spans`), as many secrets once read it."""
    return sorted((s, e, k, i) for i, secret in enumerate(SECRETS) for s, e, k in matcher(secret).spans(text))


def test_many_secrets_report_each_secrets_own_copies():
    """2,000 generated texts, three quarters ASCII with no breaking control character
    (read by the scan engine alone), the rest with one (read by the text patterns):
    the same spans, kinds and secrets as each secret's matcher, and copies among them."""
    m = MultiMatcher(SECRETS)
    rng = random.Random(11)
    with_copies = 0
    for n in range(2000):
        pieces = [rng.choice(_PIECES) for _ in range(rng.randrange(1, 30))]
        if n % 4 == 3:
            pieces.insert(rng.randrange(len(pieces) + 1), rng.choice(_OTHER))
        text = "".join(pieces)
        want = _reference(text)
        assert m.spans(text) == want, text
        assert may_hold(m, ["x", text])[1] or not want, text  # the prefilter: a superset
        with_copies += bool(want)
    assert with_copies >= 200


# a control character the byte pattern breaks at, where the text pattern reads a
# separator that ends a tag, comment or ANSI code: read as a space, the bytes would
# hold a construct that swallows the copy's next letters
CONTROLS_IN_CONSTRUCTS = [
    "xq7/violet<!--'<b class=x>/3829\x07-<b class=x>/'/<!-- c -->",
    "XQ7<VIOLET\x07>3829",
    "XQ7<VIO <LET\x07>3829",          # the inner tag's opener written as "(" would open the outer one
    "XQ7-VIOLET\x1b[3829\x07m",
    "XQ7<!--VIOLET\x0e3829-->",
    "XQ7\x00VIOLET\x1f3829<!-- \x7f -->",
]


@pytest.mark.parametrize("text", CONTROLS_IN_CONSTRUCTS)
def test_a_control_character_ends_a_construct_in_the_prefilter_too(text):
    m = MultiMatcher(SECRETS)
    want = _reference(text)
    assert want and want[0][3] == 0
    assert m.spans(text) == want
    assert 0 in m.candidates(text)
    assert may_hold(m, [text]) == [True] and may_hold(matcher(SECRETS[0]), [text]) == [True]
    assert b"(" in text_bytes(text)  # an opener written as one


def test_a_copy_beside_the_secret_as_given_merges_alike():
    m = MultiMatcher(SECRETS)
    for text in ["XQ7-VIOLET-3829", "XQ7 violet 3829 XQ7-VIOLET-3829", "xq7-XQ7-VIOLET-3829-3829",
                 "XQ7-VIOLET-3829XQ7-VIOLET-3829", "&#88;Q7-VIOLET-3829", "AMP-7&amp;AMP-7"]:
        assert m.spans(text) == _reference(text), text


def test_a_breaker_is_seen_as_text_bytes_sees_it():
    """The one-pass check the batch takes its fast path by answers, for every byte value
    alone and amid text, whether :func:`text_bytes` would rewrite it (NUL aside: the
    batch's own separator)."""
    for c in range(256):
        rewritten = c != 0 and text_bytes("a" + chr(c) + "b") != ("a" + chr(c) + "b").encode()
        for data in (bytes([c]), b"word " * 50 + bytes([c]) + b" word", bytes([c]) + b"\0" * 9):
            assert joins(data)[1] == rewritten, (c, data[:8])
    assert not joins(b"")[1] and not joins("\u00e9\t\n\r\x0b\x0c\x1b[".encode())[1]


def test_texts_read_together_are_named_as_each_alone():
    """The prefilter over a batch of texts (encoded at once where none holds a byte it
    rewrites, text by text where one does) names exactly the texts it names one at a
    time, and every text that holds a copy: batches of generated texts, some with a
    control character, NUL or a folding character, empty texts among them."""
    m = MultiMatcher(SECRETS)
    rng = random.Random(5)
    for n in range(150):
        texts = []
        for _ in range(rng.randrange(1, 12)):
            pieces = [rng.choice(_PIECES) for _ in range(rng.randrange(0, 12))]
            if n % 3 == 0 and rng.random() < 0.3:
                pieces.insert(rng.randrange(len(pieces) + 1), rng.choice(_OTHER))
            texts.append("".join(pieces))
        alone = [may_hold(m, [t])[0] for t in texts]
        assert may_hold(m, texts) == alone, texts
        assert all(a or not _reference(t) for a, t in zip(alone, texts, strict=True))
    for text in CONTROLS_IN_CONSTRUCTS:  # a construct the control ends, beside texts without one
        assert may_hold(m, ["x", text, "y"]) == [False, True, False], text
    assert may_hold(m, ["a\x00b", "c", "XQ7-VIOLET-3829", ""]) == [False, False, True, False]  # a NUL in a text


_PARTS = ["XQ7", "-", "VIOLET", "3829", " ", "\x00", "\x01", "\x1b", "<", ">", "\u00df", "Gie", "en-Ost", "ss",
          "caf", "\u00e9", "e\u0301", "-42", "\\u00e9", "\\", '"', "{", "1e5", "AMP", "&amp;", "7", "x", "word"]
