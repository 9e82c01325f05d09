"""Placeholder until its issue lands."""

import typer


def register_cli(app: typer.Typer) -> None:
    """Register the `report` subcommand on the `memkit` app."""

    @app.command("report")
    def _stub() -> None:
        """Not implemented yet."""
        typer.echo("memkit report: not implemented yet")
        raise typer.Exit(2)
