"""SARIF 2.1.0 from ``memkit residue`` and ``memkit audit`` (``--sarif FILE``).

SARIF (OASIS, the format GitHub code scanning and most CI systems read) is a log of
*results*, each an instance of a *rule* found at some *locations*. memkit writes one
result per surface and secret (a residue scan) or per surface and user (an audit):

* ``ruleId``: the surface, i.e. the kind of residue (``disk_sqlite``,
  ``checkpoint``, ``pg_rows`` ...); each rule says what the surface is;
* ``locations``: where the copies are, as memkit located them (at most
  :data:`MAX_LOCATIONS` per result; ``properties.copies`` counts them all): a file
  and byte offset (``physicalLocation`` with ``region.byteOffset``; a container
  member, a table row or a checkpoint thread as a ``logicalLocation``);
* ``message``: how many copies of which secret, the secret masked
  (:func:`memkit.scan.multi.mask_secret`); a SARIF file never holds a secret;
* ``partialFingerprints``: ``surface:secret-or-user``, so that a consumer tracks the
  same residue across runs.

What memkit could not read is never left out: a surface not checked or read only in
part is a ``toolExecutionNotifications`` entry (level ``warning``) with the reason,
and the run's ``properties.memkit`` bag carries the numbers a baseline needs
(:mod:`evaluators.report.baseline`): holders per surface, the unchecked surfaces and, for an
audit, the gate metrics with their bootstrap CIs.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

__all__ = ["MAX_LOCATIONS", "SCHEMA_URI", "audit_sarif", "parse_location", "residue_sarif", "write_sarif"]

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
"""The OASIS SARIF 2.1.0 (errata 01) JSON schema every file names."""

MAX_LOCATIONS = 20
"""Locations listed per result (GitHub shows at most 10; ``properties.copies`` counts all)."""

_HELP = {
    "text_raw": "documents of memkit raw chunks",
    "text_summary": "documents of memkit summary chunks",
    "text_other": "documents a Chroma store holds that memkit did not write",
    "metadata": "record ids and metadata values of a Chroma store",
    "stale_embedding": "stored vectors that still encode an older text",
    "cache": "rows of an SQLite LLM cache",
    "cache_disk": "raw bytes of an SQLite LLM cache and its -wal/-journal",
    "side_sqlite": "live rows of an SQLite side file",
    "side_disk": "raw bytes of an SQLite side file (freed pages included)",
    "side_fulltext": "full-text index entries of an SQLite side file",
    "side_json": "JSON / JSONL side files",
    "side_pickle": "pickle side files (raw bytes)",
    "side_file": "other side files (raw bytes)",
    "checkpoint": "checkpoints and pending writes of an agent's conversations (threads)",
    "disk_sqlite": "raw bytes of chroma.sqlite3 (free pages and freed cells included)",
    "disk_wal": "raw bytes of -wal, -journal and -shm files",
    "disk_log": "rows of Chroma's write-ahead log table embeddings_queue",
    "disk_fulltext": "Chroma's FTS5 tables and index",
    "disk_hnsw": "raw bytes of HNSW segment files",
    "disk_other": "raw bytes of every other file of the store's directory",
    "pg_rows": "live rows of PostgreSQL tables, through SQL",
    "disk_pg_heap": "PostgreSQL heap files of the tables (live and dead tuples)",
    "disk_pg_index": "PostgreSQL index files of the tables",
    "disk_pg_toast": "PostgreSQL TOAST files of the tables",
    "disk_pg_wal": "PostgreSQL write-ahead log (pg_wal)",
    "disk_pg_other": "every other file of the PostgreSQL data directory",
    "store_api": "items the store returns through its own API",
    "store_vectors": "the store's vector index",
    "sqlite_rows": "live rows of the store's SQLite database",
}

# ``path@offset``, optionally followed by `` [how]`` or `` (block n, ...)``.
_FILE_AT = re.compile(r"^(?P<path>[^@]+)@(?P<offset>\d+)(?P<rest>\s.*)?$", re.S)


def _uri(path: str) -> tuple[str, str | None]:
    """``(uri, uriBaseId)`` of a file path: absolute -> ``file://``; relative -> the
    path, resolved against the base ``SCANROOT``."""
    if os.path.isabs(path):
        return Path(path).as_uri(), None
    return quote(path.replace(os.sep, "/"), safe="/!-._~"), "SCANROOT"


def parse_location(location: str) -> dict[str, Any]:
    """One memkit hit location as a SARIF ``location``.

    ``file@offset`` (``[how]`` or ``(block ...)`` after it kept in the message) ->
    ``physicalLocation`` with ``region.byteOffset``; ``archive!member@offset`` ->
    the archive as the artifact and ``archive!member`` as a logical location (the
    offset is the member's); ``thread=...`` (a checkpoint) and anything else (a table
    row, a record id) -> a ``logicalLocation`` whose ``fullyQualifiedName`` is the
    location as memkit wrote it (masked already).
    """
    out: dict[str, Any] = {"message": {"text": location}}
    m = None if location.startswith("thread=") else _FILE_AT.match(location)
    if m is None:
        thread = location.startswith("thread=")
        kind = "thread" if thread else "resource"
        name = location[len("thread="):].split(":checkpoint=", 1)[0] if thread else location.split(":", 1)[0]
        out["logicalLocations"] = [{"name": name, "fullyQualifiedName": location, "kind": kind}]
        return out
    path, offset = m.group("path"), int(m.group("offset"))
    outer, sep, member = path.partition("!")
    uri, base = _uri(outer)
    artifact: dict[str, Any] = {"uri": uri}
    if base:
        artifact["uriBaseId"] = base
    physical: dict[str, Any] = {"artifactLocation": artifact}
    if sep:
        out["logicalLocations"] = [{"name": member, "fullyQualifiedName": f"{path}@{offset}", "kind": "member"}]
    else:
        physical["region"] = {"byteOffset": offset}
    out["physicalLocation"] = physical
    return out


def _rules(surfaces: Iterable[str], describe: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    out = []
    for s in surfaces:
        what = (describe or {}).get(s) or _HELP.get(s) or f"the surface {s}"
        out.append({"id": s, "name": s,
                    "shortDescription": {"text": f"A copy of a secret remains on {s}"},
                    "fullDescription": {"text": f"A copy of a secret remains on {s}: {what}."},
                    "defaultConfiguration": {"level": "error"},
                    "properties": {"tags": ["privacy", "memory", "residue"]}})
    return out


def _result(surface: str, rule_index: int, who: str, secret_label: str, locations: Sequence[str], copies: int,
            text: str, props: Mapping[str, Any]) -> dict[str, Any]:
    shown = list(locations[:MAX_LOCATIONS])
    more = f" (first {len(shown)} shown)" if copies > len(shown) else ""
    return {
        "ruleId": surface, "ruleIndex": rule_index, "kind": "fail", "level": "error",
        "message": {"text": text + more},
        "locations": [parse_location(loc) for loc in shown],
        "partialFingerprints": {"memkitResidue/v1": f"{surface}:{who}"},
        "properties": {"surface": surface, "secret": secret_label, "copies": copies, **props},
    }


def _notifications(unchecked: Mapping[str, Sequence[str]], level: str, what: str) -> list[dict[str, Any]]:
    """One notification per surface: ``not_checked`` (with the reasons: never clean)
    or ``not_given`` (its input was not given, so nothing was scanned)."""
    def text(s: str, reasons: Sequence[str]) -> str:
        if what == "not_given":
            return f"{s}: not given, so not scanned (its count of 0 says nothing)"
        return f"{s} not checked or read only in part: {'; '.join(map(str, reasons)) or 'no reason given'}"

    return [{"level": level, "descriptor": {"id": what}, "message": {"text": text(s, reasons)},
             "properties": {"surface": s}}
            for s, reasons in unchecked.items()]


def _log(rules: list[dict[str, Any]], results: list[dict[str, Any]], notes: list[dict[str, Any]],
         bag: dict[str, Any], command: str | None, bases: Mapping[str, str]) -> dict[str, Any]:
    import memkit

    invocation: dict[str, Any] = {"executionSuccessful": True, "toolExecutionNotifications": notes}
    if command:
        invocation["commandLine"] = command
    run: dict[str, Any] = {
        "tool": {"driver": {"name": "memkit", "version": memkit.__version__, "semanticVersion": memkit.__version__,
                            "informationUri": "https://arxiv.org/abs/2606.10062", "rules": rules}},
        "invocations": [invocation],
        "results": results,
        "columnKind": "unicodeCodePoints",
        "properties": {"memkit": bag},
    }
    if bases:
        run["originalUriBaseIds"] = {k: {"uri": v if v.endswith("/") else v + "/"} for k, v in bases.items()}
    return {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def residue_sarif(report: Any, secrets: Sequence[str], *, root: str | Path | None = None,
                  command: str | None = None, baseline: Any = None) -> dict[str, Any]:
    """The SARIF log of a :class:`memkit.residue.chroma.ResidueReport`.

    Args:
        report: the scan (one secret, or several with ``secret_index`` on each hit).
        secrets: the secrets scanned, in order (only their masks are written).
        root: the directory relative file locations are in (a Chroma directory, a
            PostgreSQL data directory); ``SCANROOT`` in ``originalUriBaseIds``.
        command: the command line, recorded in the invocation.
        baseline: an :class:`evaluators.report.baseline.Delta`: each result gets its
            ``baselineState`` and the bag lists what was fixed since.

    Returns:
        The SARIF document (a dict; :func:`write_sarif` writes it).
    """
    from memkit.scan.multi import mask_secret

    labels = [mask_secret(s) for s in secrets]
    groups: dict[tuple[str, int | None], list[Any]] = {}
    for surface in report.names:
        for hit in report.surfaces.get(surface, []):
            index = hit.secret_index if len(secrets) > 1 else 0
            groups.setdefault((surface, index), []).append(hit)
    with_hits = [s for s in report.names if any(k[0] == s for k in groups)]
    rules = _rules(with_hits)
    results = []
    for (surface, index), hits in groups.items():
        label = labels[index] if index is not None and index < len(labels) else "(old text, no one secret)"
        who = f"#{index + 1}" if index is not None else "unattributed"
        kinds: dict[str, int] = {}
        for h in hits:
            kinds[h.kind] = kinds.get(h.kind, 0) + 1
        text = f"{len(hits)} {'copy' if len(hits) == 1 else 'copies'} of secret {who} ({label}) remain on {surface}"
        props = {"secretIndex": index, "matchKinds": kinds}
        results.append(_result(surface, with_hits.index(surface), who, label, [h.location for h in hits],
                               len(hits), text, props))
    notes = _notifications(report.unchecked, "warning", "not_checked") + _notifications(
        {s: [] for s in report.not_given}, "note", "not_given")
    from evaluators.report.baseline import residue_snapshot

    bag = {"kind": "residue", "target": report.target, "verdict": report.verdict,
           **residue_snapshot(report).to_dict(), "secrets": labels}
    _mark(results, bag, baseline)
    bases = {"SCANROOT": Path(root).resolve().as_uri()} if root is not None and Path(root).is_dir() else {}
    return _log(rules, results, notes, bag, command, bases)


def audit_sarif(result: Any, *, command: str | None = None, baseline: Any = None) -> dict[str, Any]:
    """The SARIF log of an :class:`evaluators.audit.AuditResult`: one result per surface
    and user whose canary the surface still holds after the last scan (locations from
    the ``forensics`` records), the unchecked surfaces as notifications, and the gate
    metrics with their CIs in ``properties.memkit`` (``baseline`` as in
    :func:`residue_sarif`)."""
    from evaluators.report.baseline import audit_snapshot
    from memkit.scan.multi import mask_secret

    fr = result.forensics
    last = fr[-1]["phase"] if fr else None
    final = [f for f in fr if f["phase"] == last and f["mode"] == fr[-1]["mode"]]
    canary = {c["question_id"]: c["value"] for c in result.canaries}
    with_hits = list(dict.fromkeys(s for f in final for s, n in f["counts"].items() if n))
    rules = _rules(with_hits)
    results = []
    for f in final:
        user = f.get("user_id") or f["question_id"]
        label = mask_secret(canary.get(f["question_id"], ""))
        for surface, n in f["counts"].items():
            if not n:
                continue
            locs = (f.get("surfaces", {}).get(surface) or {}).get("locations") or []
            text = (f"{n} {'copy' if n == 1 else 'copies'} of user {user}'s canary ({label}) remain on {surface} "
                    f"of {result.target} after {'the forget' if last != 'before' else 'feeding (no forget ran)'}"
                    + ("" if last in ("before", "forget") else f" and {last}"))
            results.append(_result(surface, with_hits.index(surface), user, label, locs, int(n), text,
                                   {"user": user, "question_id": f["question_id"], "phase": last}))
    notes = _notifications(result.residue_unchecked, "warning", "not_checked")
    bag = {"kind": "audit", "target": result.target, "n": result.n, "seed": result.seed, "data": result.data,
           "phases": result.phases, **audit_snapshot(result).to_dict()}
    _mark(results, bag, baseline)
    return _log(rules, results, notes, bag, command, {})


def _mark(results: list[dict[str, Any]], bag: dict[str, Any], delta: Any) -> None:
    """Each result's ``baselineState`` (``new`` on a surface that held nothing in the
    baseline, ``updated`` where it holds more, else ``unchanged``) and the
    comparison in the bag."""
    if delta is None:
        return
    for r in results:
        s = r["ruleId"]
        r["baselineState"] = "new" if s in delta.new else "updated" if s in delta.worse else "unchanged"
    bag["baseline"] = delta.to_dict()


def write_sarif(doc: Mapping[str, Any], path: str | Path) -> None:
    """Write a SARIF document as UTF-8 JSON (two-space indent, a final newline)."""
    Path(path).write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
