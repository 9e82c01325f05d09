"""The ``memkit`` command: one module per command, the library stays free of typer.

Each module here parses one command's options, calls the library and turns its
errors into one clear line and an exit status; the work itself lives in
``memkit``, ``graphs`` and ``evaluators``. Other installed packages may add
commands through the ``memkit.commands`` entry-point group (each entry names a
callable ``register(app: typer.Typer) -> None``).

| command | module | library entry point |
|---|---|---|
| ``memkit sweep`` | :mod:`evaluators.cli.sweep` | :func:`evaluators.sweep.run_sweep` |
| ``memkit report`` | :mod:`evaluators.cli.report` | :func:`evaluators.report.write_report` |
| ``memkit compare`` | :mod:`evaluators.cli.compare` | :func:`evaluators.compare.compare_runs` |
| ``memkit judge`` | :mod:`evaluators.cli.judge` | :func:`evaluators.judge_run.judge_run` |
| ``memkit audit`` | :mod:`evaluators.cli.audit` | :func:`evaluators.audit.audit` |
| ``memkit residue`` | :mod:`evaluators.cli.residue` | :func:`memkit.residue.scan` |
"""

from __future__ import annotations

import sys
from importlib.metadata import entry_points
from typing import Any

import typer

import memkit

_INTERRUPTED = {
    "residue": "the scan stopped before its verdict; it only reads, so nothing was changed",
    "report": "the report was not finished; rerun `memkit report` on the run directory",
    "compare": "the comparison was not finished; rerun the same command",
    "judge": "the judge stopped; rerun the same command (judgements already cached are reused)",
}
"""What Ctrl-C leaves behind, per command (``sweep`` and ``audit`` say it themselves)."""


class _App(typer.Typer):
    """The ``memkit`` app: an operating-system error (a read-only run directory, a
    permission, a full disk) ends any command with one line and exit status 2, never
    a traceback (:func:`evaluators.cli.errors.os_error_line`); third-party warnings and
    log lines stay off the terminal unless ``--verbose`` (:mod:`evaluators.cli.quiet`)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from evaluators.cli.quiet import quiet, wants_verbose

        argv = kwargs.get("args") or (args[0] if args else None) or sys.argv[1:]
        try:
            with quiet(wants_verbose(list(argv))):
                return super().__call__(*args, **kwargs)
        except KeyboardInterrupt:
            command = next((a for a in sys.argv[1:] if not a.startswith("-")), "")
            what = _INTERRUPTED.get(command, "stopped; nothing it was writing is complete")
            sys.stderr.write(f"\nmemkit {command}: interrupted (Ctrl-C): {what}\n".replace("memkit : ", "memkit: "))
            raise SystemExit(130) from None
        except OSError as exc:
            from evaluators.cli.errors import os_error_line

            command = next((a for a in sys.argv[1:] if not a.startswith("-")), "")
            sys.stderr.write(f"memkit {command}: {os_error_line(exc)}\n".replace("memkit : ", "memkit: "))
            raise SystemExit(2) from None


app = _App(
    name="memkit",
    help="Audit the memory of LLM agents for privacy (PR, AER, PUA, FRS).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,  # plain click help: wrapped to the terminal, never cut, no <bool> metavars
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
    verbose: bool = typer.Option(
        False, "--verbose", help="Let other libraries' warnings, log lines and progress bars through "
                                 "(also MEMKIT_VERBOSE=1)."
    ),
) -> None:
    """Audit the memory of LLM agents for privacy."""


def _register() -> None:
    """Attach memkit's own commands, then those other packages register under
    ``memkit.commands`` (a name already taken is not replaced)."""
    from evaluators.cli import audit, compare, judge, report, residue, sweep

    for register in (residue.register, sweep.register, report.register,
                     judge.register, compare.register, audit.register):
        register(app)
    taken = {c.name for c in app.registered_commands}
    for ep in entry_points(group="memkit.commands"):
        if ep.name not in taken:
            ep.load()(app)


def _plain_metavars(app: typer.Typer) -> None:
    """Give every option and argument without a metavar a plain one (``TEXT``, ``N``,
    ``PATH``, ``RUN_DIRS...``) so ``--help`` shows no ``<str>``/``<list[Path]>``/``{out_dir}``
    artefacts of typer's generated names."""
    import inspect
    import typing
    from pathlib import Path

    from typer.models import ArgumentInfo, OptionInfo

    def name_for(tp: Any) -> str:
        origin = typing.get_origin(tp)
        if origin in (list, tuple):
            return name_for(typing.get_args(tp)[0])
        if origin is not None:  # Optional[X] / X | None
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            return name_for(args[0]) if args else "TEXT"
        return {int: "N", float: "X", Path: "PATH", str: "TEXT"}.get(tp, "VALUE")

    from typer.core import TyperCommand

    class _Command(TyperCommand):
        """Usage line and argument list in click's plain style (``RUN_DIR``, not typer's
        ``{RUN_DIR}`` and ``RUN_DIR <path>``)."""

        def __init__(self, *args: Any, **kw: Any) -> None:
            super().__init__(*args, **kw)
            for param in self.params:  # no "<list[Path]>" type label after an argument
                if param.param_type_name == "argument":
                    param.display_type_rich = lambda ctx: None  # type: ignore[method-assign]

        def collect_usage_pieces(self, ctx: Any) -> list[str]:
            return [p.replace("{", "").replace("}", "") for p in super().collect_usage_pieces(ctx)]

    for cmd in app.registered_commands:
        if cmd.cls in (None, TyperCommand):
            cmd.cls = _Command
        if cmd.callback is None:
            continue
        hints = typing.get_type_hints(cmd.callback)
        for pname, param in inspect.signature(cmd.callback).parameters.items():
            info = param.default
            tp = hints.get(pname)
            if not isinstance(info, (ArgumentInfo, OptionInfo)) or info.metavar or tp is bool:
                continue
            if isinstance(info, ArgumentInfo):
                info.metavar = pname.upper()
            else:
                info.metavar = name_for(tp)


_register()
_plain_metavars(app)

if __name__ == "__main__":  # pragma: no cover
    app()
