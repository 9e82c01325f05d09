"""Run :func:`evaluators.audit.audit` over a :class:`~evaluators.targets.base.Target`.

The audit's protocol is unchanged (docs/audit.md): plant one canary per user, feed,
ask the question and every probe in fresh conversations, forget, ask again. A target
adds what the callables could not say:

* every surface is scanned **before the forget** (each must show the planted copies:
  a surface that shows none there proves nothing afterwards), **after the forget**,
  and after **each deletion step** asked for (``steps``: e.g. ``vacuum``,
  ``vacuum_full``, ``checkpoint_wal``), so the report says what each step leaves;
* the forget is the target's own API: ``forget_scope="secret"`` calls
  ``forget_secret(secret, user)``, ``"user"`` calls ``forget_user(user)``; with
  ``delete_threads`` the user's conversations are deleted too;
* an operation the target lacks is reported **n/a** (never 0): a forget it cannot do
  leaves the after-forget metrics n/a; a step it has not is listed as n/a.

:class:`TargetAuditResult` is an :class:`~evaluators.audit.AuditResult` with the
surface table (``surface_scans``), whose ``residue`` holds, per surface, how many
users' canaries the last phase still finds (surfaces not checked are left out of
``residue`` and listed in ``residue_unchecked`` with the reason; a surface read only
in part is in both).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evaluators.audit import AuditResult
from evaluators.targets.base import NotApplicable, SurfaceScan, Target, scan_all

__all__ = ["FORGET_SCOPES", "TargetAuditResult", "audit_target"]

FORGET_SCOPES = ("secret", "user")
"""What a target's forget deletes: one secret of a user, or the whole user."""


@dataclass
class TargetAuditResult(AuditResult):
    """An :class:`~evaluators.audit.AuditResult` of a target (module doc).

    Attributes:
        target: the target's name. forget_scope: ``secret`` or ``user``.
        forget_na: why the forget was not applicable (``None`` when it ran).
        phases: the scan phases in order: ``before``, ``forget``, then each step.
        steps_na: deletion steps asked for that the target has not, with why.
        surface_scans: phase -> surface -> :meth:`SurfaceScan.to_dict`.
    """

    target: str = "target"
    forget_scope: str = "secret"
    forget_na: str | None = None
    phases: list[str] = field(default_factory=list)
    steps_na: dict[str, str] = field(default_factory=dict)
    surface_scans: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    def cell(self, phase: str, surface: str) -> str:
        """The table cell: ``k/n (c)``: k of n users' canaries, c copies (``+s stale``
        unattributed vectors; ``, partly unread`` when part of the surface was not
        read), or ``not checked`` / ``n/a``."""
        d = self.surface_scans.get(phase, {}).get(surface)
        if d is None:
            return "n/a"
        if d["status"] != "checked":
            return "not checked" if d["status"] == "not_checked" else "n/a"
        extra = f" +{len(d['unattributed'])} stale" if d.get("unattributed") else ""
        extra += ", partly unread" if d.get("partial") else ""
        return f"{d['holders']}/{self.n} ({sum(d['copies'])}){extra}"

    def to_dict(self, *, records: bool = False) -> dict[str, Any]:
        out = super().to_dict(records=records)
        out.update({"target": self.target, "forget_scope": self.forget_scope,
                    "forget_na": self.forget_na, "phases": self.phases, "steps_na": self.steps_na,
                    "surface_scans": self.surface_scans})
        return out

    def to_markdown(self) -> str:
        text = super().to_markdown()
        lines = ["", f"## Surfaces of `{self.target}`", "",
                 "Users whose canary the surface holds / users (copies found). "
                 "`not checked`: memkit could not read it (never clean); `n/a`: the target "
                 "keeps no such surface.", ""]
        if self.forget_na:
            lines += [f"Forget ({self.forget_scope}): n/a: {self.forget_na}.", ""]
        for step, why in self.steps_na.items():
            lines += [f"Deletion step `{step}`: n/a: {why}.", ""]
        names = list(dict.fromkeys(s for p in self.phases for s in self.surface_scans.get(p, {})))
        heads = {"before": "before forget", "forget": "after forget"}
        lines.append("| surface | " + " | ".join(heads.get(p, f"after {p}") for p in self.phases) + " |")
        lines.append("|---" * (len(self.phases) + 1) + "|")
        for name in names:
            lines.append(f"| {name} | " + " | ".join(self.cell(p, name) for p in self.phases) + " |")
        reasons = {n: d["reason"] for p in self.phases for n, d in self.surface_scans[p].items()
                   if d["status"] != "checked" and d.get("reason")}
        notes = {n: d["notes"] for p in self.phases for n, d in self.surface_scans[p].items() if d.get("notes")}
        if reasons:
            lines += ["", "Not checked / n/a: " + "; ".join(f"`{n}`: {r}" for n, r in reasons.items()) + "."]
        if notes:
            lines += ["", "Notes: " + "; ".join(f"`{n}`: {' '.join(v)}" for n, v in notes.items())]
        return text + "\n".join(lines) + "\n"



