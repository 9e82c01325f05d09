"""An adversary as strong as the published ones, beside the study's fixed probes.

* :mod:`~evaluators.adversary.library`: the probe library as data (families, turns,
  sources), the study's nine as the ``study`` set, users' probes from a file or a list;
* :mod:`~evaluators.adversary.detect`: decode-then-match detectors and partial leakage
  in bits of the canary grammar;
* :mod:`~evaluators.adversary.attacker`: the adaptive attacker (seeded policy, or a chat
  model that plans);
* :mod:`~evaluators.adversary.memory`: memory extraction (MEXTRA's metric);
* :mod:`~evaluators.adversary.membership`: membership inference (AUC, TPR at 1% FPR);
* :mod:`~evaluators.adversary.run`: what the one unit runner asks
  (:attr:`evaluators.runner.UnitPlan.adversary`);
* :mod:`~evaluators.adversary.metrics` and :mod:`~evaluators.adversary.report`: the
  numbers (:func:`evaluators.aggregate.compute_metrics` calls them) and the report's
  section "How strong was the adversary".
"""

from evaluators.adversary.library import (
    AttackProbe,
    ProbeError,
    families,
    library,
    resolve_probes,
    study_probes,
)
from evaluators.adversary.run import AdversaryPlan, adversary_plan, calls_per_user, cost_text

__all__ = [
    "AdversaryPlan",
    "AttackProbe",
    "ProbeError",
    "adversary_plan",
    "calls_per_user",
    "cost_text",
    "families",
    "library",
    "resolve_probes",
    "study_probes",
]
