"""Run or resume a sweep into an output directory."""

from __future__ import annotations

import json
import shutil
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout
from tqdm import tqdm

from evaluators.rundir import check_out_dir, claim_out_dir, record_setting
from evaluators.sweep.config import (
    CACHE,
    NOT_IDENTITY,
    RESULTS,
    SweepConfig,
    SweepLockedError,
    load_instances,
    unit_id,
)
from evaluators.sweep.executors import advance_bar, run_parallel, run_ray, tempdir_under
from evaluators.sweep.outputs import write_outputs_for
from evaluators.sweep.results import append_unit, canonical_order, load_records, rewrite_records
from evaluators.sweep.unit import run_sweep_unit
from graphs.designs import MemoryDesign, resolve_design
from memkit.dataset.longmemeval import Instance

# --------------------------------------------------------------------------- the sweep


def run_sweep(
    config: SweepConfig,
    out: str | Path,
    *,
    resume: bool = False,
    progress: bool = True,
    model: Any = None,
    summarizer_model: Any = None,
    use_cache: bool = True,
    write_outputs: bool = True,
    designs: Sequence[str | MemoryDesign] | None = None,
    cache_path: str | Path | None = None,
) -> dict[str, Any]:
    """Run (or resume) a sweep into ``out`` and write its outputs.

    Args:
        config: what to run.
        out: output directory (created).
        resume: continue a sweep killed part-way; without it an existing
            ``results.jsonl`` is an error.
        progress: show a progress bar (units done, rate, ETA) on stderr.
        model, summarizer_model: chat-model objects instead of the config's specs
            (in-process only; ``workers`` must be 1).
        use_cache: use the shared LLM cache (``llm_cache.sqlite``).
        write_outputs: also write metrics, hypotheses and the report.
        designs: memory designs to run (:class:`graphs.designs.MemoryDesign` objects,
            built-in names or ``module:factory`` specs; default ``[config.design]``).
            One design runs into ``out``. Several run one after another into
            ``out/<design name>/`` (each a complete run; ``--resume`` continues each)
            sharing one LLM cache ``out/llm_cache.sqlite``, then
            :func:`evaluators.report.compare.compare_runs` writes their comparison (paired
            differences with CIs) into ``out``. A design object (not a name or spec)
            runs in-process (``workers`` is not used).
        cache_path: the LLM cache file (default ``out/llm_cache.sqlite``).

    Returns:
        The metrics dict written to ``metrics.json``; for several designs
        ``{"designs": {name: metrics}, "compare": compare.json's content}``.

    Everything that can be checked before a run is checked before ``out`` is
    created or changed: the data file (loaded and validated), the model specs
    (installed, runnable, reachable). A refused run leaves ``out`` as it was.

    Raises:
        SweepLockedError: another process is writing to ``out``.
        evaluators.rundir.NotARunDirectoryError: ``out`` is a non-empty directory that
            is not a sweep run (:func:`evaluators.rundir.check_out_dir`; nothing is written).
        FileExistsError: ``out`` holds results and ``resume`` is False.
        ValueError: ``resume`` with a different configuration, or bad options.
        memkit.dataset.longmemeval.LongMemEvalError: a malformed data file.
        memkit.models.chat.ModelSpecError: a model that cannot be built or run.
        WorkerDied: a worker process died (its unit is named; ``--resume`` goes on).
    """
    out = Path(out)
    if config.target is not None:
        return _run_target(config, out, resume=resume, progress=progress, use_cache=use_cache,
                           write_outputs=write_outputs, cache_path=cache_path)
    specs = list(designs) if designs else [config.design]
    check_out_dir(out, "designs" if len(specs) > 1 else "sweep")
    _check_adversary(config)  # a bad probe file or attacker model fails before out is touched
    resolved = [resolve_design(d) for d in specs]  # a bad spec fails before out is touched
    names = [d.name for d in resolved]
    if len(set(names)) != len(names):
        raise ValueError(f"--design: two designs share a name ({names}); each needs its own")
    if len(resolved) > 1:
        return _run_designs(config, out, specs, resolved, resume=resume, progress=progress, model=model,
                            summarizer_model=summarizer_model, use_cache=use_cache, write_outputs=write_outputs)
    spec = specs[0]
    design_obj = spec if isinstance(spec, MemoryDesign) else None
    config = config.model_copy(update={"design": spec if isinstance(spec, str) else spec.name})
    say = announce if progress else (lambda _msg: None)
    say(f"loading data ({config.data})")
    instances = load_instances(config)
    if model is None:
        from memkit.models.chat import check_spec

        kw = config.model_kwargs()
        for spec in {config.model, config.summarizer_model or config.model}:
            say(f"checking model {spec}")
            check_spec(spec, **kw)
    identity = config.identity()  # hashes the data file once
    with _claimed(out):
        return _run_locked(config, out, instances, identity, resume, progress, model, summarizer_model,
                           use_cache, write_outputs, design_obj, cache_path, say)