def audit_target(
    target: Target,
    *,
    forget_scope: str = "secret",
    steps: Sequence[str] = (),
    delete_threads: bool = False,
    forget: bool = True,
    data: Any = "synthetic",
    n: int = 4,
    seed: int = 0,
    kind: str = "token",
    synthetic_sessions: int | tuple[int, int] = (2, 4),
    synthetic_turns: int | tuple[int, int] = (6, 8),
    n_resamples: int = 1000,
) -> Any:
    """Audit a target (module doc): PR, AER before and after the forget, and every
    surface before the forget, after it, and after each deletion step.

    Args:
        target: the memory system (:class:`~evaluators.targets.base.Target`).
        forget_scope: ``"secret"`` (``forget_secret``) or ``"user"`` (``forget_user``).
        steps: deletion steps to run after the forget, in this order (names of
            :meth:`Target.deletion_steps`; one the target has not is reported n/a).
        delete_threads: also delete each user's conversations after the forget.
        forget: ``False`` skips the forget (surfaces are scanned once, ``before``).
        data, n, seed, kind, synthetic_sessions, synthetic_turns, n_resamples: as in
            :func:`evaluators.audit.audit`.

    Returns:
        A :class:`TargetAuditResult` (an :class:`~evaluators.audit.AuditResult`).

    Raises:
        ValueError: unknown ``forget_scope``; ``n`` or ``data`` as in ``audit``.
    """
    from evaluators.audit import audit, load_audit_instances, user_id_for
    from memkit.canaries import plant

    if forget_scope not in FORGET_SCOPES:
        raise ValueError(f"forget_scope must be one of {FORGET_SCOPES}, got {forget_scope!r}")
    instances = load_audit_instances(data, n, seed, synthetic_sessions=synthetic_sessions,
                                     synthetic_turns=synthetic_turns)
    secrets = [plant(inst, seed, kind=kind)[1].value for inst in instances]
    users = [user_id_for(inst) for inst in instances]
    surfaces = target.surfaces()
    scans: dict[str, dict[str, SurfaceScan]] = {}
    phases: list[str] = []
    steps_na: dict[str, str] = {}
    operation = "forget_secret" if forget_scope == "secret" else "forget_user"
    forget_na: str | None = None if target.supports(operation) else f"{target.name} has no {operation}"
    if forget_na is None and delete_threads and not target.supports("delete_threads"):
        steps_na["delete_threads"] = f"{target.name} keeps no conversations to delete"
    calls = {"n": 0}

    def scan(phase: str) -> None:
        phases.append(phase)
        scans[phase] = scan_all(surfaces, secrets)

    def run_forget(secret: str, user: str) -> None:
        nonlocal forget_na
        if calls["n"] == 0:
            scan("before")
        calls["n"] += 1
        try:
            if forget_scope == "secret":
                target.forget_secret(secret, user)
            else:
                target.forget_user(user)
            if delete_threads and "delete_threads" not in steps_na:
                target.delete_threads(user)
        except NotApplicable as exc:
            forget_na = str(exc)
        if calls["n"] == len(users):
            scan("forget")
            available = target.deletion_steps()
            for step in steps:
                if step not in available:
                    steps_na[step] = f"{target.name} has no deletion step {step!r} (it has: {', '.join(available) or 'none'})"
                    continue
                available[step]()
                scan(step)

    def ask(text: str, user_id: str, thread_id: str | None = None) -> str:
        return target.ask(text, user_id, thread_id or f"memkit-audit:{uuid.uuid4().hex}")

    do_forget = forget and forget_na is None
    base = audit(
        ask, feed=target.feed, forget=run_forget if do_forget else None,
        forget_mode=f"{forget_scope} via {target.name}" if do_forget else None,
        data=list(instances), n=len(instances), seed=seed, kind=kind, residue=False,
        n_resamples=n_resamples,
    )
    if not do_forget:
        scan("before")
    result = TargetAuditResult(**{k: getattr(base, k) for k in base.__dataclass_fields__})
    result.data = data if isinstance(data, str) else "instances"
    result.target, result.forget_scope, result.phases, result.steps_na = target.name, forget_scope, phases, steps_na
    result.forget_na = forget_na if forget else "the forget was not asked for"
    if forget_na is not None and do_forget:  # raised at run time: the after-forget numbers mean nothing
        result.pr_after = result.pr_study_after = None
        result.aer_after = result.frs = None
    if forget_na is not None and forget:
        result.forget_mode = f"n/a ({forget_na})"
    result.surface_scans = {p: {name: s.to_dict(secrets) for name, s in scans[p].items()} for p in phases}
    last = scans[phases[-1]]
    result.residue = {name: s.holders(secrets) for name, s in last.items() if s.status == "checked"}
    result.residue_unchecked = {name: [s.reason or s.status] for name, s in last.items() if s.status != "checked"}
    result.residue_unchecked.update({name: [f"partly not read: {s.partial}"] for name, s in last.items()
                                     if s.status == "checked" and s.partial})
    return result
