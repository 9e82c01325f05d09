"""Finished sweeps side by side: ``memkit compare RUN_DIR... --out DIR``.

Puts runs of different models, designs or seeds together (the study's Table 2 lists
Gemma 3 12B and GPT-4o-mini side by side; arXiv 2606.10062, the tables it shows):

* one Table 2 (a row per run and S: PR, AER_max, PUA, ΔS with the runs' own 95% CIs,
  read from each run's ``metrics.json``);
* one frontier figure (PR vs AER_max over k, a line per run and S);
* one FRS table (a row per run, S and deletion mode);
* for every pair of runs (A, B) and every S both hold, the difference A − B in PR,
  AER_max and PUA (frontier-row statistics of :mod:`evaluators.aggregate`: averages
  over the k sweep) with a 95% bootstrap CI.

**Paired** (default): the runs must share the data (same data file SHA-256, or the
same synthetic generator settings), the seed and so the canaries (every shared
instance has the same canary value). Instances both runs hold are resampled
together: one index draw per resample applied to both runs
(:func:`evaluators.scoring.metrics.bootstrap_ci` over the shared instances of the
difference statistic). Runs that differ are refused (:class:`UnpairedRunsError`)
unless ``unpaired=True`` (``--unpaired``): then each run's instances are resampled
independently (``scipy.stats.bootstrap`` with two samples, ``paired=False``,
percentile method, seeded), and the outputs say so.

Outputs in ``--out``: ``compare.json`` (every table's numbers), ``compare.md``,
``frontier.png``.
"""

from __future__ import annotations

import json
import textwrap
import warnings
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from evaluators.aggregate import Grid, row_stats
from evaluators.records import read_run
from evaluators.report.tables import md_table, signed_text, value_text
from evaluators.rundir import check_out_dir, claim_out_dir, run_kind
from evaluators.scoring.metrics import bootstrap_ci

__all__ = ["UnpairedRunsError", "compare_runs", "load_run", "paired_text"]

METRICS = ("PR", "AER_max", "PUA")
_IDENTITY_KEYS = ("data", "data_sha256", "synthetic_sessions", "synthetic_turns")


class UnpairedRunsError(ValueError):
    """Runs that do not share data, seed and canaries were given without ``unpaired``."""


def load_run(run_dir: str | Path) -> dict[str, Any]:
    """Read one finished sweep directory.

    Returns:
        ``{"dir", "config", "metrics", "records", "canaries", "design", "model", "label"}``:
        ``records`` are the main-phase call records, ``canaries`` maps question id to
        the canary value; ``label`` is ``model/design/seed<seed>``.

    Raises:
        FileNotFoundError: ``config.json``, ``results.jsonl`` or ``metrics.json`` is
            missing (the message names the file).
        ValueError: ``config.json`` or ``metrics.json`` is not JSON (file named).

    Damaged lines of ``results.jsonl`` follow :mod:`evaluators.records`' rule (their
    units are left out, with a warning naming the lines).
    """
    run = read_run(run_dir, need=("config.json", "results.jsonl", "metrics.json"), metrics=True)
    if run.bad_lines:
        warnings.warn(run.damage_note(), stacklevel=2)
    d, config, metrics = run.dir, run.config, run.metrics
    records, canaries = run.calls("main"), run.canaries()
    design = metrics.get("design") or next((r["design"] for r in records if "design" in r), None) or "study"
    model = metrics.get("model") or config.get("model", "?")
    return {
        "dir": str(d),
        "config": config,
        "metrics": metrics,
        "records": records,
        "canaries": canaries,
        "design": design,
        "model": model,
        "label": f"{model}/{design}/seed{config.get('seed', '?')}",
    }


