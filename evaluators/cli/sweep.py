"""``memkit sweep``."""

from __future__ import annotations

import os
import shlex
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError

from evaluators.cli.errors import os_error_line
from evaluators.pool import WorkerDied
from evaluators.sweep import RESULTS, SweepConfig, SweepLockedError, run_sweep
from graphs.forget import DELETION_MODES, STUDY_MODES

# --------------------------------------------------------------------------- CLI


class _OptionError(ValueError):
    """A command-line value that cannot be meant (the message names the option)."""


def _int_list(text: str, name: str) -> list[int]:
    """``"1,3,6"`` -> ``[1, 3, 6]``; an empty item or a non-integer is refused, and a
    list that is not ascending and distinct is normalised with a note on stderr."""
    items = [x.strip() for x in text.split(",")]
    if any(not x for x in items):
        raise _OptionError(f"{name} {text!r} has an empty item; give comma-separated integers such as 1,3,6")
    try:
        values = [int(x) for x in items]
    except ValueError as exc:
        raise _OptionError(f"{name} takes comma-separated integers, got {text!r}") from exc
    norm = sorted(set(values))
    if norm != values:
        typer.echo(f"memkit sweep: note: {name} {text} runs as {','.join(map(str, norm))} "
                   "(ascending, duplicates dropped)", err=True)
    return norm


