.PHONY: help dev test lint lint-fast docs docs-serve demo bench reliability dist wheel-test emulator fmt generate clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' Makefile | sed 's/:.*## /\t/'

dev:  ## build the extension into .venv (editable) with the test dependency group
	bash -c 'source scripts/_venv.sh && install_package --group test'

test:  ## everything: Rust tests, fmt, clippy, ruff, mypy, stubtest, pytest
	bash scripts/test.sh

lint:  ## formatting and static checks only (the lint half of scripts/test.sh: scripts/lint.sh)
	bash scripts/lint.sh

lint-fast:  ## the checks that build nothing: rustfmt, ruff, mypy, the layering check, the workflows (the pre-commit hook)
	bash scripts/lint.sh fast

fmt:  ## format Rust and Python
	cargo fmt --all
	.venv/bin/python -m ruff format python tests examples benches scripts
	.venv/bin/python -m ruff check --fix python tests examples benches scripts

docs:  ## build the documentation site into site/ (strict: broken links and undocumented names fail)
	NO_MKDOCS_2_WARNING=1 .venv/bin/python -m mkdocs build --strict

docs-serve:  ## serve the documentation site on 127.0.0.1:8000, rebuilt as you edit
	NO_MKDOCS_2_WARNING=1 .venv/bin/python -m mkdocs serve

generate:  ## regenerate the catalog's schema tables (Rust) and the typed methods (Python)
	.venv/bin/python scripts/gen_schema_tables.py
	.venv/bin/python scripts/gen_operations.py

demo:  ## install and run examples/quickstart.py (emulator unless credentials are set)
	bash scripts/demo.sh

bench:  ## benchmarks against httpx, requests, gql, aiohttp (see benches/)
	bash scripts/bench.sh

reliability:  ## hostile servers, bad inputs, properties, concurrency, fuzz: prints the README's table
	bash scripts/reliability.sh

dist:  ## release artefacts in dist/: sdist and a manylinux2014 abi3 wheel (zig, LTO, stripped)
	bash scripts/dist.sh

wheel-test:  ## install a wheel into a fresh venv without Rust on PATH; quickstart and a test smoke
	bash scripts/wheel_test.sh $(WHEEL)

emulator:  ## run the emulator standalone on port 8080
	.venv/bin/python -m secfindings.emulator --port 8080

clean:
	cargo clean
	rm -rf .venv dist python/secfindings/*.so
