"""The ``redacting`` design's scrubber (graphs.designs.scrub_text, RedactingSummarizer):
what it scrubs, it scrubs in every spelling memkit's matcher counts as a copy.

Secrets are drawn by memkit.dataset.canaries (seeded) and planted in their sentences; for each
value the scrubber detects, spellings are generated here (case, Unicode dashes, blanks,
zero-width characters, NFD/fullwidth forms, and mixes), each confirmed a copy by the
matcher, and after scrubbing each is gone by the matcher AND by a plain check written
here with the standard library (NFKC, case fold, letters and digits only).
"""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest

from graphs.designs import RedactingSummarizer, detect_secrets, scrub_text
from graphs.nodes import SummaryItem, user_turn_chunks
from memkit.dataset.canaries import SENTENCES, draw_secret
from memkit.scan.matching import matcher

DASHES = ["\u2010", "\u2011", "\u2012", "\u2013", "\u2014", "\u2015", "\u2212", "\ufe63", "\uff0d"]


def plain(text: str) -> str:
    """Letters and digits of the NFKC case fold (stdlib only)."""
    return "".join(c for c in unicodedata.normalize("NFKC", text).casefold() if c.isalnum())


def spellings(value: str) -> dict[str, str]:
    """Spellings of ``value`` a reader takes for it (name -> text)."""
    seps = [i for i, c in enumerate(value) if not c.isalnum()]

    def resep(sep: str) -> str:
        return "".join(sep if i in seps else c for i, c in enumerate(value))

    out = {
        "lower": value.lower(), "upper": value.upper(), "swapcase": value.swapcase(),
        "blanks between every character": " ".join(c for c in value if c.isalnum()),
        "blanks for separators": resep(" "),
        "no separators": "".join(c for c in value if c.isalnum()),
        "zero-width between every character": "\u200b".join(value),
        "word joiners for separators": resep("\u2060"),
        "NFD": unicodedata.normalize("NFD", value),
        "fullwidth": "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in value),
        "lower, en dashes": resep("\u2013").lower(),
        "soft hyphens and newlines": resep("\u00ad\n"),
    }
    for d in DASHES:
        out[f"dash U+{ord(d):04X}"] = resep(d)
    return out


def secrets() -> list[tuple[str, str]]:
    """(planted sentence, secret) per kind, seeded; plus an accented password (NFD
    differs from NFC only for such)."""
    rng = np.random.default_rng(20240611)
    out = [(SENTENCES[k].format(value=v), v) for k in ("token", "email", "phone", "api_key", "card")
           for v in [draw_secret(rng, k)]]
    out.append(("my password is Ñandú-Café-42 ok", "Ñandú-Café-42"))
    return out


CASES = [(sentence, value, name, text)
         for sentence, _ in secrets() for value in detect_secrets(sentence)
         for name, text in spellings(value).items()]


def test_the_scrubber_detects_the_planted_values():
    found = {v for sentence, _ in secrets() for v in detect_secrets(sentence)}
    planted = {s for _, s in secrets()}
    assert len(found & planted) >= 5, found  # token, email, phone, api key, password
    assert len(CASES) >= 5 * 20


def assert_gone(value: str, out: str) -> None:
    assert not matcher(value).search(out), out
    assert plain(value) not in plain(out), out


@pytest.mark.parametrize(("sentence", "value", "name", "spelled"), CASES,
                         ids=[f"{v[:12]}-{n}" for _, v, n, _ in CASES])
def test_every_spelling_of_a_detected_value_is_scrubbed(sentence, value, name, spelled):
    text = f"Note: the value {spelled} was mentioned."
    assert matcher(value).search(text)  # the matcher counts it a copy
    # beside the value as written: found in the same text
    assert_gone(value, scrub_text(f"{sentence}. Also {text}"))
    # alone, the value found in the sources (scrub_text's known)
    assert_gone(value, scrub_text(text, detect_secrets(sentence)))


@pytest.mark.parametrize("name", ["lower", "swapcase", "blanks between every character", "dash U+2013",
                                  "zero-width between every character", "NFD", "fullwidth"])
def test_a_summary_that_respells_the_value_is_scrubbed(name):
    """The user writes the value one way; the summarizer (here a stand-in that writes
    it in another spelling, as an LLM may) another: the summary holds no copy."""
    for sentence, _ in secrets():
        for value in detect_secrets(sentence):
            chunks = user_turn_chunks("ns", "s1", "2024-01-01", ["I moved to Lisbon.", f"By the way {sentence}."])

            def respelling(cs, S, prior, value=value):
                return [SummaryItem(f"User moved to Lisbon; their value is {spellings(value)[name]}.",
                                    [c.id for c in cs])]

            (item,) = RedactingSummarizer(respelling)(chunks, 1, None)
            assert_gone(value, item.text)
            assert "Lisbon" in item.text and item.source_ids == [c.id for c in chunks]


@pytest.mark.parametrize("spelled", ["XQ7\u2013VIOLET\u20133829", "XQ7\u2212VIOLET\u22123829",
                                     "XQ7-\u200bVIOLET-\u200b3829", "XQ7.VIOLET.3829", "ＸＱ７－ＶＩＯＬＥＴ－３８２９"])
def test_a_token_with_other_joiners_is_detected_alone(spelled):
    out = scrub_text(f"my token: {spelled} thanks")
    assert_gone("XQ7-VIOLET-3829", out) and "{{SECRET}}" in out


def test_prose_is_kept():
    text = "I watched a 3-year-old play; covid-19 is over and I read e.g. a book."
    assert scrub_text(text) == text
