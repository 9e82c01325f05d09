"""``memkit judge RUN_DIR --model SPEC``: re-score a run's answers with an LLM judge."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer


def register(app: typer.Typer) -> None:
    """Register ``memkit judge RUN_DIR --model SPEC`` on the ``memkit`` app."""

    @app.command("judge")
    def judge(
        run_dir: Path = typer.Argument(..., help="A finished sweep output directory."),
        model: str = typer.Option(..., help="Judge model spec (e.g. openai:gpt-4o, ollama:qwen3, llamacpp:PATH)."),
        base_url: str | None = typer.Option(None, help="Server URL for openai:/ollama: models."),
        api_key_env: str | None = typer.Option(None, help="Environment variable holding the API key."),
        max_tokens: int | None = typer.Option(
            None, help="Cap on generated tokens per judge call (default: memkit.models.chat.DEFAULT_MAX_TOKENS)."),
    ) -> None:
        """Re-score a run's answers with an LLM judge; write rule–judge agreement into
        metrics.json and the report."""
        from evaluators.scoring.judge_run import judge_run
        from memkit.models.chat import ModelSpecError, chat_model

        kw: dict[str, Any] = {}
        if base_url:
            kw["base_url"] = base_url
        if max_tokens:
            kw["max_tokens"] = max_tokens
        if api_key_env:
            key = os.environ.get(api_key_env)
            if not key:
                typer.echo(f"memkit judge: --api-key-env: the environment variable {api_key_env} is not set", err=True)
                raise typer.Exit(2)
            kw["api_key"] = key
        from evaluators.rundir import NotARunDirectoryError, require_run

        if model == "extractive" and (run_dir / "metrics.json").exists():  # a missing run is said first
            typer.echo("memkit judge: --model extractive is model-free and cannot judge answers; "
                       "give a chat model (e.g. ollama:qwen3, openai:gpt-4o-mini, llamacpp:PATH)", err=True)
            raise typer.Exit(2)
        try:
            if (run_dir / "metrics.json").exists():  # judge rewrites metrics.json and the report: only in a run
                require_run(run_dir, "sweep")
            judge_model = chat_model(model, **kw)
            block = judge_run(run_dir, judge_model, model_spec=model)
        except (FileNotFoundError, NotARunDirectoryError, ValueError, ModelSpecError) as exc:
            typer.echo(f"memkit judge: {exc}", err=True)
            raise typer.Exit(2) from exc
        for rule, a in block["agreement"].items():
            kappa = "n/a" if a["kappa"] is None else f"{a['kappa']:.3f}"
            typer.echo(f"{rule}: accuracy {a['accuracy']:.3f}, kappa {kappa} over {a['n']} answers")
        typer.echo(f"{block['n_unparsed']} of {block['n_answers']} judge replies unparsed (no clear verdict; "
                   f"counted apart, listed under judge.unparsed)")
        typer.echo(f"{len(block['disagreements'])} disagreement(s); written to {Path(run_dir) / 'metrics.json'}")
