"""``memkit audit TARGET``: audit a memory system from the command line or CI.

TARGET is a built-in target (``langgraph``, ``langmem``, ``mem0``, ``memkit``;
:data:`evaluators.targets.base.BUILTIN`) with its options (``--backend``,
``--pg-uri``, ``--pgdata``, ``--workdir``; ``--backend postgres`` without
``--pg-uri`` starts a temporary PostgreSQL 16 + pgvector with ``pgserver`` and removes
it after the run), or ``package.module:factory`` (the current
directory is importable). A factory may take any of ``mode``, ``backend``,
``pg_uri``, ``pgdata``, ``workdir`` (it gets those its signature names) and returns
a :class:`~evaluators.targets.base.Target`, or a mapping with ``agent``, ``feed`` and
optionally ``forget``, ``store``, ``checkpointer``, ``also`` (the arguments of
:func:`evaluators.audit.audit`), or a tuple ``(agent, feed[, forget[, store]])``.

``--fail-on`` (repeatable) makes the exit status 1 when a condition holds:

* ``residue``: some surface still holds some user's canary after the forget (and
  after the deletion steps asked for);
* ``unchecked``: some surface could not be checked (never clean);
* ``METRIC OP NUMBER`` with OP one of ``> >= < <= == !=`` and METRIC one of
  ``aer_max`` (AER_max before the forget), ``aer_after_max`` (after it), ``pr``,
  ``pr_after``, ``frs_worst``, ``residue_users`` (users whose canary the worst
  surface holds). A metric the run did not measure (n/a) trips its condition: CI
  must not pass on a number that does not exist.

``residue`` and ``unchecked`` take surfaces: ``residue:pg_rows,checkpoint`` gates on
those only, ``residue:-disk_pg_wal`` on every surface but the WAL (which keeps copies
after any deletion). ``vacuous`` fails a run whose forget had nothing to remove (no
probe extracted a canary before it and no surface held one).

``--probes``, ``--attack-budget``, ``--attacker-model`` and ``--membership`` (all at
once: ``--adversary``) add the adversary beyond the study's probes
(:mod:`evaluators.adversary`); its numbers gate as ``aer_adversary``,
``aer_adversary_after`` and ``membership_auc``.

``--json`` prints the result as JSON instead of the markdown report; ``--junit FILE``
writes JUnit XML (one test case per ``--fail-on`` condition, the report as
``system-out``) that CI systems display; ``--sarif FILE`` writes SARIF 2.1.0 (one
result per surface and user whose canary remains, with its locations;
:mod:`evaluators.report.sarif`). ``--baseline FILE`` (a previous run's ``--json`` or
``--sarif`` output) makes every ``--fail-on`` count only what is new or worse than
that run, and the report lists what was fixed since (:mod:`evaluators.report.baseline`). ``--matrix`` runs every built-in target
with every forget scope and deletion step (:mod:`evaluators.targets.matrix`).
Every input (conditions, scope, paths, the database) is checked before any work;
progress goes to stderr; Ctrl-C says what was done. Exit status: 0 passed, 1 a
condition held, 2 bad usage, 130 interrupted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from evaluators.cli.errors import os_error_line
from evaluators.report.baseline import audit_snapshot, compare, gate_values, load_baseline
from evaluators.report.sarif import audit_sarif, write_sarif
from evaluators.targets.gates import evaluate, junit_xml, parse_condition, run_target


def register(app: typer.Typer) -> None:
    """Register ``memkit audit`` on the ``memkit`` app."""

    @app.command("audit")
    def audit_cmd(
        target: str = typer.Argument(None, help="Built-in target (langgraph, langmem, mem0, memkit) or module:factory."),
        backend: str = typer.Option(None, help="langgraph/langmem backend: memory, sqlite, postgres."),
        pg_uri: str = typer.Option(None, "--pg-uri", help="PostgreSQL connection string (backend postgres)."),
        pgdata: Path = typer.Option(None, "--pgdata", help="The server's data directory, when local: its files are scanned."),
        workdir: Path = typer.Option(None, help="Where a target keeps its files (sqlite, mem0)."),
        n: int = typer.Option(4, min=1, help="Users (LongMemEval instances) to audit."),
        seed: int = typer.Option(0),
        data: str = typer.Option("synthetic", help="'synthetic' or a LongMemEval JSON file."),
        kind: str = typer.Option("token", help="Canary kind."),
        mode: str = typer.Option(None, help="Deletion mode of memkit's stores ('none': no forget; default "
                                            "full_purge where it applies)."),
        forget_scope: str = typer.Option("secret", help="A target's forget: 'secret' or 'user'."),
        step: list[str] = typer.Option([], "--step", help="Deletion step after the forget (repeatable): vacuum, vacuum_full, checkpoint_wal, wal_checkpoint."),
        delete_threads: bool = typer.Option(False, "--delete-threads", help="Also delete each user's conversations."),
        fail_on: list[str] = typer.Option([], "--fail-on", help="Exit 1 when it holds (repeatable): residue, residue:-disk_pg_wal, unchecked, vacuous, 'aer_max>0.2' ..."),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON instead of markdown."),
        junit: Path = typer.Option(None, "--junit", help="Write JUnit XML here."),
        sarif: Path = typer.Option(None, "--sarif", help="Write SARIF 2.1.0 here (GitHub code scanning)."),
        baseline: Path = typer.Option(None, "--baseline", help="A previous run's --json or --sarif output: "
                                                                "--fail-on counts only what is new or worse."),
        verbose: bool = typer.Option(False, "--verbose", help="Let other libraries' warnings and log lines through."),
        n_resamples: int = typer.Option(1000, help="Bootstrap resamples for the CIs."),
        forget_request: list[str] = typer.Option(
            [], "--forget-request", help="Also forget each user's item through a request in their own words, on a "
                                         "copy (repeatable): exact, paraphrase, obfuscated, es, de, zh, indirect."),
        forget_about: list[str] = typer.Option(
            ["secret"], "--forget-about", help="What the requests ask to forget (repeatable): secret, fact."),
        resolver: str = typer.Option(None, help="Chat model spec that judges requests (default: deterministic)."),
        weigh_vectors: bool = typer.Option(False, "--weigh-vectors",
                                           help="Weigh the leftover vectors: re-identification and attribute "
                                                "inference per surface."),
        matrix: bool = typer.Option(False, "--matrix", help="Every built-in target x deletion API into one table."),
        probes: list[str] = typer.Option([], "--probes", help="Probes beyond the study's nine (repeatable): "
                                         "'library' (memkit's probe library) or a JSON probe file."),
        attack_budget: int = typer.Option(None, "--attack-budget", help="Adaptive attacker's queries per user "
                                          "(default 0: none; 30 with --adversary)."),
        attacker_model: str = typer.Option(None, "--attacker-model", help="Chat model spec that plans the adaptive "
                                           "queries (default: the seeded policy)."),
        membership: bool = typer.Option(False, "--membership", help="Membership inference (AUC, TPR at 1% FPR)."),
        adversary: bool = typer.Option(False, "--adversary", help="All of it: --probes library --attack-budget 30 "
                                       "--membership."),
        out: Path = typer.Option(None, help="--matrix: also write the table (markdown) and JSON beside it."),
    ) -> None:
        """Audit a memory system: PR, AER before/after the forget, copies left on every surface."""
        import time

        from evaluators.cli.checks import InputError, check_audit_inputs

        say, phase = _progress()
        try:
            conditions = [parse_condition(c) for c in fail_on]
            check_audit_inputs(forget_scope=forget_scope, mode=mode, junit=junit, pg_uri=pg_uri, pgdata=pgdata,
                               data=data, target=target, matrix=matrix, out=out, sarif=sarif)
            if matrix and (sarif or baseline):
                raise InputError("--sarif and --baseline apply to one target, not --matrix")
            snapshot = load_baseline(baseline) if baseline is not None else None
            from evaluators.adversary.run import plan_from_options

            adv = plan_from_options(probes, attack_budget, attacker_model, membership, adversary, kind=kind)
            if adv is not None and matrix:
                raise ValueError("--matrix runs the study's probes only; leave out --probes, --attack-budget, "
                                 "--membership and --adversary")
        except (ValueError, InputError) as exc:
            typer.echo(f"memkit audit: {exc}", err=True)
            raise typer.Exit(2) from exc
        try:
            if matrix:
                from evaluators.targets.matrix import run_matrix

                table = run_matrix(n=n, seed=seed, pg_uri=pg_uri, pgdata=pgdata, n_resamples=n_resamples, out=out)
                typer.echo(table["markdown"])
                raise typer.Exit(0)
            options = {k: v for k, v in {"backend": backend, "pg_uri": pg_uri, "pgdata": pgdata,
                                         "workdir": workdir}.items() if v is not None}
            t0 = time.perf_counter()
            result = run_target(target, options=options, mode=mode or "full_purge", forget_scope=forget_scope,
                                steps=step, delete_threads=delete_threads, n=n, seed=seed, data=data, kind=kind,
                                n_resamples=n_resamples, say=say, mode_given=mode is not None, adversary=adv,
                                requests=forget_request, about=forget_about or ["secret"],
                                weigh_vectors=weigh_vectors, resolver=resolver)
        except KeyboardInterrupt:
            typer.echo(f"\nmemkit audit: interrupted while {phase[-1] if phase else 'starting'}; nothing was "
                       "written (a target memkit built was removed; rerun the same command to start over)", err=True)
            raise typer.Exit(130) from None
        except OSError as exc:
            typer.echo(f"memkit audit: {os_error_line(exc)}", err=True)
            raise typer.Exit(2) from exc
        except (ValueError, TypeError, ImportError, AttributeError) as exc:
            typer.echo(f"memkit audit: {exc}", err=True)
            raise typer.Exit(2) from exc
        seconds = time.perf_counter() - t0
        try:
            delta = compare(snapshot, audit_snapshot(result)) if snapshot is not None else None
        except ValueError as exc:
            typer.echo(f"memkit audit: {exc}", err=True)
            raise typer.Exit(2) from exc
        verdicts = evaluate(result, conditions, baseline=snapshot)
        since = "\n".join(delta.lines()) + "\n" if delta is not None else ""
        if as_json:
            payload = result.to_dict()
            payload["gates"] = gate_values(result)
            payload["fail_on"] = [{"condition": c.text, "failed": hit, "detail": msg} for c, hit, msg in verdicts]
            if delta is not None:
                payload["baseline"] = delta.to_dict()
            typer.echo(json.dumps(payload, indent=2, default=str))
        else:
            typer.echo(result.report)
            if since:
                typer.echo(since)
            for c, hit, msg in verdicts:
                typer.echo(f"{'FAIL' if hit else 'ok  '} --fail-on {c.text}: {msg}")
        if junit is not None:
            junit.write_text(junit_xml(target or "matrix", verdicts, result.report + ("\n" + since if since else ""),
                                       seconds))
        if sarif is not None:
            write_sarif(audit_sarif(result, baseline=delta), sarif)
        if any(hit for _, hit, _ in verdicts):
            raise typer.Exit(1)


def _progress() -> tuple[Any, list[str]]:
    """A ``say`` that writes each phase to stderr, and the list of phases said."""
    phases: list[str] = []

    def say(msg: str) -> None:
        phases.append(msg)
        typer.echo(f"memkit audit: {msg}", err=True)

    return say, phases
