"""The ``memkit`` command: one module per command, the library stays free of typer.

Each module here parses one command's options, calls the library and turns its
errors into one clear line and an exit status; the work itself lives in
``memkit``, ``graphs`` and ``evaluators``. Other installed packages may add
commands through the ``memkit.commands`` entry-point group (each entry names a
callable ``register(app: typer.Typer) -> None``).

| command | module | library entry point |
|---|---|---|
| ``memkit sweep`` | :mod:`evaluators.cli.sweep` | :func:`evaluators.sweep.run_sweep` |
| ``memkit report`` | :mod:`evaluators.cli.report` | :func:`evaluators.report.markdown.write_report` |
| ``memkit compare`` | :mod:`evaluators.cli.compare` | :func:`evaluators.report.compare.compare_runs` |
| ``memkit judge`` | :mod:`evaluators.cli.judge` | :func:`evaluators.scoring.judge_run.judge_run` |
| ``memkit audit`` | :mod:`evaluators.cli.audit` | :func:`evaluators.audit.audit` |
| ``memkit residue`` | :mod:`evaluators.cli.residue` | :func:`memkit.residue.chroma.scan` |

A command's module is imported only when that command runs or shows its help
(:class:`_LazyCommands`): ``memkit --help`` reads the commands' one-line help from
their source, and a command never pays for the others' imports (scikit-learn,
LangChain, torch), so help and option errors answer in a fraction of a second.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

import memkit

_INTERRUPTED = {
    "residue": "the scan stopped before its verdict; it only reads, so nothing was changed",
    "report": "the report was not finished; rerun `memkit report` on the run directory",
    "compare": "the comparison was not finished; rerun the same command",
    "judge": "the judge stopped; rerun the same command (judgements already cached are reused)",
}
"""What Ctrl-C leaves behind, per command (``sweep`` and ``audit`` say it themselves)."""


COMMANDS: dict[str, str] = {
    "residue": "evaluators.cli.residue",
    "sweep": "evaluators.cli.sweep",
    "report": "evaluators.cli.report",
    "judge": "evaluators.cli.judge",
    "compare": "evaluators.cli.compare",
    "audit": "evaluators.cli.audit",
}
"""memkit's own commands, in the order ``--help`` lists them: name -> module (each
with ``register(app)`` adding that one command)."""


def _command_doc(module: str, name: str) -> str:
    """The docstring of the function ``module`` registers as command ``name``, read
    from the module's source (nothing is imported); ``""`` when it cannot be found."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return ""
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for dec in node.decorator_list:
            if (isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute) and dec.func.attr == "command"
                    and dec.args and isinstance(dec.args[0], ast.Constant) and dec.args[0].value == name):
                return ast.get_docstring(node) or ""
    return ""


class _LazyCommands(MutableMapping[str, Any]):
    """The group's ``name -> click command`` mapping: a command is built (its module
    imported and registered on a Typer app of its own) on first access. Names are
    memkit's :data:`COMMANDS`, then those of the ``memkit.commands`` entry points (a
    name already taken is not replaced)."""

    def __init__(self, app: typer.Typer) -> None:
        self._app = app
        self._built: dict[str, Any] = {}
        self._eps: dict[str, Any] | None = None

    def _entry_points(self) -> dict[str, Any]:
        if self._eps is None:
            from importlib.metadata import entry_points  # tens of ms: only when a name is not ours

            self._eps = {ep.name: ep for ep in entry_points(group="memkit.commands") if ep.name not in COMMANDS}
        return self._eps

    def _names(self) -> list[str]:
        extra = [n for n in self._built if n not in COMMANDS]
        return list(COMMANDS) + extra + [n for n in self._entry_points() if n not in self._built]

    def loaded(self, name: str) -> bool:
        """Whether command ``name`` is already built."""
        return name in self._built

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            if name in COMMANDS:
                register = importlib.import_module(COMMANDS[name]).register
            elif name in self._entry_points():
                register = self._entry_points()[name].load()
            else:
                raise KeyError(name)
            sub = typer.Typer()
            register(sub)
            _plain_metavars(sub)
            for info in sub.registered_commands:
                cmd = typer.main.get_command_from_info(
                    info, pretty_exceptions_short=self._app.pretty_exceptions_short,
                    rich_markup_mode=self._app.rich_markup_mode)
                if cmd.name and (cmd.name == name or cmd.name not in self._built):
                    self._built.setdefault(cmd.name, cmd)
            if name not in self._built:
                raise KeyError(name)
        return self._built[name]

    def __setitem__(self, name: str, cmd: Any) -> None:
        self._built[name] = cmd

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __contains__(self, name: object) -> bool:
        return name in self._built or name in COMMANDS or name in self._entry_points()


class _LazyGroup(TyperGroup):
    """The ``memkit`` group over :class:`_LazyCommands`; its command list shows each
    command not yet built by the first sentence of its docstring (as click shortens
    it), read from the source."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _LazyCommands(app)

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        from typer._click.utils import make_default_short_help

        commands = self.commands
        rows = []
        limit = formatter.width - 6 - max((len(n) for n in commands), default=0)
        for name in self.list_commands(ctx):
            if isinstance(commands, _LazyCommands) and not commands.loaded(name) and name in COMMANDS:
                rows.append((name, make_default_short_help(_command_doc(COMMANDS[name], name), limit)))
                continue
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class _App(typer.Typer):
    """The ``memkit`` app: an operating-system error (a read-only run directory, a
    permission, a full disk) ends any command with one line and exit status 2, never
    a traceback (:func:`evaluators.cli.errors.os_error_line`); commands are built
    lazily (:class:`_LazyCommands`); third-party warnings and log lines stay off the
    terminal unless ``--verbose`` (:mod:`evaluators.cli.quiet`)."""

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
    cls=_LazyGroup,
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


if __name__ == "__main__":  # pragma: no cover
    app()
