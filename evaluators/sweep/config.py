"""What a sweep runs: :class:`SweepConfig`, the instances it draws, unit ids."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, field_validator

from graphs.forget import DELETION_MODES, STUDY_MODES
from memkit.dataset.draw import draw_instances
from memkit.dataset.longmemeval import Instance

DEFAULT_KS = (1, 3, 6, 10, 25)
RESULTS = "results.jsonl"
CACHE = "llm_cache.sqlite"


class SweepLockedError(RuntimeError):
    """Another process holds the output directory's lock."""


OPTIONAL_IDENTITY = {"forget_requests": [], "forget_about": ["secret"], "weigh_vectors": False,
                     "forget_resolver": None}
"""Fields left out of a run's identity while they hold these defaults, so runs from
before they existed resume unchanged."""

NOT_IDENTITY = {"workers", "api_key_env", "keep_stores", "concurrency", "rps", "executor", "ray_address",
                "redact_hypotheses", "n_instances"}
"""Config fields that do not change a run's results (a resume may change them)."""


class SweepConfig(BaseModel):
    """What a sweep runs. Every field but ``workers`` must match on ``--resume``.

    Attributes:
        data: ``"synthetic"`` or a path to a LongMemEval JSON file.
        n: instances sampled (the study: 50); ``None`` takes every instance of the
            file. More than the file holds takes every instance, with a warning.
        seed: seeds the sample, the synthetic data, canary planting and bootstrap CIs.
        model: responder model spec (:func:`memkit.models.chat.chat_model`).
        summarizer_model: summarizer spec (default: ``model``).
        summary_levels: S values (0 raw, 1 key facts, 2 one sentence).
        ks: retrieval breadths.
        deletion_modes: modes of the residue phase (``[]`` skips it); default the study's
            five (:data:`graphs.forget.STUDY_MODES`): ``crypto_shred`` runs when named, so a
            default configuration keeps the identity its runs had before it existed.
        synthetic_sessions: sessions per synthetic instance (an int or ``[lo, hi]``).
        synthetic_turns: turns per synthetic session (an int or ``[lo, hi]``).
        max_tokens: cap on generated tokens per LLM call (``None``: :data:`memkit.models.chat.DEFAULT_MAX_TOKENS`, 256).
        base_url: server URL for ``openai:`` / ``ollama:`` models (``None``: the
            provider's default or ``OPENAI_BASE_URL`` / ``OLLAMA_HOST``).
        api_key_env: name of the environment variable holding the API key (the key
            itself is never written to ``config.json``; not part of the identity).
        n_resamples: bootstrap resamples for CIs (the study: 1000).
        workers: parallel processes (not part of the run's identity).
        keep_stores: also keep each deletion mode's forgotten store under
            ``--out/stores`` for ``memkit residue`` (not part of the identity).
        design: the memory design (:func:`graphs.designs.resolve_design`: a
            built-in name or ``module:factory``); ``study`` is the source study's
            pipeline. Several designs: ``run_sweep(config, out, designs=[...])``.
        concurrency: responder calls in flight per worker (``None``: the backend's
            default, :meth:`calls_in_flight`; not part of the identity).
        rps: cap on model requests per second per worker process (``None``: no cap;
            not part of the identity).
        executor: ``"local"`` (this machine: ``workers`` processes) or ``"ray"``
            (units as Ray tasks; not part of the identity).
        ray_address: the Ray cluster to join (``None``: ``RAY_ADDRESS`` or a local
            Ray started for the run; not part of the identity).
        redact_hypotheses: mask planted canaries in the hypotheses files; recorded in
            the run (:func:`evaluators.rundir.record_setting`) and kept by every later
            sweep, ``--resume`` and ``memkit report`` on it (not part of the identity).
        target: instead of a design, the memory system to sweep: a built-in target
            name or ``module:factory`` (:func:`evaluators.targets.base.load_target`),
            built once per unit with ``target_options`` (and ``S`` / ``mode`` where the
            factory takes them); ``None``: the design.
        target_options: keyword options for the target's factory (``backend``,
            ``pg_uri`` ...), JSON values only; ``pg_uri`` and ``pgdata`` are not part of
            the identity (nor written to ``config.json``).
        forget_requests: request kinds (:data:`evaluators.forget_requests.REQUEST_KINDS`)
            to forget through, in the user's words, after each deletion mode but
            ``none``, each on its own copy (``[]``: none); each user then also gets a
            planted fact.
        forget_about: what the requests ask to forget: ``secret`` and/or ``fact``.
        forget_resolver: the chat model spec that judges requests (``None``: the
            deterministic resolver, :mod:`graphs.forget_request`).
        weigh_vectors: weigh the leftover vectors at every scan
            (:mod:`memkit.residue.weigh`).
        probes: probe sets beyond the study's (``library``, probe files;
            :func:`evaluators.adversary.resolve_probes`); a file's SHA-256 is part of
            the identity. attack_budget: the adaptive attacker's queries per user.
        attacker_model: a chat model spec that plans the adaptive queries (``None``:
            the seeded policy). membership: run membership inference. With none of
            them set, a run's records and identity are those of a run before them.
    """

    data: str = "synthetic"
    n: int | None = Field(20, ge=1)
    seed: int = 0
    model: str = "extractive"
    summarizer_model: str | None = None
    summary_levels: list[int] = Field(default_factory=lambda: [0, 1, 2])
    ks: list[int] = Field(default_factory=lambda: list(DEFAULT_KS))
    deletion_modes: list[str] = Field(default_factory=lambda: list(STUDY_MODES))
    synthetic_sessions: int | list[int] = Field(default_factory=lambda: [2, 6])
    synthetic_turns: int | list[int] = Field(default_factory=lambda: [6, 10])
    max_tokens: int | None = Field(None, ge=1)
    base_url: str | None = None
    api_key_env: str | None = None
    n_resamples: int = Field(1000, ge=1)
    workers: int = Field(1, ge=1)
    keep_stores: bool = False
    design: str = "study"
    concurrency: int | None = Field(None, ge=1)
    rps: float | None = Field(None, gt=0)
    executor: str = "local"
    ray_address: str | None = None
    redact_hypotheses: bool = False
    target: str | None = None
    target_options: dict[str, Any] = Field(default_factory=dict)
    forget_requests: list[str] = Field(default_factory=list)
    forget_about: list[str] = Field(default_factory=lambda: ["secret"])
    forget_resolver: str | None = None
    weigh_vectors: bool = False

    @field_validator("forget_requests")
    @classmethod
    def _requests(cls, v: list[str]) -> list[str]:
        from evaluators.forget_requests import REQUEST_KINDS

        bad = [k for k in v if k not in REQUEST_KINDS]
        if bad:
            raise ValueError(f"unknown forget request kinds {bad}; choose from {list(REQUEST_KINDS)}")
        return [k for k in REQUEST_KINDS if k in v]

    @field_validator("forget_about")
    @classmethod
    def _about(cls, v: list[str]) -> list[str]:
        from evaluators.forget_requests import ABOUT

        bad = [a for a in v if a not in ABOUT]
        if bad or not v:
            raise ValueError(f"forget requests are about {list(ABOUT)}; got {v}")
        return [a for a in ABOUT if a in v]
    probes: list[str] = Field(default_factory=list)
    attack_budget: int = Field(0, ge=0)
    attacker_model: str | None = None
    membership: bool = False

    @field_validator("executor")
    @classmethod
    def _executor(cls, v: str) -> str:
        if v not in ("local", "ray"):
            raise ValueError(f"executor must be 'local' or 'ray', got {v!r}")
        return v

    def calls_in_flight(self, spec: str | None = None) -> int:
        """Responder calls in flight per worker for model ``spec`` (default ``model``):
        ``concurrency`` if set, else 1 for in-process backends (``extractive``,
        ``llamacpp:`` -- one model, one call at a time), 4 for ``ollama:`` (the
        server's default parallelism) and 8 for remote APIs. ``llamacpp:`` is
        always 1: a llama.cpp model object is not thread-safe."""
        spec = spec or self.model
        if spec == "extractive" or spec.startswith("llamacpp:"):
            return 1
        if self.concurrency is not None:
            return self.concurrency
        return 4 if spec.startswith("ollama:") else 8

    @field_validator("summary_levels")
    @classmethod
    def _levels(cls, v: list[int]) -> list[int]:
        bad = [s for s in v if s not in (0, 1, 2)]
        if bad or not v:
            raise ValueError(f"summary levels must be a non-empty subset of 0,1,2; got {v}")
        return sorted(set(v))

    @field_validator("ks")
    @classmethod
    def _ks(cls, v: list[int]) -> list[int]:
        if not v or any(k < 1 for k in v):
            raise ValueError(f"k values must be positive integers; got {v}")
        return sorted(set(v))

    @field_validator("deletion_modes")
    @classmethod
    def _modes(cls, v: list[str]) -> list[str]:
        bad = [m for m in v if m not in DELETION_MODES]
        if bad:
            raise ValueError(f"unknown deletion modes {bad}; choose from {list(DELETION_MODES)}")
        return [m for m in DELETION_MODES if m in v]

    def deletions(self, *, fork: bool, label: str | None = None) -> tuple[Any, ...]:
        """A unit's deletions (:class:`evaluators.runner.Deletion`): each deletion mode on
        its own copy, then each forget request kind about each item after each mode but
        ``none`` (on a copy); a target that cannot copy its memory forgets once, in place,
        with ``label``."""
        from evaluators.runner import Deletion

        if not fork:
            return (Deletion(label or "forget"),) if self.deletion_modes else ()
        out = [Deletion(mode, on_copy=True) for mode in self.deletion_modes]
        out += [Deletion(mode, on_copy=True, request=kind, about=about) for mode in self.deletion_modes
                if mode != "none" for about in self.forget_about for kind in self.forget_requests]
        return tuple(out)

    def model_kwargs(self) -> dict[str, Any]:
        """Constructor options for :func:`memkit.models.chat.chat_model` from this config.

        Raises:
            ValueError: ``api_key_env`` names an unset environment variable.
        """
        kw: dict[str, Any] = {}
        if self.max_tokens:
            kw["max_tokens"] = self.max_tokens
        if self.base_url:
            kw["base_url"] = self.base_url
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise ValueError(f"--api-key-env: the environment variable {self.api_key_env} is not set")
            kw["api_key"] = key
        return kw

    def identity(self) -> dict[str, Any]:
        """The fields that define the run's results (all but :data:`NOT_IDENTITY`), plus the
        SHA-256 of the data file, so a resume over changed data is refused."""
        ident = self.model_dump(exclude=NOT_IDENTITY)
        if ident.get("design") == "study":
            del ident["design"]  # runs from before designs existed resume unchanged
        for key, default in OPTIONAL_IDENTITY.items():
            if ident.get(key) == default:
                del ident[key]  # runs from before requests and vector weighing resume unchanged
        if ident.get("target") is None:
            ident.pop("target", None)  # a design run's identity is unchanged by targets
            ident.pop("target_options", None)
        else:
            # where the database lives changes no result (each unit has a schema of its
            # own) and a connection string may hold a password: never written
            ident["target_options"] = {k: v for k, v in self.target_options.items() if k not in ("pg_uri", "pgdata")}
        for key, default in (("probes", []), ("attack_budget", 0), ("attacker_model", None), ("membership", False)):
            if ident.get(key) == default:
                ident.pop(key, None)  # a run without the adversary keeps its identity
        files = [p for p in self.probes if p not in ("library", "study")]
        if files:
            ident["probes_sha256"] = {p: _file_sha256(p) for p in files}
        if self.data != "synthetic":
            ident["data_sha256"] = _file_sha256(self.data)
        return ident

    def adversary(self) -> Any:
        """The :class:`evaluators.adversary.AdversaryPlan` of ``probes``,
        ``attack_budget``, ``attacker_model`` and ``membership`` (token canaries), or
        ``None`` when none is set.

        Raises:
            ValueError: a bad probe file or option (named).
        """
        from evaluators.adversary import adversary_plan

        return adversary_plan(self.probes or None, budget=self.attack_budget, attacker_model=self.attacker_model,
                              membership=self.membership)

    @field_validator("probes")
    @classmethod
    def _probes(cls, v: list[str]) -> list[str]:
        out = []
        for spec in v:
            if spec in ("library", "study"):
                out.append(spec)
                continue
            p = Path(spec).expanduser()
            if not p.is_file():
                raise ValueError(f"{spec}: no such probe file (give 'library' or a JSON probe file)")
            out.append(str(p.resolve()))
        return out

    @field_validator("data")
    @classmethod
    def _data(cls, v: str) -> str:
        if v == "synthetic":
            return v
        p = Path(v).expanduser()
        if not p.exists():
            raise ValueError(f"{v} does not exist (give a LongMemEval JSON file or 'synthetic')")
        if not p.is_file():
            raise ValueError(f"{v} is not a file (give a LongMemEval JSON file or 'synthetic')")
        return str(p.resolve())


# --------------------------------------------------------------------------- data


def _file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def load_instances(config: SweepConfig) -> list[Instance]:
    """The sweep's instances (:func:`memkit.dataset.draw.draw_instances` with the
    config's data, ``n``, seed and synthetic sizes).

    Raises:
        memkit.dataset.longmemeval.LongMemEvalError: a malformed file (names file, record, field).
        ValueError: ``n=None`` with synthetic data.
    """
    return draw_instances(config.data, config.n, config.seed, sessions=_size(config.synthetic_sessions),
                          turns=_size(config.synthetic_turns))


def _size(v: int | list[int]) -> int | tuple[int, int]:
    return v if isinstance(v, int) else (int(v[0]), int(v[1]))


def unit_id(question_id: str, S: int | None) -> str:
    """A unit's id: ``question_id::S<S>``, or the question id for a target without S."""
    return question_id if S is None else f"{question_id}::S{S}"


def unit_collection(unit: str) -> str:
    return "u" + hashlib.sha1(unit.encode()).hexdigest()[:16]
