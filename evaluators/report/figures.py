"""The report's figures: the privacy–utility frontier, AER per probe level, FRS per
deletion mode and tier, and forensic copies per surface (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evaluators.aggregate import surface_measured, surfaces_with_copies

__all__ = ["aer_queries_figure", "roc_figure", "write_figures"]


def error_bars(vals: list[float | None], cis: list[Any]) -> list[list[float]]:
    """Matplotlib's asymmetric error bars ``[[below], [above]]`` from values and CIs (0
    where a value or bound is missing)."""
    lo, hi = [], []
    for v, ci in zip(vals, cis, strict=True):
        ci = ci or [None, None]
        ok = v is not None and ci[0] is not None and ci[1] is not None
        lo.append(max(0.0, v - ci[0]) if ok else 0.0)
        hi.append(max(0.0, ci[1] - v) if ok else 0.0)
    return [lo, hi]


def _bars(ax: Any, xs: list[float], vals: list[float | None], cis: list[Any], width: float, **kw: Any) -> None:
    """Bars with 95% CI error bars; a zero-height bar gets a visible marker ("0") and a
    value that was not measured gets "n/a" instead of a bar."""
    heights = [0.0 if v is None else v for v in vals]
    bars = ax.bar(xs, heights, width=width, yerr=error_bars(vals, cis), capsize=3, **kw)
    color = bars.patches[0].get_facecolor() if bars.patches else None
    for x, v in zip(xs, vals, strict=True):
        if v is None:
            ax.text(x, 0.01, "n/a", ha="center", va="bottom", fontsize=6, rotation=90, color="0.4")
        elif v == 0:
            ax.plot([x - width / 2, x + width / 2], [0, 0], color=color, lw=3, solid_capstyle="butt")
            ax.text(x, 0.04, "0", ha="center", va="bottom", fontsize=8, fontweight="bold", color=color,
                    bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8})


def write_figures(metrics: dict[str, Any], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from adjustText import adjust_text

    names = []
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    # One label per distinct point, listing every S and k that lands there, so lines
    # that share a point print one label; adjustText moves labels off each other.
    at: dict[tuple[float, float], list[str]] = {}
    for S in metrics["summary_levels"]:
        pts = [r for r in metrics["frontier"] if r["S"] == S]
        xs = [p["AER_max"] for p in pts]
        ys = [p["PR"] for p in pts]
        xerr = error_bars(xs, [p.get("AER_max_ci") for p in pts])
        yerr = error_bars(ys, [p.get("PR_ci") for p in pts])
        ax.errorbar(xs, ys, xerr=xerr, yerr=yerr, marker="o", capsize=2, elinewidth=0.8, label=f"S={S}")
        by_pt: dict[tuple[float, float], list[int]] = {}
        for p in pts:
            by_pt.setdefault((round(p["AER_max"], 3), round(p["PR"], 3)), []).append(p["k"])
        for xy, ks in by_pt.items():
            at.setdefault(xy, []).append(f"S={S}: k=" + ",".join(map(str, ks)))
    texts = [
        ax.text(x, y, "\n".join(lab), fontsize=6.5, zorder=5,
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85})
        for (x, y), lab in at.items()
    ]
    ax.set_xlabel("AER_max (adversarial extraction rate)")
    ax.set_ylabel("PR (personalization recall)")
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(-0.05, 1.05)
    ax.set_title("Privacy–utility frontier (line over k; bars: 95% CIs)")
    ax.legend(loc="upper left", fontsize=8)
    if texts:
        px = [p["AER_max"] for p in metrics["frontier"]]
        py = [p["PR"] for p in metrics["frontier"]]
        adjust_text(texts, x=px, y=py, ax=ax, expand=(1.4, 1.8), force_text=(0.4, 0.6),
                    arrowprops={"arrowstyle": "-", "color": "0.6", "lw": 0.5})
    fig.tight_layout()
    fig.savefig(out / "frontier.png", dpi=120)
    plt.close(fig)
    names.append("frontier.png")

    fig, ax = plt.subplots(figsize=(6, 4.4))
    levels = ("direct", "indirect", "jailbreak")
    rows = metrics["by_S"]
    width = 0.8 / max(1, len(rows))
    for i, r in enumerate(rows):
        xs = [j + i * width for j in range(len(levels))]
        _bars(ax, xs, [r[f"AER_{lv}"] for lv in levels], [r.get(f"AER_{lv}_ci") for lv in levels],
              width, label=f"S={r['S']}")
        norm = [r.get(f"AER_{lv}_normalized") for lv in levels]
        if all(v is not None for v in norm):  # the leak in any spelling, beside the exact bar
            cis = [r.get(f"AER_{lv}_normalized_ci") for lv in levels]
            ax.errorbar(xs, norm, yerr=error_bars(norm, cis), fmt="D", mfc="none", color="black", ms=5,
                        capsize=2, label="normalized (any spelling)" if i == 0 else None)
    ax.set_xticks([j + width * (len(rows) - 1) / 2 for j in range(len(levels))], levels)
    ax.set_xlabel("probe level")
    ax.set_ylabel("AER (mean over k; bars exact)")
    ax.set_ylim(0, 1.1)
    ax.set_title("Extraction per probe level (bars: 95% CIs)")
    # Legend below the axes (never over a bar), S=0, S=1, ... then the normalized marker.
    handles, labs = ax.get_legend_handles_labels()
    order = sorted(range(len(labs)), key=lambda i: (not labs[i].startswith("S="), labs[i]))
    ax.legend([handles[i] for i in order], [labs[i] for i in order], fontsize=8,
              loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=min(4, len(labs)), frameon=False)
    fig.tight_layout()
    fig.savefig(out / "probes.png", dpi=120)
    plt.close(fig)
    names.append("probes.png")

    frs = metrics["frs"]
    if frs:
        fig, ax = plt.subplots(figsize=(9, 4.8))
        labels = [f"S={r['S']}\n{r['mode']}" for r in frs]
        xs = list(range(len(frs)))
        for off, tier in ((-0.2, "raw"), (0.2, "summary")):
            _bars(ax, [x + off for x in xs], [r[f"FRS_{tier}"] for r in frs],
                  [r.get(f"FRS_{tier}_ci") for r in frs], 0.4, label=f"{tier} tier")
        ax.set_xticks(xs, labels, fontsize=7, rotation=90)
        ax.set_xlabel("summary level and deletion mode")
        ax.set_ylabel("FRS (AER after forget)")
        ax.set_ylim(0, 1.1)
        ax.set_title("Forgetting residue per deletion mode and tier (bars: 95% CIs; n/a: no such tier)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "frs.png", dpi=120)
        plt.close(fig)
        names.append("frs.png")

        surfaces = surfaces_with_copies(metrics)
        if surfaces:
            import numpy as np

            # One row per (S, mode): pooling over S would hide a tier that exists only at
            # some S (no summary tier at S=0); such cells are n/a (grey), not 0%.
            share = np.ma.masked_all((len(frs), len(surfaces)))
            copies = np.zeros((len(frs), len(surfaces)))
            for i, r in enumerate(frs):
                n = int(r.get("forensic_n", 0)) or 1
                for j, s_ in enumerate(surfaces):
                    if surface_measured(r, s_):
                        share[i, j] = r.get("forensic_instances", {}).get(s_, 0) / n
                        copies[i, j] = r.get("forensic_copies", {}).get(s_, 0) / n
            cmap = matplotlib.colormaps["Reds"].with_extremes(bad="0.85")
            fig, ax = plt.subplots(figsize=(2.4 + 0.9 * len(surfaces), 1.4 + 0.32 * len(frs)))
            im = ax.imshow(share, vmin=0, vmax=1, cmap=cmap, aspect="auto")
            for i in range(len(frs)):
                for j in range(len(surfaces)):
                    if share.mask[i, j]:
                        txt, dark = "n/a", False
                    else:
                        txt, dark = f"{100 * share[i, j]:.0f}% ({copies[i, j]:.1f})", share[i, j] > 0.6
                    ax.text(j, i, txt, ha="center", va="center", fontsize=6.5, color="white" if dark else "black")
            ax.set_xticks(range(len(surfaces)), surfaces, rotation=45, ha="right", fontsize=8)
            ax.set_yticks(range(len(frs)), [f"S={r['S']} {r['mode']}" for r in frs], fontsize=7)
            ax.set_title("Forensic copies after forget: share of instances (mean copies per instance)\n"
                         "per S and mode; n/a: no such tier at this S", fontsize=9)
            fig.colorbar(im, ax=ax, label="share of instances")
            fig.tight_layout()
            fig.savefig(out / "forensic.png", dpi=120)
            plt.close(fig)
            names.append("forensic.png")
    return names


def aer_queries_figure(adversary: dict[str, Any], path: Path) -> bool:
    """AER and memory recovered against the adaptive attacker's queries 1..Q, one line
    per S and phase, 95% CI bands (``metrics["adversary"]``); ``False`` when no
    adaptive attack ran."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [s for s in adversary.get("settings", []) if s.get("adaptive")]
    if not rows:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    for n, s in enumerate(rows):
        a = s["adaptive"]
        label = ("" if s["S"] is None else f"S={s['S']} ") + ("before forget" if s["phase"] == "main"
                                                               else f"after {s['mode']}")
        qs = list(range(1, len(a["AER"]) + 1))
        for ax, key in ((axes[0], "AER"), (axes[1], "memory")):
            vals = [0.0 if v is None else v for v in a[key]]
            lo = [v if c[0] is None else c[0] for v, c in zip(vals, a[f"{key}_ci"], strict=True)]
            hi = [v if c[1] is None else c[1] for v, c in zip(vals, a[f"{key}_ci"], strict=True)]
            ax.plot(qs, vals, marker=".", color=f"C{n % 10}", linestyle="-" if s["phase"] == "main" else "--",
                    label=label)
            ax.fill_between(qs, lo, hi, color=f"C{n % 10}", alpha=0.15)
    axes[0].set_title("Canary extracted by query q (AER)")
    axes[1].set_title("Stored records recovered verbatim by query q")
    for ax in axes:
        ax.set_xlabel("adaptive queries per user (q)")
        ax.set_ylim(-0.03, 1.03)
    axes[0].set_ylabel("share of users (95% CI band)")
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def roc_figure(adversary: dict[str, Any], path: Path) -> bool:
    """The membership-inference ROC curve (combined signal) per S and phase, with the
    chance diagonal; ``False`` when no membership inference ran."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [s for s in adversary.get("settings", []) if s.get("membership")]
    if not rows:
        return False
    fig, ax = plt.subplots(figsize=(5.6, 5))
    ax.plot([0, 1], [0, 1], color="0.6", lw=0.8, linestyle=":", label="chance (AUC 0.5)")
    for n, s in enumerate(rows):
        c = s["membership"]["signals"]["combined"]
        if not c.get("fpr"):
            continue
        label = ("" if s["S"] is None else f"S={s['S']} ") + ("before forget" if s["phase"] == "main"
                                                               else f"after {s['mode']}")
        auc = "n/a" if c["AUC"] is None else f"{c['AUC']:.2f}"
        ax.plot(c["fpr"], c["tpr"], color=f"C{n % 10}", marker=".",
                linestyle="-" if s["phase"] == "main" else "--", label=f"{label} (AUC {auc})")
    ax.axvline(0.01, color="0.4", lw=0.6)
    ax.set_xlabel("false-positive rate (non-members called members)")
    ax.set_ylabel("true-positive rate (members found)")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("Membership inference ROC (combined signal; line: 1% FPR)", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True
