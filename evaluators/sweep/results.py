"""``results.jsonl``: the one reader of a run's records and the appenders."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

# --------------------------------------------------------------------------- results file


def load_records(path: str | Path) -> tuple[list[dict[str, Any]], set[str], list[int]]:
    """Read ``results.jsonl``, keeping only records of completed, intact units.

    Records of a unit are written together, then its ``unit_done`` marker. A unit
    without a marker (a kill cut it short) or with a line that does not parse (a
    torn or corrupted line) is not done: its records are dropped and it runs again.
    Every other unit is kept, wherever the damage is.

    Returns:
        ``(records, done_units, bad_lines)``: the kept records (markers included),
        their unit ids, and the 1-based numbers of lines that did not parse.
    """
    path = Path(path)
    records: list[dict[str, Any]] = []
    done: set[str] = set()
    bad: list[int] = []
    if not path.exists():
        return records, done, bad
    pending: list[dict[str, Any]] = []
    pending_bad = False
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                rec = json.loads(raw)
                if not isinstance(rec, dict) or "type" not in rec or not raw.endswith(b"\n"):
                    raise ValueError("not a record")
            except ValueError:
                bad.append(lineno)
                pending_bad = True
                continue
            if rec["type"] == "unit_done":
                if not pending_bad and all(r.get("unit") == rec.get("unit") for r in pending):
                    records += pending + [rec]
                    done.add(rec["unit"])
                pending, pending_bad = [], False
            else:
                pending.append(rec)
    return records, done, bad


def append_unit(fh: Any, records: list[dict[str, Any]], unit: str, counts: dict[str, int]) -> None:
    lines = [json.dumps(r, sort_keys=True, ensure_ascii=False) for r in records]
    lines.append(json.dumps({"type": "unit_done", "unit": unit, **counts}, sort_keys=True))
    fh.write(("\n".join(lines) + "\n").encode())
    fh.flush()
    os.fsync(fh.fileno())

def canonical_order(records: list[dict[str, Any]], order: dict[str, int]) -> list[dict[str, Any]]:
    by_unit: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_unit.setdefault(r["unit"], []).append(r)
    out = []
    for unit in sorted(by_unit, key=lambda u: order.get(u, len(order))):
        if unit in order:
            out += by_unit[unit]
    return out


def rewrite_records(path: Path, records: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".jsonl.tmp")
    with open(tmp, "wb") as fh:
        for r in records:
            fh.write((json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n").encode())
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
