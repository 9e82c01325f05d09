"""The rules of ``memkit/scan/_escapes.c`` written as regular expressions and run by
Hyperscan over the joined texts (a match leaves its text unproven): the reference
``tests/test_scan_json_escapes.py`` holds the compiled pass to."""

from __future__ import annotations

import bisect
from functools import lru_cache
from typing import Any

import hyperscan

from memkit.scan.json_escapes import _JUDGED_BELOW, _JUDGED_FROM, harmless
from memkit.scan.spellings import spelling_tables

UNPROVEN = [
    rb"[^0-9A-Za-z][0-9]+(?:\.[0-9]|[eE][+-]?[0-9])",  # a fraction or exponent (not an escape's hex)
    rb"\\[ntr][0-9]+(?:\.[0-9]|[eE][+-]?[0-9])",      # one after escaped whitespace (JSON in a string)
    rb"NaN|Infinity",                                   # constants the decoder reads as numbers
    rb"\\\\",                                           # an escaped backslash
    rb"<[^<>\\\x00]*\\",                                # an escape in a tag's body
    rb"<!--[^\x00]*\\|\\[^\x00]*<!--",                  # an escape beside a comment
]
JUDGED = rb"\\u(?:00[0-7]|[dD][89abAB][0-9A-Fa-f]|20[7-9A-Fa-f]|2[1-9A-Fa-f][0-9A-Fa-f]|[3-9A-Fa-f][0-9A-Fa-f]{2})"
"""The first five characters of each ``\\uXXXX`` judged one by one (ASCII, U+2070 up)."""


@lru_cache(maxsize=1)
def _database() -> Any:
    assert (_JUDGED_BELOW, _JUDGED_FROM) == (0x80, 0x2070)  # what JUDGED spells
    folding = [b"\\\\u%04x" % ord(ch) for ch in sorted(spelling_tables()[3]) if 0x80 <= ord(ch) < 0x2070]
    exprs = [*UNPROVEN, *folding, JUDGED]
    ids = [0] * (len(exprs) - 1) + [1]
    flags = [hyperscan.HS_FLAG_DOTALL] * len(UNPROVEN) + [hyperscan.HS_FLAG_CASELESS] * len(folding) + [0]
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=exprs, ids=ids, elements=len(exprs), flags=flags)
    return db


def unproven_texts(texts: list[bytes]) -> list[bool]:
    """For each text (UTF-8 bytes, no NUL): whether a rule leaves it unproven."""
    data = b"\0" + b"\0".join(texts)
    starts = [1]
    for t in texts:
        starts.append(starts[-1] + len(t) + 1)
    out = [False] * len(texts)

    def seen(kind: int, _frm: int, to: int, _flags: int, _ctx: Any) -> None:
        if kind == 0 or not harmless(data[to - 5:to + 1].decode("utf-8", "replace")):
            out[bisect.bisect_right(starts, to - 1) - 1] = True

    if texts:
        _database().scan(data, match_event_handler=seen)
    return out