_OPTION_NAMES = {"ks": "--k", "n": "--n", "summary_levels": "--summary-levels", "data": "--data",
                 "deletion_modes": "--deletion-modes", "workers": "--workers",
                 "n_resamples": "--n-resamples", "max_tokens": "--max-tokens", "probes": "--probes",
                 "attack_budget": "--attack-budget", "attacker_model": "--attacker-model"}


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
        deletion_modes: str = typer.Option(
            ",".join(STUDY_MODES), show_default="the study's five",
            help=f"Deletion modes, comma-separated ('' for none): {', '.join(DELETION_MODES)} "
                 "(crypto_shred runs when named)."),
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
        max_tokens: int | None = typer.Option(
            None, help="Cap on generated tokens per LLM call (default: the backend's default cap, "
                       "memkit.models.chat.DEFAULT_MAX_TOKENS)."),
        redact_hypotheses: bool = typer.Option(
            False, help="Mask planted canaries in hypotheses*.jsonl; recorded in the run and kept by "
                        "later sweeps, --resume and `memkit report`."),
        n_resamples: int = typer.Option(1000, help="Bootstrap resamples for CIs."),
        quiet: bool = typer.Option(False, help="No progress bar."),
        design: list[str] | None = typer.Option(
            None, "--design",
            help="Memory design: study, mmr, redacting or module:factory (repeatable; several run "
                 "into OUT/<name> and are compared). Default: study."),
        target: str | None = typer.Option(
            None, "--target",
            help="Sweep a memory system instead of a design: langgraph, langmem, mem0, memkit or "
                 "module:factory (your agent: a factory returning a graph, a mapping of agent, store and "
                 "checkpointer, or a Target; the current directory is importable)."),
        backend: str | None = typer.Option(None, help="--target langgraph/langmem backend: memory, sqlite, postgres."),
        pg_uri: str | None = typer.Option(
            None, "--pg-uri", help="--target backend postgres: the server (default: a temporary one)."),
        pgdata: Path | None = typer.Option(None, "--pgdata", help="--target: the PostgreSQL data directory, if local."),
        forget_requests: str = typer.Option(
            "", "--forget-requests", help="Also forget through requests in the user's words after each deletion "
                                          "mode, each on a copy, comma-separated: exact, paraphrase, obfuscated, "
                                          "es, de, zh, indirect ('' for none)."),
        forget_about: str = typer.Option("secret", "--forget-about", help="What the requests ask to forget: "
                                                                         "secret, fact or secret,fact."),
        forget_resolver: str | None = typer.Option(
            None, "--forget-resolver", help="Chat model spec that judges requests (default: deterministic)."),
        weigh_vectors: bool = typer.Option(False, "--weigh-vectors", help="Weigh the leftover vectors at every "
                                                                          "scan (re-identification, attributes)."),
        probes: list[str] = typer.Option([], "--probes", help="Probes beyond the study's nine (repeatable): "
                                         "'library' (memkit's probe library) or a JSON probe file."),
        attack_budget: int | None = typer.Option(None, "--attack-budget", help="Adaptive attacker's queries per "
                                                 "user, phase and k (default 0: none; 30 with --adversary)."),
        attacker_model: str | None = typer.Option(None, "--attacker-model", help="Chat model spec that plans the "
                                                  "adaptive queries (default: the seeded policy)."),
        membership: bool = typer.Option(False, "--membership", help="Membership inference before and after each "
                                        "forget (AUC, TPR at 1% FPR)."),
        adversary: bool = typer.Option(False, "--adversary", help="All of it: --probes library --attack-budget 30 "
                                       "--membership."),
    ) -> None:
        """Run the full-factorial LongMemEval sweep and write results, metrics and a report."""
        from memkit.dataset.longmemeval import LongMemEvalError
        from memkit.models.chat import ModelSpecError

        try:
            ks = _int_list(k, "--k")
            levels = _int_list(summary_levels, "--summary-levels")
            if adversary:
                from evaluators.adversary.run import ADVERSARY_DEFAULTS

                probes = list(probes) or ADVERSARY_DEFAULTS["probes"]
                attack_budget = ADVERSARY_DEFAULTS["attack_budget"] if attack_budget is None else attack_budget
                membership = True
        except _OptionError as exc:
            typer.echo(f"memkit sweep: {exc}", err=True)
            raise typer.Exit(2) from exc
        try:
            config = SweepConfig(
                data=data,
                n=_n_option(n),
                seed=seed,
                model=model,
                summarizer_model=summarizer_model,
                base_url=base_url,
                api_key_env=api_key_env,
                summary_levels=levels,
                ks=ks,
                redact_hypotheses=redact_hypotheses,
                deletion_modes=[m.strip() for m in deletion_modes.split(",") if m.strip()],
                workers=workers,
                concurrency=concurrency,
                rps=rps,
                executor=executor,
                ray_address=ray_address,
                keep_stores=keep_stores,
                max_tokens=max_tokens,
                n_resamples=n_resamples,
                target=target,
                target_options={k: str(v) for k, v in {"backend": backend, "pg_uri": pg_uri,
                                                       "pgdata": pgdata}.items() if v is not None},
                forget_requests=[x.strip() for x in forget_requests.split(",") if x.strip()],
                forget_about=[x.strip() for x in forget_about.split(",") if x.strip()],
                forget_resolver=forget_resolver,
                weigh_vectors=weigh_vectors,
                probes=list(probes),
                attack_budget=attack_budget or 0,
                attacker_model=attacker_model,
                membership=membership,
            )
            if attacker_model is not None and not attack_budget:
                raise _OptionError("--attacker-model plans the adaptive attack: give --attack-budget too")
            if target is not None and design:
                raise _OptionError("--target and --design: give one (a target is the memory system itself)")
            if target is None and (backend or pg_uri or pgdata):
                raise _OptionError("--backend, --pg-uri and --pgdata apply to --target")
        except _OptionError as exc:
            typer.echo(f"memkit sweep: {exc}", err=True)
            raise typer.Exit(2) from exc
        except ValidationError as exc:
            for err in exc.errors():
                field = str(err["loc"][0]) if err["loc"] else ""
                option = _OPTION_NAMES.get(field, "--" + field.replace("_", "-"))
                msg = str(err["msg"]).removeprefix("Value error, ")
                typer.echo(f"memkit sweep: {option}: {msg}", err=True)
            raise typer.Exit(2) from exc
        already = _units_kept(out, design) if resume else 0
        t0 = time.perf_counter()
        previous = signal.signal(signal.SIGINT, _second_ctrl_c_stops_at_once(out, design))
        try:
            with warnings.catch_warnings(), _temporary_server(config) as config:
                warnings.showwarning = _echo_warning
                metrics = run_sweep(config, out, resume=resume, progress=not quiet, designs=design or None)
        except KeyboardInterrupt:
            typer.echo(_interrupted(out, design), err=True)
            raise typer.Exit(130) from None
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
        except OSError as exc:
            typer.echo(f"memkit sweep: {os_error_line(exc)}", err=True)
            raise typer.Exit(2) from exc
        except (SweepLockedError, ValueError) as exc:
            typer.echo(f"memkit sweep: {exc}", err=True)
            raise typer.Exit(2) from exc
        finally:
            signal.signal(signal.SIGINT, previous)
        dt = time.perf_counter() - t0
        by_design = metrics["designs"] if "designs" in metrics else {metrics.get("design", "study"): metrics}
        units = sum(m["totals"]["units"] for m in by_design.values())
        ran = units - min(already, units)
        if ran == units:
            typer.echo(f"memkit sweep: {units} units in {dt:.1f} s -> {out}")
        elif ran == 0:
            typer.echo(f"memkit sweep: all {units} units were already done; outputs rewritten in {dt:.1f} s -> {out}")
        else:
            typer.echo(f"memkit sweep: {ran} units run in {dt:.1f} s, {units - ran} already done "
                       f"({units} in all) -> {out}")
        for name, m in by_design.items():
            for row in m["by_S"]:
                pua = "n/a" if row.get("PUA") is None else f"{row['PUA']:.2f}"
                level = "" if row["S"] is None else f" S={row['S']}"
                typer.echo(f"  {name}{level}: PR={row['PR']:.2f} AER_max={row['AER_max']:.2f} PUA={pua}")
        typer.echo(f"  report: {out / ('compare.md' if 'designs' in metrics else 'report.md')}")
        from evaluators.report.markdown import canary_sentence, hypotheses_with_canaries

        for run_dir in ([out / name for name in by_design] if "designs" in metrics else [out]):
            line = canary_sentence(hypotheses_with_canaries(run_dir))
            if line:
                typer.echo(f"  {run_dir.name}: " + line.replace("**", ""))
        if config.keep_stores:
            typer.echo(f"  forgotten stores: {out / 'stores'}; scan one, e.g.:")
            for run_dir in ([out / name for name in by_design] if "designs" in metrics else [out]):
                cmd = residue_command(run_dir)
                if cmd:
                    typer.echo(f"    {cmd}")