@contextmanager
def _claimed(out: Path) -> Iterator[None]:
    """``out`` marked as a sweep's and its lock held for the duration.

    Raises:
        SweepLockedError: another process holds the lock.
    """
    claim_out_dir(out, "sweep")
    lock = FileLock(str(out / ".lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout as exc:
        raise SweepLockedError(
            f"another memkit sweep is writing to {out} (lock {out / '.lock'} is held); "
            "wait for it or choose another --out"
        ) from exc
    try:
        yield
    finally:
        lock.release()


def _run_target(config: SweepConfig, out: Path, *, resume: bool, progress: bool, use_cache: bool,
                write_outputs: bool, cache_path: str | Path | None) -> dict[str, Any]:
    """A sweep over a target (``config.target``): the same run directory, records and
    outputs as a design's; the target's factory is imported before ``out`` is touched."""
    from evaluators.sweep.targets import target_levels

    check_out_dir(out, "sweep")
    levels = target_levels(config)  # a bad spec fails here, before out is touched
    _check_adversary(config)
    say = announce if progress else (lambda _msg: None)
    say(f"loading data ({config.data})")
    instances = load_instances(config)
    if config.model != "extractive":
        from memkit.models.chat import check_spec

        say(f"checking model {config.model}")
        check_spec(config.model, **config.model_kwargs())
    identity = config.identity()
    with _claimed(out):
        return _run_locked(config, out, instances, identity, resume, progress, None, None, use_cache,
                           write_outputs, None, cache_path, say, levels=levels)


def _run_designs(config: SweepConfig, out: Path, specs: list[str | MemoryDesign], resolved: list[MemoryDesign],
                 **kw: Any) -> dict[str, Any]:
    """Several designs: one complete run per design under ``out/<name>``, one shared
    LLM cache, then the comparison of the runs in ``out`` (see :func:`run_sweep`)."""
    claim_out_dir(out, "designs")
    use_cache = kw.pop("use_cache")
    write_outputs = kw.pop("write_outputs")
    cache = str(out / CACHE) if use_cache else None
    per_design: dict[str, Any] = {}
    for spec, design in zip(specs, resolved, strict=True):
        per_design[design.name] = run_sweep(config, out / design.name, designs=[spec], use_cache=use_cache,
                                            cache_path=cache, write_outputs=write_outputs, **kw)
    if not write_outputs:
        return {}
    from evaluators.report.compare import compare_runs

    result = compare_runs([out / d.name for d in resolved], out, n_resamples=config.n_resamples, seed=config.seed)
    return {"designs": per_design, "compare": result}


def _run_locked(
    config: SweepConfig,
    out: Path,
    instances: list[Instance],
    identity: dict[str, Any],
    resume: bool,
    progress: bool,
    model: Any,
    summarizer_model: Any,
    use_cache: bool,
    write_outputs: bool,
    design_obj: MemoryDesign | None = None,
    cache_override: str | Path | None = None,
    say: Any = None,
    levels: Sequence[int | None] | None = None,
) -> dict[str, Any]:
    say = say or (lambda _msg: None)
    results = out / RESULTS
    cfg_path = out / "config.json"
    records, done, bad = load_records(results) if results.exists() else ([], set(), [])
    if done and not resume:
        raise FileExistsError(
            f"{results} already holds results: pass --resume to continue that sweep, "
            f"choose a new --out, or remove {out} to start over"
        )
    if done and cfg_path.exists():
        before = json.loads(cfg_path.read_text())
        for key in NOT_IDENTITY:
            before.pop(key, None)
        if config.data != "synthetic" and _covers(before.get("n"), len(instances)) and _covers(
                identity.get("n"), len(instances)):
            before["n"] = identity.get("n")  # both ask for every instance of the file
        if before != identity:
            diff = sorted(k for k in set(before) | set(identity) if before.get(k) != identity.get(k))
            raise ValueError(
                f"--resume with a different configuration than {cfg_path} ({', '.join(diff)} differ): "
                f"rerun with that configuration, choose a new --out, or remove {out} to start over"
            )
    # No completed unit yet (a fresh directory, or a run that failed before its
    # first unit): nothing can be lost, so this configuration simply takes over.
    # n_instances: what was run (``n`` is what was asked: more than the file holds runs
    # them all); recorded beside the identity, not part of it, so runs resume unchanged.
    cfg_path.write_text(json.dumps({**identity, "n_instances": len(instances)}, indent=2, sort_keys=True) + "\n")
    if config.redact_hypotheses:
        record_setting(out, "redact_hypotheses", True)

    units = [(inst, S) for inst in instances for S in (levels if levels is not None else config.summary_levels)]
    order = {unit_id(inst.question_id, S): i for i, (inst, S) in enumerate(units)}
    if len(order) != len(units):
        raise ValueError("duplicate question_id in the data: unit ids must be unique")

    if results.exists():
        if bad:
            backup = results.with_name(f"{RESULTS}.damaged-{int(time.time())}")
            shutil.copyfile(results, backup)
            warnings.warn(
                f"{results}: lines {bad[:10]}{' ...' if len(bad) > 10 else ''} do not parse; "
                f"the units they belong to run again (original kept as {backup.name})",
                stacklevel=2,
            )
        keep = [r for r in records if r.get("unit") in order]
        done &= set(order)
        rewrite_records(results, keep)  # only intact, completed units of this configuration
    results.touch()
    cache_path = (str(cache_override) if cache_override else str(out / CACHE)) if use_cache else None
    stores_dir = str(out / "stores") if config.keep_stores else None
    # Temporary store copies (the residue phase) live under --out, never in the
    # system temp dir, and whatever a killed run left there is removed now.
    work = out / ".work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    todo = [(inst, S) for inst, S in units if unit_id(inst.question_id, S) not in done]
    say(cost_line(config, instances, len(units), len(todo)))
    bar = tqdm(total=len(units), initial=len(units) - len(todo), unit="unit", disable=not progress,
               desc=f"memkit sweep [{config.target or config.design}]", dynamic_ncols=True)
    try:
        with open(results, "ab") as fh, tempdir_under(work):
            if config.executor == "ray":
                if model is not None or summarizer_model is not None or design_obj is not None:
                    raise ValueError("executor='ray' takes model specs and a design name in the config, "
                                     "not model or design objects")
                run_ray(config, todo, cache_path, stores_dir, fh, bar, work)
            elif config.workers <= 1 or model is not None or summarizer_model is not None or design_obj is not None:
                for inst, S in todo:
                    recs, counts = run_sweep_unit(config, inst, S, cache_path=cache_path, model=model,
                                            summarizer_model=summarizer_model, stores_dir=stores_dir,
                                            design=design_obj)
                    append_unit(fh, recs, unit_id(inst.question_id, S), counts)
                    advance_bar(bar, counts)
            else:
                run_parallel(config, todo, cache_path, stores_dir, fh, bar, work)
    finally:
        bar.close()
        shutil.rmtree(work, ignore_errors=True)

    say(f"writing {results} in canonical order")
    records, done, _ = load_records(results)
    missing = set(order) - done
    if missing:
        raise RuntimeError(f"sweep ended with {len(missing)} units missing, e.g. {sorted(missing)[:3]}")
    records = canonical_order(records, order)
    rewrite_records(results, records)
    if not write_outputs:
        return {}
    say("writing metrics.json, hypotheses, report and figures")
    return write_outputs_for(out, records, config)


def _check_adversary(config: SweepConfig) -> None:
    """Read the probe files and check the attacker model's spec (``ValueError`` naming
    the option)."""
    config.adversary()
    if config.attacker_model:
        from memkit.models.chat import ModelSpecError, check_spec

        try:
            check_spec(config.attacker_model, **config.model_kwargs())
        except ModelSpecError as exc:
            raise ValueError(f"--attacker-model: {exc}") from exc


def _covers(n: int | None, count: int) -> bool:
    """``n`` takes every one of ``count`` instances (``None`` = all)."""
    return n is None or n >= count


def announce(msg: str) -> None:
    """Say which phase a sweep is in, on stderr (so no wait is silent)."""
    tqdm.write(f"memkit sweep: {msg}", file=sys.stderr)


def cost_line(config: SweepConfig, instances: Sequence[Instance], n_units: int, n_todo: int) -> str:
    """What the run costs, said before it starts: units, and LLM calls per unit for the grid.

    Per unit (docs/metrics.md, the sweep's three phases): the main phase asks the
    question and the probes at every k, the residue phase asks the probes with each
    tier and the question at every k per deletion mode; the write phase summarizes
    each session once at S > 0. Identical contexts and repeated prompts are served
    from the LLM cache, so these are upper bounds; ``extractive`` calls no LLM.
    """
    from evaluators.runner import probe_queries
    from memkit.store.tiered import TIERS

    n_probes = len(probe_queries())
    nk = len(config.ks)
    main = (1 + n_probes) * nk
    forget = len(config.deletion_modes) * (n_probes * len(TIERS) + 1) * nk
    sessions = max((len(list(i.sessions())) for i in instances), default=0)
    summaries = sessions if any(S > 0 for S in config.summary_levels) else 0
    per_unit = main + forget + summaries
    done = n_units - n_todo
    def count(n: int, word: str) -> str:
        return f"{n} {word}{'' if n == 1 else 's'}"

    adv = config.adversary()
    adv_text = ""
    if adv is not None:
        from evaluators.adversary import cost_text

        phases = 1 + (len(config.deletion_modes) if adv.after_forget else 0)
        adv_text = "; " + cost_text(adv, len(config.ks), phases) + " per unit"
    head = (f"{count(len(instances), 'instance')} x S={','.join(map(str, config.summary_levels))}: "
            f"{count(n_units, 'unit')}"
            + (f" ({done} already done, {n_todo} to run)" if done else ""))
    if config.target is not None:
        turns = max((sum(1 for _, _, ts in i.sessions() for t in ts if t.role == "user") for i in instances),
                    default=0)
        return (f"target {config.target}: {count(len(instances), 'instance')}, {count(n_units, 'unit')}"
                + (f" ({done} already done, {n_todo} to run)" if done else "")
                + f"; per unit up to {turns} feed turns, {1 + n_probes} queries per k before the forget and "
                f"{n_probes + 1} per k after it, {n_probes} more per tier where recall can be restricted "
                "(each one agent call)" + adv_text)
    if config.model == "extractive" and (config.summarizer_model or "extractive") == "extractive":
        return head + "; model-free (extractive), no LLM calls" + adv_text
    return (f"{head}; up to {per_unit} LLM calls per unit ({main} main = {1 + n_probes} queries x {nk} k, "
            f"{forget} after forgetting = {count(len(config.deletion_modes), 'mode')} x {n_probes * len(TIERS) + 1} "
            f"queries x {nk} k, {summaries} summaries), up to {per_unit * n_todo} in all "
            "(repeats come from the LLM cache); fewer k, S or --deletion-modes cost less" + adv_text)