def _grids(run: dict[str, Any], qids: list[str]) -> dict[int, Grid]:
    """Per-S grids of ``run``'s main-phase records restricted to ``qids`` (row order)."""
    qpos = {q: i for i, q in enumerate(qids)}
    ks = sorted({r["k"] for r in run["records"]}, key=lambda k: (k is None, k or 0))
    kpos = {k: j for j, k in enumerate(ks)}
    grids: dict[int | None, Grid] = {}
    for r in run["records"]:
        i = qpos.get(r["question_id"])
        if i is None:
            continue
        g = grids.setdefault(r["S"], Grid(qids, ks))
        if r["query_kind"] == "question":
            g.add_question(i, kpos[r["k"]], bool(r["correct"]))
        elif r["query_kind"] == "probe":
            exposed = r.get("context_exposed", False)
            g.add_probe(i, kpos[r["k"]], r["level"], float(r["extraction"]["exact"]),
                        None if exposed is None else bool(exposed))
    return grids


def _pairing_problems(a: dict[str, Any], b: dict[str, Any], shared: list[str]) -> list[str]:
    problems = []
    for key in _IDENTITY_KEYS:
        if a["config"].get(key) != b["config"].get(key):
            problems.append(f"{key} differs ({a['config'].get(key)!r} vs {b['config'].get(key)!r})")
    if a["config"].get("seed") != b["config"].get("seed"):
        problems.append(f"seed differs ({a['config'].get('seed')} vs {b['config'].get('seed')})")
    bad = [q for q in shared if a["canaries"].get(q) != b["canaries"].get(q)]
    if bad:
        problems.append(f"canaries differ on {len(bad)} shared instances (e.g. {bad[0]})")
    if not shared:
        problems.append("no shared instances")
    return problems


def _ci(x: tuple[float, float]) -> list[float | None]:
    return [None if not np.isfinite(v) else round(float(v), 6) for v in x]


def _level_pairs(ga: dict[Any, Grid], gb: dict[Any, Grid]) -> list[tuple[Any, Any]]:
    """The (S of A, S of B) pairs to compare: every S both runs hold; a run of a target
    without summary levels (its one level ``None``) pairs with every S of the other."""
    def order(x: Any) -> tuple[bool, int]:
        return (x is None, x or 0)

    shared = sorted(set(ga) & set(gb), key=order)
    if shared:
        return [(S, S) for S in shared]
    if list(ga) == [None]:
        return [(None, S) for S in sorted(gb, key=order)]
    if list(gb) == [None]:
        return [(S, None) for S in sorted(ga, key=order)]
    return []


def pair_differences(
    a: dict[str, Any], b: dict[str, Any], *, unpaired: bool = False, n_resamples: int = 1000, seed: int = 0
) -> list[dict[str, Any]]:
    """Differences A − B in PR, AER_max and PUA per shared S, with 95% bootstrap CIs.

    Args:
        a, b: runs from :func:`load_run`.
        unpaired: resample each run's instances independently (runs that do not
            share data, seed or canaries); otherwise both runs' shared instances
            are resampled with the same indices.
        n_resamples: bootstrap resamples (the study: 1000).
        seed: bootstrap seed.

    Returns:
        One dict per S: ``{"A", "B", "S", "paired", "n", "PR_diff", "PR_diff_ci", ...}``
        (``n`` = shared instances when paired, ``[n_A, n_B]`` otherwise; ``n_A``,
        ``n_B``: the instances each run holds, so a pairing on few of them shows).

    Raises:
        UnpairedRunsError: the runs differ in data, seed or canaries (or share no
            instance) and ``unpaired`` is False.
    """
    qa = sorted({r["question_id"] for r in a["records"]})
    qb = sorted({r["question_id"] for r in b["records"]})
    shared = sorted(set(qa) & set(qb))
    if not unpaired:
        problems = _pairing_problems(a, b, shared)
        if problems:
            raise UnpairedRunsError(
                f"{a['dir']} and {b['dir']} are not paired: {'; '.join(problems)}. "
                "Compare runs of the same data, seed and canaries, or pass --unpaired "
                "(independent resampling)"
            )
        ga, gb = _grids(a, shared), _grids(b, shared)
    else:
        ga, gb = _grids(a, qa), _grids(b, qb)
    out = []
    for sa_level, sb_level in _level_pairs(ga, gb):
        S = sa_level if sa_level is not None else sb_level
        row: dict[str, Any] = {"A": a["label"], "B": b["label"], "S": S, "paired": not unpaired,
                               "n_A": len(qa), "n_B": len(qb)}
        if sa_level != sb_level:
            row["S_A"], row["S_B"] = sa_level, sb_level
        for m in METRICS:
            if m == "PUA" and (ga[sa_level].ks == [None] or gb[sb_level].ks == [None]):
                row["PUA_diff"], row["PUA_diff_ci"] = None, [None, None]  # one point: no curve
                continue

            def sa(idx: np.ndarray, m: str = m, g: Grid = ga[sa_level]) -> float:
                return row_stats(g, np.asarray(idx, dtype=int))[m]

            def sb(idx: np.ndarray, m: str = m, g: Grid = gb[sb_level]) -> float:
                return row_stats(g, np.asarray(idx, dtype=int))[m]

            if not unpaired:
                n = len(shared)
                row["n"] = n
                row[f"{m}_diff"] = round(sa(np.arange(n)) - sb(np.arange(n)), 6)
                row[f"{m}_diff_ci"] = _ci(bootstrap_ci(
                    np.arange(n), lambda idx, sa=sa, sb=sb: sa(idx) - sb(idx), n_resamples=n_resamples, seed=seed
                ))
            else:
                from scipy.stats import bootstrap

                na, nb = len(qa), len(qb)
                row["n"] = [na, nb]
                row[f"{m}_diff"] = round(sa(np.arange(na)) - sb(np.arange(nb)), 6)
                res = bootstrap(
                    (np.arange(na), np.arange(nb)), lambda x, y, sa=sa, sb=sb: sa(x) - sb(y),
                    vectorized=False, paired=False, n_resamples=n_resamples, method="percentile",
                    random_state=np.random.default_rng(seed),
                )
                ci = res.confidence_interval
                row[f"{m}_diff_ci"] = _ci((ci.low, ci.high))
        out.append(row)
    return out








