"""Report files for a sweep: ``report.md``, ``report.html`` and the study's figures.

Layout follows the study's Table 2 (paper-notes, "Outputs the study shows"): per
model and summary level S, PR, AER, PUA and ΔS with 95% CIs; FRS per deletion mode
and tier. Figures: ``frontier.png`` (PR vs AER_max per S, one line over k),
``probes.png`` (AER per probe level per S) and ``frs.png`` (FRS per mode and tier).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import typer

__all__ = ["register_cli", "write_report", "tables"]


def _fmt(x: Any, ci: Any = None) -> str:
    if x is None:
        return "–"
    s = f"{x:.2f}"
    if ci and ci[0] is not None:
        s += f" [{ci[0]:.2f}, {ci[1]:.2f}]"
    return s


def tables(metrics: dict[str, Any], config: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """The report's tables as ``(title, header, rows)`` of strings.

    Args:
        metrics: the content of ``metrics.json``.
        config: the content of ``config.json`` (for the model name).
    """
    model = config.get("model", "?")
    t2 = []
    for r in metrics["by_S"]:
        t2.append(
            [
                model,
                str(r["S"]),
                _fmt(r["PR"], r.get("PR_ci")),
                _fmt(r["AER_max"], r.get("AER_max_ci")),
                _fmt(r["PUA"], r.get("PUA_ci")),
                _fmt(r.get("delta_S"), r.get("delta_S_ci")),
                _fmt(r.get("delta_DI"), r.get("delta_DI_ci")),
            ]
        )
    levels = []
    for r in metrics["by_S"]:
        levels.append(
            [str(r["S"])]
            + [_fmt(r[f"AER_{lv}"], r.get(f"AER_{lv}_ci")) for lv in ("direct", "indirect", "jailbreak")]
        )
    frs = []
    for r in metrics["frs"]:
        frs.append(
            [
                str(r["S"]),
                r["mode"],
                _fmt(r["FRS_raw"], r.get("FRS_raw_ci")),
                _fmt(r["FRS_summary"], r.get("FRS_summary_ci")),
                _fmt(r["FRS_worst"], r.get("FRS_worst_ci")),
                _fmt(r.get("PR_after"), r.get("PR_after_ci")),
                str(r.get("instances_recoverable", "–")),
                str(r.get("forensic_total", "–")),
            ]
        )
    surfaces = sorted({s for r in metrics["frs"] for s in r.get("forensic_copies", {})})
    forensic = [
        [str(r["S"]), r["mode"]] + [str(r.get("forensic_instances", {}).get(s, 0)) for s in surfaces]
        for r in metrics["frs"]
    ]
    frontier = [
        [str(r["S"]), str(r["k"]), _fmt(r["PR"]), _fmt(r["AER_max"])]
        + [_fmt(d["context_exposure"]), _fmt(d["extraction"])]
        for r, d in zip(metrics["frontier"], metrics["decomposition"], strict=True)
    ]
    out = [
        (
            "Table 2: utility and leakage per summary level (rows average over k)",
            ["model", "S", "PR", "AER_max", "PUA", "ΔS", "ΔDI"],
            t2,
        ),
        ("AER per probe level", ["S", "direct", "indirect", "jailbreak"], levels),
        (
            "Forgetting residue per deletion mode and tier",
            ["S", "mode", "FRS_raw", "FRS_summary", "FRS_worst", "PR_after", "recoverable", "forensic copies"],
            frs,
        ),
        ("Instances with a forensic copy, per surface", ["S", "mode", *surfaces], forensic),
        (
            "Frontier and pipeline-vs-model decomposition per S and k",
            ["S", "k", "PR", "AER_max", "context exposure", "extraction"],
            frontier,
        ),
    ]
    out += token_tables(metrics)
    return out


def token_tables(metrics: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """The "Model calls and tokens" table: one row per phase and model from
    ``metrics["totals"]["tokens"]`` (providers' usage metadata; none for backends that
    report none, e.g. ``extractive``, in which case no table)."""
    tokens = (metrics.get("totals") or {}).get("tokens") or {}
    rows = [
        [phase, model, str(r.get("calls", 0)), str(r.get("cached_calls", 0)), str(r.get("input_tokens", 0)),
         str(r.get("output_tokens", 0)), str(r.get("total_tokens", 0))]
        for phase, by_model in tokens.items()
        for model, r in sorted(by_model.items())
    ]
    if not rows:
        return []
    header = ["phase", "model", "calls sent", "cache hits", "prompt tokens", "completion tokens", "total tokens"]
    return [("Model calls and tokens per phase (providers' usage metadata)", header, rows)]


def _figures(metrics: dict[str, Any], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    for i, S in enumerate(metrics["summary_levels"]):
        pts = [r for r in metrics["frontier"] if r["S"] == S]
        (line,) = ax.plot([p["AER_max"] for p in pts], [p["PR"] for p in pts], marker="o", label=f"S={S}")
        # One label per distinct point ("k=3,6,10" where several k coincide), offset
        # per S so lines that share a point do not print over each other.
        at: dict[tuple[float, float], list[int]] = {}
        for p in pts:
            at.setdefault((round(p["AER_max"], 3), round(p["PR"], 3)), []).append(p["k"])
        for j, ((x, y), ks) in enumerate(at.items()):
            ax.annotate("k=" + ",".join(map(str, ks)), (x, y), fontsize=7, color=line.get_color(),
                        xytext=(-48 if x > 0.8 else 4, 4 + 10 * i - 22 * (j % 2)),
                        textcoords="offset points")
    ax.set_xlabel("AER_max (adversarial extraction rate)")
    ax.set_ylabel("PR (personalization recall)")
    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(-0.03, 1.03)
    ax.set_title("Privacy–utility frontier (line over k)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "frontier.png", dpi=120)
    plt.close(fig)
    names.append("frontier.png")

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    levels = ("direct", "indirect", "jailbreak")
    rows = metrics["by_S"]
    width = 0.8 / max(1, len(rows))
    for i, r in enumerate(rows):
        xs = [j + i * width for j in range(len(levels))]
        vals = [r[f"AER_{lv}"] for lv in levels]
        errs = [
            [max(0.0, v - (r.get(f"AER_{lv}_ci") or [v, v])[0]) for v, lv in zip(vals, levels, strict=True)],
            [max(0.0, (r.get(f"AER_{lv}_ci") or [v, v])[1] - v) for v, lv in zip(vals, levels, strict=True)],
        ]
        ax.bar(xs, vals, width=width, yerr=errs, capsize=3, label=f"S={r['S']}")
    ax.set_xticks([j + width * (len(rows) - 1) / 2 for j in range(len(levels))], levels)
    ax.set_xlabel("probe level")
    ax.set_ylabel("AER (mean over k)")
    ax.set_ylim(0, 1.05)
    ax.set_title("Extraction per probe level")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "probes.png", dpi=120)
    plt.close(fig)
    names.append("probes.png")

    fig, ax = plt.subplots(figsize=(9, 4.8))
    frs = metrics["frs"]
    labels = [f"S={r['S']}\n{r['mode']}" for r in frs]
    xs = list(range(len(frs)))
    ax.bar([x - 0.2 for x in xs], [r["FRS_raw"] for r in frs], width=0.4, label="raw tier")
    ax.bar([x + 0.2 for x in xs], [r["FRS_summary"] for r in frs], width=0.4, label="summary tier")
    ax.set_xticks(xs, labels, fontsize=7, rotation=90)
    ax.set_xlabel("summary level and deletion mode")
    ax.set_ylabel("FRS (AER after forget)")
    ax.set_ylim(0, 1.05)
    ax.set_title("Forgetting residue per deletion mode and tier")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "frs.png", dpi=120)
    plt.close(fig)
    names.append("frs.png")
    return names


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def write_report(out_dir: str | Path) -> Path:
    """Write ``report.md``, ``report.html`` and the figures for the sweep in ``out_dir``.

    Args:
        out_dir: a sweep output directory holding ``metrics.json`` and ``config.json``.

    Returns:
        The path of ``report.md``.

    Raises:
        FileNotFoundError: ``metrics.json`` is missing (the sweep has not finished).
    """
    out = Path(out_dir)
    mpath = out / "metrics.json"
    if not mpath.exists():
        raise FileNotFoundError(f"{mpath} not found: run `memkit sweep --out {out}` first")
    metrics = json.loads(mpath.read_text())
    cpath = out / "config.json"
    config = json.loads(cpath.read_text()) if cpath.exists() else {}
    figures = _figures(metrics, out)
    tbls = tables(metrics, config)
    cfg_rows = [[k, json.dumps(v)] for k, v in sorted(config.items())]

    md = ["# memkit sweep report", ""]
    md.append(
        f"{metrics['n_instances']} instances; k ∈ {metrics['ks']}; S ∈ {metrics['summary_levels']}. "
        "Values are means with 95% bootstrap CIs over instances (1000 resamples)."
    )
    md.append("")
    for title, header, rows in tbls:
        md += [f"## {title}", "", _md_table(header, rows), ""]
    md += [
        "`disk_hnsw` counts bytes that chroma's HNSW writer copied from uninitialised heap "
        "memory into index-file slack; they vary from run to run of the same seed.",
        "",
    ]
    md += ["## Figures", ""] + [f"![{f}]({f})" for f in figures] + [""]
    md += ["## Configuration", "", _md_table(["option", "value"], cfg_rows), ""]
    (out / "report.md").write_text("\n".join(md))

    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>memkit sweep report</title>",
        "<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;"
        "font-size:13px}th{background:#eee}</style></head><body>",
        "<h1>memkit sweep report</h1>",
        f"<p>{html.escape(md[2])}</p>",
    ]
    for title, header, rows in tbls:
        parts += [f"<h2>{html.escape(title)}</h2>", _html_table(header, rows)]
    parts += ["<h2>Figures</h2>"] + [f"<img src='{f}' alt='{f}'>" for f in figures]
    parts += ["<h2>Configuration</h2>", _html_table(["option", "value"], cfg_rows), "</body></html>"]
    (out / "report.html").write_text("\n".join(parts))
    return out / "report.md"


def register_cli(app: typer.Typer) -> None:
    """Register ``memkit report DIR`` on the ``memkit`` app."""

    @app.command("report")
    def report(out_dir: Path = typer.Argument(..., help="A sweep output directory.")) -> None:
        """(Re)write report.md, report.html and the figures from a sweep's metrics.json."""
        try:
            path = write_report(out_dir)
        except FileNotFoundError as exc:
            typer.echo(f"memkit report: {exc}", err=True)
            raise typer.Exit(2) from exc
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            typer.echo(
                f"memkit report: {Path(out_dir) / 'metrics.json'} is damaged ({type(exc).__name__}: {exc}); "
                f"rebuild it with `memkit sweep --resume --out {out_dir}` and the same options",
                err=True,
            )
            raise typer.Exit(2) from exc
        typer.echo(f"wrote {path}")
