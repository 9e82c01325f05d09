"""What a finished run says: the markdown/HTML report (:mod:`evaluators.report.markdown`)
with its figures (:mod:`evaluators.report.figures`) and tables
(:mod:`evaluators.report.tables`), the study's findings checked on it
(:mod:`evaluators.report.findings`), the hypotheses files
(:mod:`evaluators.report.hypotheses`), runs side by side
(:mod:`evaluators.report.compare`), and the CI outputs: SARIF
(:mod:`evaluators.report.sarif`) and baselines (:mod:`evaluators.report.baseline`).

Import each from its module: the package imports none of them, so a command that
needs only SARIF or a baseline does not pay for the report's plotting and statistics
(scikit-learn, SciPy, matplotlib)."""
