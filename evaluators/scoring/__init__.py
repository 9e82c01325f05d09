"""How a call is scored: PR's answer rules (the default ``lme`` rule,
:mod:`evaluators.scoring.answer_rule` with :mod:`~evaluators.scoring.answer_numbers` and
:mod:`~evaluators.scoring.answer_abstain`; the study's rule and the metrics,
:mod:`evaluators.scoring.metrics`), the LLM judge (:mod:`evaluators.scoring.judge`,
:mod:`~evaluators.scoring.judge_parse`, :mod:`~evaluators.scoring.judge_run`), the rule's
agreement with a judge (:mod:`evaluators.scoring.pr_agreement`), and the study's probes
with their extraction detectors (:mod:`evaluators.scoring.probes`)."""

from evaluators.scoring.metrics import DEFAULT_PR_RULE, PR_RULES, answers_correct, bootstrap_ci
from evaluators.scoring.probes import LEVELS, PROBES, extracted, probes_for

__all__ = ["DEFAULT_PR_RULE", "LEVELS", "PROBES", "PR_RULES", "answers_correct", "bootstrap_ci", "extracted",
           "probes_for"]
