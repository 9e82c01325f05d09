"""Find a store a sweep kept (``memkit sweep --keep-stores``) and its planted canary, so
``memkit residue --run RUN --unit ID --mode MODE`` scans it without digging the canary
out of ``results.jsonl`` by hand.

Layout (README.md, "What ``memkit sweep`` does"): ``RUN/stores/<question id>/S<S>/<mode>/``
holds ``chroma/`` and ``llm_cache.sqlite``; the unit's ``{"type": "canary"}`` record in
``RUN/results.jsonl`` holds the planted value, read with the one reader of a run
directory (:func:`evaluators.records.read_run`).
"""

from __future__ import annotations

from pathlib import Path

from evaluators.runner import safe_dir_name

__all__ = ["KeptStoreError", "kept_store"]


class KeptStoreError(ValueError):
    """The run, unit or mode does not name a kept store (the message says what exists)."""


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
    from evaluators.records import read_run

    run = Path(run)
    results = run / "results.jsonl"
    try:
        records = read_run(run, need=("results.jsonl",)).records
    except FileNotFoundError as exc:
        raise KeptStoreError(f"{results} not found: give the --out of a finished `memkit sweep --keep-stores`") from exc
    canaries = {str(r["unit"]): (str(r["question_id"]), r["S"], str(r["value"]))
                for r in records if r["type"] == "canary"}
    match = canaries.get(unit) or next(
        (v for u, v in canaries.items() if v[0] == unit and sum(1 for w in canaries.values() if w[0] == unit) == 1),
        None)
    if match is None:
        some = ", ".join(sorted(canaries)[:5])
        raise KeptStoreError(f"no unit {unit!r} in {results} (units look like: {some or 'none'})")
    qid, S, value = match
    base = run / "stores" / safe_dir_name(qid) / f"S{S}"
    chroma = base / mode / "chroma"
    if not chroma.is_dir():
        modes = sorted(p.name for p in base.iterdir()) if base.is_dir() else []
        raise KeptStoreError(
            f"no kept store {chroma}" + (f"; modes kept for this unit: {', '.join(modes)}" if modes else
                                         " (was the sweep run with --keep-stores?)"))
    cache = base / mode / "llm_cache.sqlite"
    return chroma, value, cache if cache.is_file() else None
