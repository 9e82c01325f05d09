"""``memkit sweep``."""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError

from evaluators.pool import WorkerDied
from evaluators.sweep import RESULTS, SweepConfig, SweepLockedError, run_sweep
from graphs.forget import DELETION_MODES

# --------------------------------------------------------------------------- CLI


def _int_list(text: str, name: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise typer.BadParameter(f"{name} takes comma-separated integers, got {text!r}") from exc


_OPTION_NAMES = {"ks": "--k", "n": "--n", "summary_levels": "--summary-levels", "data": "--data",
                 "deletion_modes": "--deletion-modes", "workers": "--workers",
                 "n_resamples": "--n-resamples", "max_tokens": "--max-tokens"}


def _n_option(text: str) -> int | None:
    if text.strip().lower() == "all":
        return None
    try:
        return int(text)
    except ValueError as exc:
        raise typer.BadParameter(f"takes a positive integer or 'all', got {text!r}") from exc


def register(app: typer.Typer) -> None:
    """Register ``memkit sweep`` on the ``memkit`` app."""

    @app.command("sweep")
    def sweep_cmd(
        data: str = typer.Option("synthetic", help="LongMemEval JSON file, or 'synthetic'."),
        n: str = typer.Option("20", help="Instances (sampled with --seed, stratified by type), or 'all'."),
        seed: int = typer.Option(0, help="Seed for sampling, synthetic data, canaries and CIs."),
        model: str = typer.Option("extractive", help="Responder model spec."),
        summarizer_model: str | None = typer.Option(None, help="Summarizer model spec (default: --model)."),
        base_url: str | None = typer.Option(
            None, help="Server URL for openai:/ollama: models (default: OPENAI_BASE_URL / OLLAMA_HOST)."),
        api_key_env: str | None = typer.Option(
            None, help="Environment variable holding the API key (default: the provider's, e.g. OPENAI_API_KEY)."),
        summary_levels: str = typer.Option("0,1,2", help="Summary levels S, comma-separated."),
        k: str = typer.Option("1,3,6,10,25", "--k", help="Retrieval breadths, comma-separated."),
        deletion_modes: str = typer.Option(",".join(DELETION_MODES), help="Deletion modes ('' for none)."),
        workers: int = typer.Option(1, help="Parallel worker processes."),
        concurrency: int | None = typer.Option(
            None, help="Model calls in flight per worker (default: 8 for remote APIs, 4 for "
                       "ollama:, 1 for extractive/llamacpp:)."),
        rps: float | None = typer.Option(None, help="Cap on model requests per second per worker."),
        executor: str = typer.Option(
            "local", help="'local' (--workers processes here) or 'ray' (units as Ray tasks)."),
        ray_address: str | None = typer.Option(
            None, help="Ray cluster to join with --executor ray (default: RAY_ADDRESS, else a local Ray)."),
        out: Path = typer.Option(Path("runs/sweep"), help="Output directory."),
        resume: bool = typer.Option(False, help="Continue a killed sweep in --out."),
        keep_stores: bool = typer.Option(
            False, help="Keep each deletion mode's forgotten store under OUT/stores for `memkit residue`."),
        max_tokens: int | None = typer.Option(None, help="Cap on tokens per LLM call."),
        n_resamples: int = typer.Option(1000, help="Bootstrap resamples for CIs."),
        quiet: bool = typer.Option(False, help="No progress bar."),
        design: list[str] | None = typer.Option(
            None, "--design",
            help="Memory design: study, mmr, redacting or module:factory (repeatable; several run "
                 "into OUT/<name> and are compared). Default: study."),
    ) -> None:
        """Run the full-factorial LongMemEval sweep and write results, metrics and a report."""
        from memkit.longmemeval import LongMemEvalError
        from memkit.models import ModelSpecError

        try:
            config = SweepConfig(
                data=data,
                n=_n_option(n),
                seed=seed,
                model=model,
                summarizer_model=summarizer_model,
                base_url=base_url,
                api_key_env=api_key_env,
                summary_levels=_int_list(summary_levels, "--summary-levels"),
                ks=_int_list(k, "--k"),
                deletion_modes=[m.strip() for m in deletion_modes.split(",") if m.strip()],
                workers=workers,
                concurrency=concurrency,
                rps=rps,
                executor=executor,
                ray_address=ray_address,
                keep_stores=keep_stores,
                max_tokens=max_tokens,
                n_resamples=n_resamples,
            )
        except ValidationError as exc:
            for err in exc.errors():
                field = str(err["loc"][0]) if err["loc"] else ""
                option = _OPTION_NAMES.get(field, "--" + field.replace("_", "-"))
                msg = str(err["msg"]).removeprefix("Value error, ")
                typer.echo(f"memkit sweep: {option}: {msg}", err=True)
            raise typer.Exit(2) from exc
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.showwarning = _echo_warning
                metrics = run_sweep(config, out, resume=resume, progress=not quiet, designs=design or None)
        except WorkerDied as exc:
            typer.echo(
                f"memkit sweep: {exc}. The units finished before it are kept in {out / RESULTS}; "
                f"fix the cause, then rerun the same command with --resume to go on.",
                err=True,
            )
            raise typer.Exit(3) from exc
        except LongMemEvalError as exc:
            typer.echo(f"memkit sweep: --data: {exc}", err=True)
            raise typer.Exit(2) from exc
        except ModelSpecError as exc:
            typer.echo(f"memkit sweep: --model: {exc}", err=True)
            raise typer.Exit(2) from exc
        except (SweepLockedError, OSError, ValueError) as exc:
            typer.echo(f"memkit sweep: {exc}", err=True)
            raise typer.Exit(2) from exc
        dt = time.perf_counter() - t0
        by_design = metrics["designs"] if "designs" in metrics else {metrics.get("design", "study"): metrics}
        units = sum(m["totals"]["units"] for m in by_design.values())
        typer.echo(f"memkit sweep: {units} units in {dt:.1f} s -> {out}")
        for name, m in by_design.items():
            for row in m["by_S"]:
                typer.echo(
                    f"  {name} S={row['S']}: PR={row['PR']:.2f} AER_max={row['AER_max']:.2f} PUA={row['PUA']:.2f}"
                )
        typer.echo(f"  report: {out / ('compare.md' if 'designs' in metrics else 'report.md')}")
        from evaluators.report import canary_sentence, hypotheses_with_canaries

        for run_dir in ([out / name for name in by_design] if "designs" in metrics else [out]):
            line = canary_sentence(hypotheses_with_canaries(run_dir))
            if line:
                typer.echo(f"  {run_dir.name}: " + line.replace("**", ""))
        if config.keep_stores:
            typer.echo(f"  forgotten stores: {out / 'stores'} (scan one with `memkit residue DIR/chroma SECRET`)")


def _echo_warning(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
                  line: Any = None) -> None:
    typer.echo(f"memkit sweep: note: {message}", err=True)
