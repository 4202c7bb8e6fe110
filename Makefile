# Entry points. Each one sets up first: tools/setup.sh skips what is already done, so it is quick.
PY := .venv/bin/python
PYTEST_ARGS ?=

.PHONY: setup test demo bench clean distclean

setup:
	bash tools/setup.sh

test: setup
	$(PY) -m ruff check .
	$(PY) tools/check_imports.py
	bash tools/typecheck.sh
	$(PY) -m pytest $(PYTEST_ARGS)

demo: setup
	.venv/bin/ddb2bt demo

bench: setup
	$(PY) -m benchmarks.run

# Caches and the locally built emulator; `distclean` also drops the venv and node_modules.
clean:
	rm -rf .pytest_cache .hypothesis .cache build dist tools/emulator/bttest-emulator
	find . -path ./.venv -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf .venv tools/node/node_modules
