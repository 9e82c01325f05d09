"""The ``memkit`` command.

``memkit`` itself defines the commands that need only library primitives
(``residue``). Commands that live higher in the dependency chain (``sweep``,
``report``) are registered by their packages through the ``memkit.commands``
entry-point group, so ``memkit`` never imports ``graphs`` or ``evaluators``.
"""

from __future__ import annotations

from importlib.metadata import entry_points

import typer

import memkit

app = typer.Typer(
    name="memkit",
    help="Audit the memory of LLM agents for privacy (PR, AER, PUA, FRS).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"memkit {memkit.__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Audit the memory of LLM agents for privacy."""


def _register_plugins() -> None:
    """Attach commands that other installed packages register under ``memkit.commands``.

    Each entry point names a callable ``register(app: typer.Typer) -> None``.
    """
    for ep in entry_points(group="memkit.commands"):
        ep.load()(app)


_register_plugins()

if __name__ == "__main__":  # pragma: no cover
    app()
