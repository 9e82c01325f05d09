"""``python -m evaluators.cli``: the ``memkit`` command."""

from evaluators.cli import app

app()
