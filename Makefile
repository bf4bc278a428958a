# Training Guard: every command a newcomer needs. Each target installs what it uses.
#   make demo    run the guard end to end on an emulated AWS (no account needed)
#   make test    lint, types and the whole test suite
#   make synth   synthesize the CloudFormation template offline (cdk.out/)
#   make preflight  check credentials, region, layer, concurrency, Slack secrets, Node.js (deploy runs it)
#   make deploy  deploy to the account and region of your AWS credentials (CONFIG=file optional)
#   make bench   measure cold start, AWS calls, latency, throughput, asset size, cost (docs/benchmarks.md)
#   make mutation  mutation testing of the core, one module at a time (docs/mutation.md; MODULES=policy for one)
#   make scan    checkov on the synthesized template, offline (cdk-nag runs at every synth)

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CDK := node_modules/.bin/cdk

# No Node end-of-life banners, no CLI telemetry, no update or notice checks over the network.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true
export CDK_DISABLE_VERSION_CHECK := true
CDK_FLAGS := --no-notices
# A per-account configuration file: make deploy CONFIG=configs/prod.json
ifdef CONFIG
CDK_FLAGS += -c config=$(CONFIG)
endif

.PHONY: install test lint config-docs typecheck unit synth preflight deploy diff demo bench mutation clean scan

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Training Guard needs Python 3.11 or newer (set PYTHON=python3.x)")'
	@echo "==> creating $(VENV) and installing pinned Python dependencies"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[dev]"
	@touch $@

node_modules/.installed: package.json package-lock.json
	@echo "==> installing the pinned AWS CDK CLI"
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

install: $(VENV)/.installed node_modules/.installed

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check functions infra local tests bench
	$(VENV)/bin/ruff format --check functions infra local tests bench
	$(PY) -m training_guard_local.config_docs --check

# Regenerate the README's configuration table and configs/schema.json from the declarations in config.py.
config-docs: $(VENV)/.installed
	$(PY) -m training_guard_local.config_docs --write

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy

demo: install
	$(VENV)/bin/training-guard demo $(if $(SCENARIO),--scenario $(SCENARIO)) $(if $(CONFIG),--config $(CONFIG))

bench: install
	$(PY) -m bench.run

# Mutation testing (minutes per module; not part of `make test`). mutmut is installed here only, at an exact
# version, so that the project's dependencies stay as they are; bench/mutation.py holds the module table.
MUTMUT_VERSION := 3.8.1
$(VENV)/.mutmut-$(MUTMUT_VERSION): $(VENV)/.installed
	@echo "==> installing mutmut $(MUTMUT_VERSION) into $(VENV)"
	$(PY) -m pip install --quiet --disable-pip-version-check mutmut==$(MUTMUT_VERSION)
	@touch $@

mutation: $(VENV)/.mutmut-$(MUTMUT_VERSION)
	$(PY) -m bench.mutation $(if $(MODULES),--modules "$(MODULES)")

test: install lint typecheck scan
	$(VENV)/bin/pytest

# checkov pins dependencies that clash with ours: it lives in its own virtualenv, at an exact version.
CHECKOV_VERSION := 3.3.30
CHECKOV_VENV := .venv-checkov
SCAN_OUT := cdk.out/scan
$(CHECKOV_VENV)/.installed:
	@echo "==> creating $(CHECKOV_VENV) with checkov $(CHECKOV_VERSION)"
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check checkov==$(CHECKOV_VERSION)
	@touch $@

# The app synthesized directly (no CDK CLI, no bundling, no credentials) with the context cdk.json
# gives the CLI (and CONFIG=file if set), then checkov on the template. --skip-download: no call
# to Prisma Cloud, so it runs offline.
scan: $(VENV)/.installed $(CHECKOV_VENV)/.installed
	@rm -rf $(SCAN_OUT)
	@CDK_OUTDIR=$(SCAN_OUT) TG_SCAN_CONFIG="$(CONFIG)" CDK_CONTEXT_JSON="$$($(PY) -c 'import json, os; \
		c = json.load(open("cdk.json"))["context"]; c["aws:cdk:bundling-stacks"] = []; \
		c.update({"config": os.environ["TG_SCAN_CONFIG"]} if os.environ["TG_SCAN_CONFIG"] else {}); \
		print(json.dumps(c))')" $(PY) -m infra.app
	$(CHECKOV_VENV)/bin/checkov -f $(SCAN_OUT)/TrainingGuard.template.json --framework cloudformation \
		--compact --quiet --skip-download

synth: install
	$(CDK) synth $(CDK_FLAGS) --quiet
	@echo "template: cdk.out/TrainingGuard.template.json"

diff: install
	$(CDK) diff $(CDK_FLAGS)

# What moto never checks, checked in the account first; a failure stops the deploy (exit 1).
preflight: install
	$(VENV)/bin/training-guard preflight $(if $(CONFIG),--config $(CONFIG))

deploy: preflight
	$(CDK) deploy $(CDK_FLAGS) $(CDK_DEPLOY_FLAGS)

clean:
	rm -rf cdk.out .pytest_cache .mypy_cache .ruff_cache mutants
