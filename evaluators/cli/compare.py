"""``memkit compare RUN RUN ...``: put finished sweeps side by side."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Register ``memkit compare`` on the ``memkit`` app."""

    @app.command("compare")
    def compare_cmd(
        run_dirs: list[Path] = typer.Argument(..., help="Two or more finished sweep directories."),
        out: Path = typer.Option(Path("runs/compare"), help="Output directory."),
        unpaired: bool = typer.Option(
            False, help="Allow runs with different data, seed or canaries (independent resampling)."),
        n_resamples: int = typer.Option(1000, help="Bootstrap resamples of the differences."),
        seed: int = typer.Option(0, help="Bootstrap seed."),
    ) -> None:
        """Put finished sweeps side by side: Table 2, frontier, FRS, paired differences with CIs."""
        from evaluators.report.compare import (
            METRICS,
            UnpairedRunsError,
            ci_text,
            compare_runs,
            paired_text,
        )
        from evaluators.report.tables import signed_text

        try:
            result = compare_runs([str(d) for d in run_dirs], out, unpaired=unpaired,
                                  n_resamples=n_resamples, seed=seed)
        except (UnpairedRunsError, FileNotFoundError, ValueError) as exc:
            typer.echo(f"memkit compare: {exc}", err=True)
            raise typer.Exit(2) from exc
        typer.echo(f"memkit compare: {len(result['runs'])} runs -> {out / 'compare.md'}"
                   + ("" if result["paired"] else " (UNPAIRED resampling)"))
        for d in result["differences"]:
            level = d["S"] if "S_A" not in d else f"{d['S_A']} vs {'–' if d['S_B'] is None else d['S_B']}"
            typer.echo(f"  {d['A']} − {d['B']} S={level} ({paired_text(d)}): "
                       + ", ".join(f"Δ{m}={signed_text(d[f'{m}_diff'])}{ci_text(d[f'{m}_diff_ci'])}" for m in METRICS))
