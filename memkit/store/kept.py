"""Find a store a sweep kept (``memkit sweep --keep-stores``) and its planted canary, so
``memkit residue --run RUN --unit ID --mode MODE`` scans it without digging the canary
out of ``results.jsonl`` by hand.

Layout (README.md, "What ``memkit sweep`` does"): ``RUN/stores/<question id>/S<S>/<mode>/``
holds ``chroma/`` and ``llm_cache.sqlite``; the unit's ``{"type": "canary"}`` record in
``RUN/results.jsonl`` holds the planted value. Plain JSON reading: memkit does not
import the evaluators package.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

__all__ = ["KeptStoreError", "kept_store"]


class KeptStoreError(ValueError):
    """The run, unit or mode does not name a kept store (the message says what exists)."""


def _safe(question_id: str) -> str:
    # the sweep's directory name for a question id (evaluators/sweep/unit.py)
    return re.sub(r"[^A-Za-z0-9_.-]", "_", question_id).lstrip(".") or "_"


def kept_store(run: str | Path, unit: str, mode: str) -> tuple[Path, str, Path | None]:
    """The kept store of ``unit`` after deletion mode ``mode`` and the canary planted in it.

    Args:
        run: a sweep's ``--out`` run with ``--keep-stores``.
        unit: a unit id ``<question id>::S<S>`` (as in ``results.jsonl``), or a question
            id alone when the run has one summary level.
        mode: a deletion mode the run ran (e.g. ``raw_only``).

    Returns:
        ``(chroma directory, canary value, LLM cache file or None)``.

    Raises:
        KeptStoreError: no ``results.jsonl``, no such unit, or no kept store for it (the
            message lists the units or modes that exist).
    """
    run = Path(run)
    results = run / "results.jsonl"
    if not results.is_file():
        raise KeptStoreError(f"{results} not found: give the --out of a finished `memkit sweep --keep-stores`")
    canaries: dict[str, tuple[str, int, str]] = {}
    with open(results, encoding="utf-8") as fh:
        for line in fh:
            if '"canary"' not in line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and rec.get("type") == "canary":
                canaries[str(rec["unit"])] = (str(rec["question_id"]), int(rec["S"]), str(rec["value"]))
    match = canaries.get(unit) or next(
        (v for u, v in canaries.items() if v[0] == unit and sum(1 for w in canaries.values() if w[0] == unit) == 1),
        None)
    if match is None:
        some = ", ".join(sorted(canaries)[:5])
        raise KeptStoreError(f"no unit {unit!r} in {results} (units look like: {some or 'none'})")
    qid, S, value = match
    base = run / "stores" / _safe(qid) / f"S{S}"
    chroma = base / mode / "chroma"
    if not chroma.is_dir():
        modes = sorted(p.name for p in base.iterdir()) if base.is_dir() else []
        raise KeptStoreError(
            f"no kept store {chroma}" + (f"; modes kept for this unit: {', '.join(modes)}" if modes else
                                         " (was the sweep run with --keep-stores?)"))
    cache = base / mode / "llm_cache.sqlite"
    return chroma, value, cache if cache.is_file() else None
