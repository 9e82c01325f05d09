"""Placeholder until its issue lands."""

import typer


def register_cli(app: typer.Typer) -> None:
    """Register the `sweep` subcommand on the `memkit` app."""

    @app.command("sweep")
    def _stub() -> None:
        """Not implemented yet."""
        typer.echo("memkit sweep: not implemented yet")
        raise typer.Exit(2)
