"""``memkit report DIR``: rewrite a run's report and figures."""

from __future__ import annotations

from pathlib import Path

import typer

from evaluators.cli.errors import os_error_line


def register(app: typer.Typer) -> None:
    """Register ``memkit report DIR`` on the ``memkit`` app."""

    @app.command("report")
    def report(
        out_dir: Path = typer.Argument(..., help="A sweep output directory."),
        redact_hypotheses: bool = typer.Option(
            False, help="Mask planted canaries in hypotheses*.jsonl before anything reads them."),
    ) -> None:
        """(Re)write report.md, report.html and the figures from a sweep's metrics.json."""
        from evaluators.report.markdown import (
            canary_sentence,
            hypotheses_with_canaries,
            write_report,
        )
        from evaluators.rundir import NotARunDirectoryError, require_run

        try:
            require_run(out_dir, "sweep")
        except (FileNotFoundError, NotARunDirectoryError) as exc:
            typer.echo(f"memkit report: {exc}", err=True)
            raise typer.Exit(2) from exc
        try:
            path = write_report(out_dir, redact_hypotheses=redact_hypotheses)
        except FileNotFoundError as exc:
            typer.echo(f"memkit report: {exc}", err=True)
            raise typer.Exit(2) from exc
        except OSError as exc:
            typer.echo(f"memkit report: {os_error_line(exc)}", err=True)
            raise typer.Exit(2) from exc
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            typer.echo(
                f"memkit report: {Path(out_dir) / 'metrics.json'} is damaged ({type(exc).__name__}: {exc}); "
                f"rebuild it with `memkit sweep --resume --out {out_dir}` and the same options",
                err=True,
            )
            raise typer.Exit(2) from exc
        typer.echo(f"wrote {path}")
        line = canary_sentence(hypotheses_with_canaries(out_dir), redacted=False)
        if line:
            typer.echo(line.replace("**", ""))
