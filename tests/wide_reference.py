"""The wide readings the plain way, as memkit computed them before ``memkit/scan/_wide.c``:
numpy maps every code unit of every reading through the alphabet table, a ``<`` unit
that can start a tag or comment takes the 512 units after it, and each run is decoded
and matched on its own (no run is skipped for want of spellings). Slow (twelve passes
over the bytes) but plain; ``tests/test_wide.py`` holds
:func:`memkit.scan.encodings.wide_spans` to it. ``forced_by_any_lt=True`` is the rule memkit
used before: any ``<`` unit takes the 512 after it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from memkit.scan.encodings import WIDE_ENCODINGS, WideSpan, _min_units, _utf16_table, alphabet_of

_TAG_REACH = 512


def _runs(mask: np.ndarray, min_len: int) -> Iterator[tuple[int, int]]:
    if mask.size == 0:
        return
    change = np.flatnonzero(mask[1:] != mask[:-1]) + 1
    bounds = np.concatenate(([0], change, [mask.size]))
    starts = bounds[:-1][0 if mask[0] else 1::2]
    ends = bounds[1:][0 if mask[0] else 1::2]
    keep = (ends - starts) >= min_len
    yield from zip(starts[keep].tolist(), ends[keep].tolist(), strict=True)


def text_spans(text: str, m: Any) -> list[tuple[int, int, str, int | None]]:
    """Copies in a run of decoded text: the byte pattern over its UTF-8, plus the text
    pattern where the run holds a character that folds to several."""
    from memkit.scan.matching import multi_char_pattern

    data = text.encode("utf-8", errors="replace")
    spans = m.byte_spans(data)
    if not spans and multi_char_pattern().search(text) is None:
        return []
    out = []
    at_byte = at_char = 0
    for s, e, kind, *idx in spans:
        at_char += len(data[at_byte:s].decode("utf-8", errors="replace"))
        at_byte = s
        out.append((at_char, at_char + len(data[s:e].decode("utf-8", errors="replace")), kind,
                    idx[0] if idx else None))
    if multi_char_pattern().search(text) is not None:
        for s, e, kind, *idx in m.spans(text):
            if not any(s < oe and os_ < e for os_, oe, _, _ in out):
                out.append((s, e, kind, idx[0] if idx else None))
    return sorted(out, key=lambda t: (t[0], t[1]))


def runs(buf: Any, secrets: tuple[str, ...], min_len: int, forced_by_any_lt: bool = False) -> list[tuple[int, int, int]]:
    """``(kind, start, end)`` of every run of at least ``min_len`` units (kind: the
    index of the encoding in :data:`WIDE_ENCODINGS`)."""
    out = []
    table32, table16 = alphabet_of(secrets), _utf16_table(secrets)
    for k, (codec, width) in enumerate(WIDE_ENCODINGS):
        for align in range(width):
            count = (len(buf) - align) // width
            if count < min_len:
                continue
            dtype = np.dtype(f"{'>' if codec.endswith('be') else '<'}u{width}")
            units = np.frombuffer(buf, dtype=dtype, count=count, offset=align)
            mask = np.take(table16 if width == 2 else table32, units, mode="clip")
            for p in np.flatnonzero(units == 0x3C).tolist():  # a tag or comment may follow
                nxt = int(units[p + 1]) if p + 1 < count else -1
                if forced_by_any_lt or 0x41 <= nxt <= 0x5A or 0x61 <= nxt <= 0x7A or nxt in (0x2F, 0x21):
                    mask[p: p + _TAG_REACH] = True
            out += [(k, align + s * width, align + e * width) for s, e in _runs(mask, min_len)]
    return sorted(out)


def wide_spans(buf: Any, m: Any, exclude: list[Any] | None = None, forced_by_any_lt: bool = False) -> list[WideSpan]:
    """Every copy in every wide reading, one per byte range and secret (aligned
    readings first, then the order of :data:`WIDE_ENCODINGS`), none overlapping
    ``exclude`` (``(start, end)``, or ``(start, end, index)`` for one secret's)."""
    from memkit.scan.matching import skeleton

    secrets = tuple(m.secrets) if hasattr(m, "secrets") else (m.secret,)
    min_len = min(_min_units(s, len(skeleton(s))) for s in secrets)
    candidates = []
    for k, start, end in runs(bytes(buf), secrets, min_len, forced_by_any_lt):
        codec, width = WIDE_ENCODINGS[k]
        order = (0, 2, 4, 8)[k] + start % width
        text = bytes(buf[start:end]).decode(codec, errors="replace")
        at_char, at_byte = 0, start
        for ts, te, kind, idx in text_spans(text, m):
            at_byte += len(text[at_char:ts].encode(codec, errors="replace"))
            at_char = ts
            stop = at_byte + len(text[ts:te].encode(codec, errors="replace"))
            clip_lo, clip_hi = max(0, ts - 64), min(len(text), te + 64)
            candidates.append((at_byte % width != 0, order, WideSpan(
                at_byte, stop, kind, codec, text[clip_lo:clip_hi], ts - clip_lo, te - clip_lo, idx)))
    found: list[WideSpan] = []
    taken: dict[Any, list[tuple[int, int]]] = {}
    for _, _, span in sorted(candidates, key=lambda c: (c[0], c[1], c[2].start)):
        others = [(r[0], r[1]) for r in exclude or () if len(r) == 2 or r[2] == span.secret_index]
        if any(s < span.end and span.start < e for s, e in others + taken.get(span.secret_index, [])):
            continue
        taken.setdefault(span.secret_index, []).append((span.start, span.end))
        found.append(span)
    return sorted(found, key=lambda w: w.start)