def compare_runs(
    run_dirs: list[str | Path], out: str | Path, *, unpaired: bool = False, n_resamples: int = 1000,
    seed: int = 0, labels: list[str] | None = None
) -> dict[str, Any]:
    """Write the comparison of finished runs into ``out`` (module docstring).

    Args:
        run_dirs: two or more sweep output directories.
        out: output directory (created).
        unpaired: allow runs that do not share data, seed and canaries.
        n_resamples, seed: bootstrap settings of the differences.
        labels: names for the runs (default ``model/design/seed<seed>``, with the
            directory name added where two runs would share a label).

    Returns:
        The content written to ``compare.json``: ``{"runs", "table2", "frs",
        "differences", "paired"}``.

    Raises:
        ValueError: fewer than two runs.
        UnpairedRunsError: a pair is not paired and ``unpaired`` is False (nothing is
            written).
        FileNotFoundError: a directory is not a finished sweep.
        evaluators.rundir.NotARunDirectoryError: ``out`` is a non-empty directory that is
            not a comparison (:func:`evaluators.rundir.check_out_dir`; nothing is written).
    """
    if len(run_dirs) < 2:
        raise ValueError("compare needs at least two run directories")
    check_out_dir(out, ("compare", "designs"))
    runs = [load_run(d) for d in run_dirs]
    if labels:
        for r, lab in zip(runs, labels, strict=True):
            r["label"] = lab
    seen: dict[str, int] = {}
    for r in runs:
        seen[r["label"]] = seen.get(r["label"], 0) + 1
    for r in runs:
        if seen[r["label"]] > 1:
            r["label"] += f" ({Path(r['dir']).name})"
    diffs = []
    for a, b in combinations(runs, 2):
        diffs += pair_differences(a, b, unpaired=unpaired, n_resamples=n_resamples, seed=seed)

    table2, frs = [], []
    for r in runs:
        for row in r["metrics"]["by_S"]:
            table2.append({"run": r["label"], "model": r["model"], "design": r["design"],
                           "seed": r["config"].get("seed"), **{k: row.get(k) for k in (
                               "S", "n", "PR", "PR_ci", "AER_max", "AER_max_ci", "PUA", "PUA_ci",
                               "delta_S", "delta_S_ci")}})
        for row in r["metrics"].get("frs", []):
            frs.append({"run": r["label"], **{k: row.get(k) for k in (
                "S", "mode", "FRS_raw", "FRS_raw_ci", "FRS_summary", "FRS_summary_ci", "FRS_worst",
                "FRS_worst_ci")}})
    result = {
        "runs": [{"label": r["label"], "dir": r["dir"], "model": r["model"], "design": r["design"],
                  "seed": r["config"].get("seed")} for r in runs],
        "paired": not unpaired,
        "table2": table2,
        "frs": frs,
        "differences": diffs,
    }
    adversary = _adversary_differences(runs, unpaired, n_resamples, seed)
    if adversary:
        result["adversary_differences"] = adversary
    out = Path(out)
    if run_kind(out) != "designs":
        claim_out_dir(out, "compare")
    (out / "compare.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    _frontier_figure(runs, out / "frontier.png")
    (out / "compare.md").write_text(_markdown(result))
    return result


def _adversary_differences(runs: list[dict[str, Any]], unpaired: bool, n_resamples: int,
                           seed: int) -> list[dict[str, Any]]:
    """For each pair of runs that both ran the adversary, the paired differences A − B
    (:func:`evaluators.adversary.metrics.paired_adversary`); none when unpaired."""
    from evaluators.adversary.metrics import paired_adversary

    out = []
    for a, b in combinations(runs, 2):
        if unpaired or not (a["metrics"].get("adversary") and b["metrics"].get("adversary")):
            continue
        shared = sorted({r["question_id"] for r in a["records"]} & {r["question_id"] for r in b["records"]})
        for row in paired_adversary(a["records"], b["records"], shared, n_resamples=n_resamples, seed=seed):
            out.append({"A": a["label"], "B": b["label"], **row})
    return out


def paired_text(d: dict[str, Any]) -> str:
    """How many instances a difference row rests on, in words: ``"paired on 4 of 20 (A) and
    20 (B) instances"``, or ``"unpaired: 20 (A) and 18 (B) instances"``."""
    n_a, n_b = d.get("n_A"), d.get("n_B")
    if d.get("paired", True):
        if n_a is None:
            return f"paired on {d['n']} instances"
        return f"paired on {d['n']} of {n_a} (A) and {n_b} (B) instances"
    na, nb = d["n"] if isinstance(d["n"], list) else (n_a, n_b)
    return f"unpaired: {na} (A) and {nb} (B) instances"


def _level(S: int | None) -> str:
    return "–" if S is None else str(S)


def _markdown(result: dict[str, Any]) -> str:
    t2 = [[r["run"], r["model"], r["design"], str(r["seed"]), _level(r["S"]), value_text(r["PR"], r["PR_ci"]),
           value_text(r["AER_max"], r["AER_max_ci"]), value_text(r["PUA"], r["PUA_ci"]),
           value_text(r["delta_S"], r["delta_S_ci"])] for r in result["table2"]]
    frs = [[r["run"], _level(r["S"]), r["mode"], value_text(r["FRS_raw"], r["FRS_raw_ci"], na="n/a"),
            value_text(r["FRS_summary"], r["FRS_summary_ci"], na="n/a"),
            value_text(r["FRS_worst"], r["FRS_worst_ci"], na="n/a")]
           for r in result["frs"]]
    how = ("paired bootstrap over the instances both runs share (same indices for both runs)"
           if result["paired"] else
           "UNPAIRED: the runs do not share data, seed or canaries; each run's instances are "
           "resampled independently")
    diffs = []
    for d in result["differences"]:
        level = str(d["S"]) if "S_A" not in d else f"{_level(d['S_A'])} vs {_level(d['S_B'])}"
        diffs.append([d["A"], d["B"], level, paired_text(d)]
                     + [value_text(d[f"{m}_diff"], signed=True) + ci_text(d[f"{m}_diff_ci"]) for m in METRICS])
    parts = [
        "# memkit compare", "",
        "Runs: " + ", ".join(f"`{r['label']}` ({r['dir']})" for r in result["runs"]), "",
        "## Table 2 (per model, design, S; 95% CIs)", "",
        md_table(["run", "model", "design", "seed", "S", "PR", "AER_max", "PUA", "ΔS"], t2), "",
        "## Differences A − B (95% bootstrap CIs)", "", f"CIs: {how}.", "",
        md_table(["A", "B", "S", "instances", "ΔPR", "ΔAER_max", "ΔPUA"], diffs), "",
        *_adversary_markdown(result.get("adversary_differences") or []),
        "## FRS per deletion mode and tier", "",
        md_table(["run", "S", "mode", "FRS_raw", "FRS_summary", "FRS_worst"], frs), "",
        "`FRS_t`: AER_max with retrieval restricted to tier t after the forget (mean over k, "
        "95% CIs); n/a: not measured, the design has no such tier at this S (e.g. no summary "
        "tier at S=0).", "",
        "![frontier](frontier.png)", "",
    ]
    return "\n".join(parts)


def _adversary_markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The adversary's paired differences as a markdown table (none: no lines)."""
    if not rows:
        return []
    cols = [("AER_study_diff", "ΔAER study"), ("AER_library_diff", "ΔAER library"), ("AER_user_diff", "ΔAER user"),
            ("AER_adaptive_diff", "ΔAER adaptive"), ("memory_adaptive_diff", "Δrecovered"), ("AUC_diff", "ΔAUC")]
    cols = [c for c in cols if any(c[0] in r for r in rows)]
    table = [[r["A"], r["B"], _level(r["S"]) if "S_A" not in r else f"{_level(r['S_A'])} vs {_level(r['S_B'])}",
              str(r["n"])]
             + [value_text(r.get(key), signed=True) + ci_text(r.get(f"{key}_ci") or []) for key, _ in cols]
             for r in rows]
    return ["## The adversary: differences A − B (paired, 95% bootstrap CIs)", "",
            md_table(["A", "B", "S", "instances", *(name for _, name in cols)], table), "",
            "Before the forget: AER of each probe set (any probe), the adaptive attacker's AER and records "
            "recovered at its last query, and the membership AUC (combined signal); the same instances resampled "
            "for both runs.", ""]


def ci_text(ci: list[Any]) -> str:
    return f" [{signed_text(ci[0])}, {signed_text(ci[1])}]" if ci and ci[0] is not None else ""


def _frontier_figure(runs: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from evaluators.report.figures import error_bars

    fig, ax = plt.subplots(figsize=(7, 5.2))
    markers = "osD^v<>P"
    # Each run gets its own marker and a small horizontal offset so that runs with
    # identical values do not hide each other; identical lines are also named in a note.
    step = 0.012
    seen: dict[tuple, str] = {}
    same: list[str] = []
    for i, r in enumerate(runs):
        dx = (i - (len(runs) - 1) / 2) * step
        levels = r["metrics"].get("summary_levels", [])
        for j, S in enumerate(levels):
            pts = [p for p in r["metrics"].get("frontier", []) if p["S"] == S]
            if not pts:
                continue
            xs = [p["AER_max"] for p in pts]
            ys = [p["PR"] for p in pts]
            key = (S, tuple(round(v, 4) for v in xs + ys))
            if key in seen:
                same.append(f"{r['label']} = {seen[key]} at S={S}")
            else:
                seen[key] = r["label"]
            ax.errorbar([x + dx for x in xs], ys, xerr=error_bars(xs, [p.get("AER_max_ci") for p in pts]),
                        yerr=error_bars(ys, [p.get("PR_ci") for p in pts]), marker=markers[i % len(markers)],
                        color=f"C{(i * len(levels) + j) % 10}", linestyle=("-", "--", ":")[j % 3], capsize=2,
                        elinewidth=0.7, ms=5, mfc="none" if i % 2 else None, label=f"{r['label']} S={S}")
    note = f"runs offset by {step:g} in AER_max so overlapping lines stay visible; bars: 95% CIs"
    if same:
        note += "\n" + textwrap.fill("identical lines: " + "; ".join(same), 130)
    fig.text(0.01, 0.01, note, fontsize=6.5, color="0.3", va="bottom")
    ax.set_xlabel("AER_max (adversarial extraction)")
    ax.set_ylabel("PR (personalization recall)")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("Privacy–utility frontier over k, per run and S")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    fig.tight_layout(rect=(0, 0.03 + 0.025 * note.count("\n"), 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
