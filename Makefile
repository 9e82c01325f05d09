# Each target does its own set-up (scripts/setup.sh creates .venv, takes the CPU
# torch wheel where one is available, and installs memkit with the extras named).
.PHONY: sweep test setup lint bench clean

# Each set of ARGS gets its own output directory (runs/sweep for none), so a second
# `make sweep` resumes and `make sweep ARGS=...` never collides with an earlier run;
# an --out inside ARGS wins (the last --out given is the one used).
SWEEP_OUT = runs/sweep$(if $(strip $(ARGS)),-$(shell printf '%s' '$(ARGS)' | sha1sum | cut -c1-8))

sweep:
	bash scripts/setup.sh
	.venv/bin/memkit sweep --resume --out $(SWEEP_OUT) $(ARGS)

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
	rm -rf .venv runs .pytest_cache .ruff_cache build memkit/scan/*.so