def _temporary_server(config: SweepConfig) -> Any:
    """A temporary PostgreSQL 16 + pgvector (pgserver) for ``--target langgraph|langmem
    --backend postgres`` without ``--pg-uri``, for the whole sweep; yields the config
    pointing at it (its URI is not part of the run's identity)."""
    from contextlib import contextmanager, nullcontext

    opts = config.target_options
    if config.target not in ("langgraph", "langmem") or opts.get("backend") != "postgres" or opts.get("pg_uri"):
        return nullcontext(config)

    @contextmanager
    def server() -> Any:
        from evaluators.targets.matrix import temporary_postgres

        with temporary_postgres() as (srv, root):
            yield config.model_copy(update={"target_options": {**opts, "pg_uri": srv.get_uri(),
                                                               "pgdata": str(root)}})

    return server()


def _interrupted(out: Path, designs: list[str] | None) -> str:
    """What Ctrl-C kept and the exact command that goes on."""
    kept = _units_kept(out, designs)
    return (f"\nmemkit sweep: interrupted. {kept} finished units are kept in {out} "
            f"(a unit cut short runs again); go on with:\n  {_resume_command()}")


def _second_ctrl_c_stops_at_once(out: Path, designs: list[str] | None) -> Any:
    """A SIGINT handler: the first Ctrl-C stops the sweep after the model calls in flight
    (a llama.cpp call cannot be cut), saying so; a second one stops at once. Finished
    units are fsync'd with their markers, so nothing finished is lost either way."""
    pressed = []

    def handler(signum: int, frame: Any) -> None:
        pressed.append(signum)
        if len(pressed) == 1:
            sys.stderr.write("\nmemkit sweep: stopping after the model calls in flight "
                             "(Ctrl-C again stops at once)\n")
            raise KeyboardInterrupt
        sys.stderr.write(_interrupted(out, designs) + "\n")
        sys.stderr.flush()
        os._exit(130)

    return handler


def _resume_command() -> str:
    """The exact command line that continues this sweep (this one, with ``--resume``)."""
    argv = sys.argv[1:]
    if "--resume" not in argv:
        argv = [*argv, "--resume"]
    return shlex.join(["memkit", *argv])


def _units_kept(out: Path, designs: list[str] | None) -> int:
    """Completed units in ``out`` (and its design subdirectories), by their ``unit_done``
    markers (units of damaged records do not count: they run again)."""
    from evaluators.records import load_records

    n = 0
    for path in [out / RESULTS, *sorted(out.glob(f"*/{RESULTS}"))]:
        if path.exists():
            try:
                n += len(load_records(path)[1])
            except (OSError, ValueError):
                pass
    return n


def residue_command(run_dir: Path) -> str | None:
    """``memkit residue --run RUN --unit ID --mode MODE`` for the first kept store of a run."""
    stores = run_dir / "stores"
    for path in sorted(stores.glob("*/S*/*/chroma")):
        mode_dir = path.parent
        return shlex.join(["memkit", "residue", "--run", str(run_dir), "--unit",
                           f"{mode_dir.parent.parent.name}::{mode_dir.parent.name}", "--mode", mode_dir.name])
    return None


def _echo_warning(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
                  line: Any = None) -> None:
    typer.echo(f"memkit sweep: note: {message}", err=True)
