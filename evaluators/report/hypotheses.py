"""Planted canaries in a run's hypotheses files: count the answers that hold one, and
mask them before the files go to LongMemEval's scorer (``memkit report
--redact-hypotheses``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evaluators.records import read_run

__all__ = ["HypothesesCounts", "canary_sentence", "hypotheses_with_canaries"]


def _planted_canaries(out: Path) -> dict[str, set[str]]:
    """The canary planted in each instance, from the ``canary`` records of ``results.jsonl``."""
    found: dict[str, set[str]] = {}
    if not (out / "results.jsonl").exists():
        return found
    # Damaged lines: evaluators.records' rule (their units are left out; the report says so).
    for rec in read_run(out, need=("results.jsonl",)).records:
        if rec["type"] == "canary":
            found.setdefault(str(rec["question_id"]), set()).add(rec["value"])
    return found


class HypothesesCounts(dict):
    """``{relative path: (answers with a canary, answers)}`` per hypotheses file, with
    ``copy_of``: the file ``hypotheses.jsonl`` is a byte-for-byte copy of (the sweep
    writes it from ``hypotheses/S{S0}_k{k_max}.jsonl``, the first S and the largest k,
    and that file is named when it matches), or ``None``; and ``same_as``: for each
    file byte-identical to an earlier one, that earlier file (so totals count each
    distinct file once)."""

    copy_of: str | None = None
    same_as: dict[str, str]

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.same_as = {}


def _source_name(out: Path) -> str | None:
    """``hypotheses/S{S0}_k{k_max}.jsonl`` from the run's ``config.json`` (the file the sweep
    copies to ``hypotheses.jsonl``), or ``None`` without a readable config."""
    try:
        cfg = json.loads((out / "config.json").read_text())
        if cfg.get("target"):  # a target's knobs are in its records: the first cell written
            files = sorted((out / "hypotheses").glob("*.jsonl"), key=_sk_key)
            return f"hypotheses/{files[0].name}" if files else None
        return f"hypotheses/S{min(cfg['summary_levels'])}_k{max(cfg['ks'])}.jsonl"
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _sk_key(p: Path) -> tuple[int, int, str]:
    """Sort ``S{S}_k{k}.jsonl`` by S then k as numbers (k10 after k3)."""
    try:
        s_part, k_part = p.stem.split("_k")
        return int(s_part.removeprefix("S")), int(k_part), p.name
    except ValueError:
        return 1 << 30, 1 << 30, p.name


def hypotheses_with_canaries(out_dir: str | Path, *, redact: bool = False) -> HypothesesCounts:
    """Count (and optionally mask) answers in ``hypotheses*.jsonl`` holding a planted canary.

    A hypothesis holds a canary when :func:`memkit.scan.matching.contains_secret` finds any
    canary planted in the run (the ``canary`` records of ``results.jsonl``) in it, in
    any spelling the matcher covers. Such a file sent to a scorer sends it the planted
    secrets.

    Args:
        out_dir: a sweep output directory (``results.jsonl``, ``hypotheses.jsonl``,
            ``hypotheses/S{S}_k{k}.jsonl``).
        redact: rewrite each file with every copy of the canary masked
            (:func:`memkit.scan.matching.redact_text`); the counts are those before masking.

    Returns:
        ``{relative path: (answers with a canary, answers)}`` for every hypotheses file
        (a :class:`HypothesesCounts`, whose ``copy_of`` names the file that
        ``hypotheses.jsonl`` copies, so that totals count each distinct file once).

    Raises:
        ValueError: a hypotheses line that is not ``{"question_id", "hypothesis"}`` JSON
            (the message names the file and line).
    """
    from memkit.scan.matching import matcher, redact_json

    out = Path(out_dir)
    # Every planted canary, not only the answer's own instance's: a planted secret sent
    # to a scorer is one too many, whichever instance it came from.
    planted = sorted({c for cs in _planted_canaries(out).values() for c in cs})
    # each matcher compiled once and held (matcher()'s cache keeps 256 secrets, fewer
    # than a large sweep's canaries); each distinct answer tested once (the k files
    # repeat answers)
    matchers = [(c, matcher(c)) for c in planted]
    found: dict[str, list[str]] = {}

    def secrets_in(hyp: Any) -> list[str]:
        key = hyp if isinstance(hyp, str) else json.dumps(hyp, sort_keys=True, ensure_ascii=False)
        if key not in found:
            found[key] = [c for c, m in matchers if m.contains(hyp)]
        return found[key]

    per_sk = sorted((out / "hypotheses").glob("*.jsonl"), key=_sk_key)
    source = _source_name(out)
    if source and (out / source).exists():  # the file the sweep copied first, so it is named
        per_sk.sort(key=lambda p: str(p.relative_to(out)) != source)
    files = per_sk + sorted(out.glob("hypotheses*.jsonl"))
    counts = HypothesesCounts()
    first_with: dict[bytes, str] = {}
    for path in files:
        rel = str(path.relative_to(out))
        body = path.read_bytes()
        if body in first_with:
            counts.same_as[rel] = first_with[body]
        else:
            first_with[body] = rel
    counts.copy_of = counts.same_as.get("hypotheses.jsonl")
    for path in files:
        lines = path.read_text(encoding="utf-8").splitlines()
        hit = total = 0
        new_lines = []
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                rec["question_id"]  # noqa: B018 -- required field
                hyp = rec["hypothesis"]
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(
                    f"{path}:{lineno}: not a hypothesis record {{question_id, hypothesis}} ({exc})"
                ) from exc
            total += 1
            secrets = secrets_in(hyp)
            if secrets:
                hit += 1
                if redact:
                    for c in secrets:
                        hyp = redact_json(hyp, c)
                    rec["hypothesis"] = hyp
            new_lines.append(json.dumps(rec, ensure_ascii=False))
        if redact and hit:
            path.write_text("\n".join(new_lines) + "\n", encoding="utf-8")
        counts[str(path.relative_to(out))] = (hit, total)
    return counts


def canary_sentence(counts: dict[str, tuple[int, int]], redacted: bool = False) -> str | None:
    """One sentence on hypotheses holding a planted canary (``None`` if there are no files)."""
    if not counts:
        return None
    copy_of = getattr(counts, "copy_of", None)
    same_as = getattr(counts, "same_as", {}) or ({"hypotheses.jsonl": copy_of} if copy_of else {})
    # Each distinct answer file once: a byte-identical file (hypotheses.jsonl is a copy
    # of ``copy_of``; the k files often repeat each other) adds nothing.
    distinct = {p: c for p, c in counts.items() if p not in same_as}
    hit = sum(h for h, _ in distinct.values())
    total = sum(t for _, t in distinct.values())
    nfiles = f"{len(distinct)} distinct hypotheses file{'s' if len(distinct) != 1 else ''}"
    main = counts.get("hypotheses.jsonl")
    head = ""
    if main:
        head = f"{main[0]} of {main[1]} answers in `hypotheses.jsonl`"
        head += f" (a copy of `{copy_of}`, counted once), " if copy_of else ", "
    if hit == 0:
        copy = (f" `hypotheses.jsonl` is a copy of `{copy_of}` (the first S and the largest k), "
                "counted once.") if copy_of else ""
        return f"No answer in the {nfiles} ({total} answers) contains a planted canary.{copy}"
    if redacted:
        return (f"{head}{hit} of {total} answers over the {nfiles} contained a planted canary; "
                "they have been masked (`--redact-hypotheses`).")
    return (f"**{head}{hit} of {total} answers over the {nfiles} contain a planted canary.** "
            "Sending them to a scorer sends it the planted secrets; mask them with "
            "`memkit report DIR --redact-hypotheses`.")
