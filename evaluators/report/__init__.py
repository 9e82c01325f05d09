"""What a finished run says: the markdown/HTML report (:mod:`evaluators.report.markdown`)
with its figures (:mod:`evaluators.report.figures`) and tables
(:mod:`evaluators.report.tables`), the study's findings checked on it
(:mod:`evaluators.report.findings`), the hypotheses files
(:mod:`evaluators.report.hypotheses`), runs side by side
(:mod:`evaluators.report.compare`), and the CI outputs: SARIF
(:mod:`evaluators.report.sarif`) and baselines (:mod:`evaluators.report.baseline`)."""

from evaluators.report.compare import UnpairedRunsError, compare_runs
from evaluators.report.findings import evaluate_findings
from evaluators.report.markdown import (
           canary_sentence,
           hypotheses_with_canaries,
           residue_sentences,
           write_report,
)

__all__ = ["UnpairedRunsError", "canary_sentence", "compare_runs", "evaluate_findings", "hypotheses_with_canaries",
           "residue_sentences", "write_report"]
