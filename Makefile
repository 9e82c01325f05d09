# Each target does its own set-up (scripts/setup.sh creates .venv, takes the CPU
# torch wheel where one is available, and installs memkit with the extras named).
.PHONY: sweep test setup lint bench clean

sweep:
	bash scripts/setup.sh
	.venv/bin/memkit sweep --resume $(ARGS)

test:
	bash scripts/setup.sh dev,llamacpp
	bash scripts/test.sh $(ARGS)

setup:
	bash scripts/setup.sh dev,llamacpp

lint:
	.venv/bin/ruff check memkit graphs evaluators tests benchmarks examples

bench:
	.venv/bin/python benchmarks/bench_sweep.py

clean:
	rm -rf .venv runs .pytest_cache .ruff_cache
