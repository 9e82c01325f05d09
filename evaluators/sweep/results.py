"""Writing ``results.jsonl``: a unit's records and its marker, canonical order.

The records are typed and read back by :mod:`evaluators.records` (its
:func:`~evaluators.records.load_records` is the one reader)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from evaluators.records import load_records, validate_record

__all__ = ["append_unit", "canonical_order", "load_records", "rewrite_records"]





def append_unit(fh: Any, records: list[dict[str, Any]], unit: str, counts: dict[str, int]) -> None:
    """Append a unit's records and its ``unit_done`` marker to ``fh`` and fsync, each
    checked against its record model first (:func:`evaluators.records.validate_record`).

    Raises:
        ValueError: a record that does not fit its model (nothing is written).
    """
    marker = {"type": "unit_done", "unit": unit, **counts}
    for i, r in enumerate([*records, marker]):
        validate_record(r, f"unit {unit}, record {i}")
    lines = [json.dumps(r, sort_keys=True, ensure_ascii=False) for r in records]
    lines.append(json.dumps(marker, sort_keys=True))
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
