"""A user's fingerprint: the strings whose copies show that a user's data is still there.

A "forget me" request erases a *user*, not one planted token. :func:`fingerprint`
lists what identifies that user's data in a store, for the residue scanner
(``memkit residue DIR --user-turns FILE.jsonl``, ``scan(..., secrets=...)``) and the
user-scope forget (:func:`graphs.forget.forget_user`):

1. the canaries planted for the user (given by the caller);
2. the PII found in the user's own turns by scrubadub's offline detectors (email,
   phone, URL, credit card, social security number, Twitter handle, credentials; no
   model, no network);
3. distinctive phrases: word n-grams (:data:`NGRAM_N` = 4 words, lower-cased
   ``\\w+`` tokens) of the user's own turns that occur in no other user's turns of the
   same store, with at least :data:`MIN_NGRAM_CHARS` letters and digits, the first
   :data:`NGRAM_CAP` (200) by order of appearance.

Only turns with ``role == "user"`` are the user's own words (an assistant's reply may
quote other users). A string qualifies only when it has at least
:data:`MIN_ALNUM` letters or digits: shorter strings occur by chance in any store.
What counts as a copy of each string is :mod:`memkit.scan.matching`'s definition.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memkit.scan.matching import alnum_fold

__all__ = [
    "MIN_ALNUM",
    "MIN_NGRAM_CHARS",
    "NGRAM_CAP",
    "NGRAM_N",
    "fingerprint",
    "load_turns",
    "pii",
    "user_texts",
]

NGRAM_N = 4
"""Words per distinctive phrase."""

NGRAM_CAP = 200
"""At most this many distinctive phrases per user (first by order of appearance)."""

MIN_NGRAM_CHARS = 12
"""A phrase needs at least this many letters and digits (``"i am at a"`` is no
fingerprint)."""

MIN_ALNUM = 4
"""Any fingerprint string needs at least this many letters and digits."""

_WORD = re.compile(r"\w+")


def user_texts(turns: Iterable[Any]) -> list[str]:
    """The user's own words in ``turns``: each a string, or a mapping with ``content``
    (kept when its ``role`` is ``"user"`` or absent).

    Raises:
        TypeError: a turn that is neither, or whose content is not a string.
    """
    out = []
    for n, t in enumerate(turns):
        if isinstance(t, str):
            out.append(t)
        elif isinstance(t, Mapping):
            if t.get("role", "user") != "user":
                continue
            content = t.get("content")
            if not isinstance(content, str):
                raise TypeError(f"turn {n}: 'content' must be a string, got {type(content).__name__}")
            out.append(content)
        else:
            raise TypeError(f"turn {n}: expected a string or a mapping with 'content', got {type(t).__name__}")
    return out


def pii(texts: Iterable[str]) -> list[str]:
    """PII found by scrubadub's default offline detectors in ``texts`` (each found
    string once, in order of appearance)."""
    import scrubadub

    scrubber = scrubadub.Scrubber()
    found: dict[str, None] = {}
    for text in texts:
        for f in scrubber.iter_filth(text):
            found.setdefault(f.text.strip(), None)
    return [s for s in found if len(alnum_fold(s)) >= MIN_ALNUM]


def _ngrams(text: str, n: int) -> list[str]:
    words = _WORD.findall(text.lower())
    return [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]


def fingerprint(
    turns: Iterable[Any],
    *,
    others: Iterable[Any] = (),
    canaries: Sequence[str] = (),
    n: int = NGRAM_N,
    cap: int = NGRAM_CAP,
) -> list[str]:
    """A user's fingerprint (module doc): canaries, then PII, then distinctive phrases,
    each string once.

    Args:
        turns: the user's turns (strings, or mappings with ``role``/``content``).
        others: every other user's turns in the same store (same forms); a phrase in
            any of them is not distinctive.
        canaries: the canaries planted for the user.
        n: words per phrase (default :data:`NGRAM_N`).
        cap: at most this many phrases (default :data:`NGRAM_CAP`).

    Returns:
        The strings, in that order, without duplicates.

    Raises:
        TypeError: a malformed turn. ValueError: ``n`` or ``cap`` below 1.
    """
    if n < 1 or cap < 0:
        raise ValueError(f"fingerprint: n must be >= 1 and cap >= 0, got n={n}, cap={cap}")
    mine = user_texts(turns)
    theirs = user_texts(others)
    common = {g for t in theirs for g in _ngrams(t, n)}
    out: dict[str, None] = {}
    for c in canaries:
        if len(alnum_fold(c)) >= 1:
            out.setdefault(c, None)
    for s in pii(mine):
        out.setdefault(s, None)
    phrases: dict[str, None] = {}
    for t in mine:
        for g in _ngrams(t, n):
            if len(phrases) >= cap:
                break
            if g not in common and len(alnum_fold(g)) >= MIN_NGRAM_CHARS:
                phrases.setdefault(g, None)
    for g in phrases:
        out.setdefault(g, None)
    return list(out)


def load_turns(path: str | Path, user: str | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """Read a JSONL file of turns for ``--user-turns``: each line an object with
    ``content`` (and optionally ``role``, ``user_id``), or ``{"canary": "..."}`` (a
    canary planted for the user, optionally with ``user_id``).

    Args:
        path: the file.
        user: whose fingerprint; lines of other ``user_id`` values are the other users'
            turns. ``None``: the file must hold one user (lines without ``user_id``, or
            all the same).

    Returns:
        ``(the user's turns, the other users' turns, the user's canaries)``.

    Raises:
        FileNotFoundError: no such file. ValueError: a line that is not a JSON object
            with ``content`` or ``canary`` (named by line number), or several users
            and no ``user``.
    """
    path = Path(path)
    rows: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as fh:
        for no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{no}: not JSON ({exc})") from exc
            if not isinstance(row, dict) or not ("content" in row or "canary" in row):
                raise ValueError(f"{path}:{no}: expected an object with 'content' or 'canary'")
            rows.append(row)
    users = {r.get("user_id") for r in rows}
    if user is None:
        if len(users - {None}) > 1:
            raise ValueError(f"{path}: turns of several users {sorted(map(str, users - {None}))}; "
                             "say whose fingerprint with --user")
        user = next(iter(users - {None}), None)
    mine = [r for r in rows if r.get("user_id") in (user, None) and "content" in r]
    theirs = [r for r in rows if r.get("user_id") not in (user, None) and "content" in r]
    canaries = [str(r["canary"]) for r in rows if "canary" in r and r.get("user_id") in (user, None)]
    return mine, theirs, canaries
