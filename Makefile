# Training Guard: every command a newcomer needs. Each target installs what it uses.
#   make demo    run the guard end to end on an emulated AWS (no account needed)
#   make test    lint, types and the whole test suite
#   make synth   synthesize the CloudFormation template offline (cdk.out/) and print the plan
#   make plan    one screen of what the guard will do with this configuration (CONFIG=file optional)
#   make preflight  check credentials, region, layer, concurrency, Slack secrets, Node.js (deploy runs it)
#   make bootstrap  once per account and region, before the first deploy (runs preflight first)
#   make deploy  deploy to the account and region of your AWS credentials (CONFIG=file optional)
#   make bench   measure cold start, AWS calls, latency, throughput, asset size, cost (bench-report: docs/benchmarks.md)
#   make first-day  time the README's two commands, each on a fresh clone
#   make mutation  mutation testing of the core, one module at a time (docs/mutation.md; MODULES=policy for one)
#   make scan    checkov on the synthesized template, offline, CONFIG=file optional (make test scans the shipped one)

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CDK := node_modules/.bin/cdk
# Every cdk command goes through a wrapper that passes the output on and adds a hint to the failures
# a new user meets ("Unable to resolve AWS account to use", an account never bootstrapped).
CDK_RUN := $(PY) -m training_guard_local.cdk_run

# uv makes the environments from the committed locks (uv.lock, tools/checkov/uv.lock): exact versions, seconds
# with a warm cache. It is installed at an exact version with the machine's own Python into an environment kept with
# the caches (one per uv version and Python, made once per machine, like the package caches: pip took 3 s of each fresh
# clone's set-up) that .uv links to, so a fresh machine needs only Python 3.11+, Node.js and the package registries.
# uv never downloads a Python here.
UV_VERSION := 0.13.9
UV := .uv/bin/uv
export UV_PYTHON_DOWNLOADS := never
export UV_PYTHON := $(PYTHON)
SYNC := $(UV) sync --locked --quiet
# What outlives a clone, like the package caches (the tests' template cache is there too).
TG_CACHE := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/training-guard
# mypy's cache of the (large, typed) aws-cdk-lib and boto3 packages.
export MYPY_CACHE_DIR ?= $(TG_CACHE)/mypy

# Python writes the bytecode of what it imports (the project's and .venv's __pycache__/, ignored by git), even where
# the environment sets PYTHONDONTWRITEBYTECODE (container images often do): without it, every process of a test run
# (each pytest process and worker, the CLI's subprocesses) compiled boto3, moto and aws-cdk-lib from source again,
# ~12 s of CPU each time pytest starts.
unexport PYTHONDONTWRITEBYTECODE

# No Node end-of-life banners, no CLI telemetry, no update or notice checks over the network.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true
export CDK_DISABLE_VERSION_CHECK := true
CDK_FLAGS := --no-notices
# A per-account configuration file: make deploy CONFIG=configs/prod.json
ifdef CONFIG
CDK_FLAGS += -c config=$(CONFIG)
endif

.PHONY: install report-screenshot slack-message-screenshot slack-thread-screenshot test lint config-docs typecheck unit infra synth plan preflight bootstrap deploy diff demo bench bench-report first-day \
	mutation clean scan training-logs

# The key of what is made from a lock file and kept with the caches: 16 hex digits of the lock and the Python version.
LOCK_KEY = $(shell $(PYTHON) -c 'import hashlib, sys; \
	print(hashlib.sha256(open(sys.argv[1], "rb").read() + sys.version.encode()).hexdigest()[:16])' $(1))

# One environment per uv version and Python. tools/install_uv.py makes it under a lock (two clones at once: the second
# waits, then finds it made); a venv made without pip is filled by this Python's pip when it is 22.3 or newer.
UV_ENV = $(TG_CACHE)/uv-$(UV_VERSION)-$(shell $(PYTHON) -c 'import hashlib, sys; \
	print(hashlib.sha256(sys.executable.encode() + sys.version.encode()).hexdigest()[:16])')
# The target is the marker install_uv.py writes last, named after the version: a new UV_VERSION is installed (and .uv
# linked to it) in a checkout that has the old one.
UV_PIN := .uv/.uv-$(UV_VERSION)-installed
$(UV_PIN):
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Training Guard needs Python 3.11 or newer (set PYTHON=python3.x)")'
	@$(PYTHON) tools/install_uv.py "$(UV_ENV)" $(UV_VERSION)
	@rm -rf .uv && ln -sfn "$(UV_ENV)" .uv

# .venv is synced when the lock, the project or uv changed since the last sync.
$(VENV)/.installed: $(UV_PIN) pyproject.toml uv.lock
	@echo "==> syncing $(VENV) with uv.lock"
	@$(SYNC) --extra dev
	@$(call VENV_BYTECODE,restore)
	@touch $@

# The bytecode of .venv's packages outlives the clone (tools/venv_bytecode.py: a new clone's first test run compiled
# ~17 s of CPU of it), one store per uv.lock and Python; make test and make demo save what they compiled.
VENV_BYTECODE = $(PYTHON) tools/venv_bytecode.py $(1) $(VENV) "$(TG_CACHE)/bytecode-$(call LOCK_KEY,uv.lock)"

node_modules/.installed: package.json package-lock.json
	@echo "==> installing the pinned AWS CDK CLI"
	@npm ci --no-audit --no-fund --loglevel=error
	@touch $@

install: $(VENV)/.installed node_modules/.installed

# Debian's Chromium renders the report's HTML and the Slack thread's picture in tests (a browser a package downloads
# at install time cannot be fetched on these machines), with Noto Color Emoji for the emoji Slack messages carry.
# Installed once per machine, as root or through sudo.
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	@echo "==> installing Debian's chromium (the report page and the Slack thread are rendered by tests)"
	@$(if $(filter 0,$(shell id -u)),,sudo) apt-get update -qq
	@$(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-color-emoji >/dev/null

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check functions infra local tests bench tools
	$(VENV)/bin/ruff format --check functions infra local tests bench tools
	$(PY) -m training_guard_local.config_docs --check

# Regenerate docs/configuration.md's table and configs/schema.json from the declarations in config.py.
config-docs: $(VENV)/.installed
	$(PY) -m training_guard_local.config_docs --write

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy

demo: install
	@$(VENV)/bin/training-guard demo $(if $(SCENARIO),--scenario $(SCENARIO)) $(if $(CONFIG),--config $(CONFIG)); \
		status=$$?; $(call VENV_BYTECODE,save); exit $$status

# Prints the figures; docs/benchmarks.md and the README's headline table are rewritten only by `make bench-report`.
bench: install
	$(PY) -m bench.run

# The README's picture of `training-guard report --html`, rendered by Chromium from a seeded emulated account.
report-screenshot: install $(CHROMIUM)
	$(PY) -m tests.e2e.test_report_chromium docs/report.png

# The README's picture of one Slack message, as the notifier renders it (slack-preview; no price: AWS is not reached).
slack-message-screenshot: install $(CHROMIUM)
	@mkdir -p cdk.out
	$(VENV)/bin/training-guard slack-preview --html cdk.out/slack-message.html tests/events/vanishing_gradient_issues_found.json
	$(PY) -c 'from pathlib import Path; from tests.e2e.test_report_chromium import screenshot; \
		screenshot(Path("cdk.out/slack-message.html"), Path("docs/slack-message.png"), window=(850, 560))'

# The README's picture of Slack app mode's thread, from the slack_app demo's recorded Slack Web API calls.
slack-thread-screenshot: install $(CHROMIUM)
	$(PY) -m tests.e2e.test_demo_slack_app docs/slack-thread.png

bench-report: install
	$(PY) -m bench.run --write

# The first day, measured: a fresh clone of HEAD, then `make demo` and `make test` in it, each timed.
first-day: install
	$(PY) -m bench.first_day

# Real training runs (torch, XGBoost, LightGBM, Keras, Lightning, Transformers on scikit-learn's data sets) whose logs
# the log-rules tests read: their own environment with the cache, never .venv (bench/training_logs/README.md).
TRAINING_LOGS_ENV = $(TG_CACHE)/training-logs-$(call LOCK_KEY,bench/training_logs/requirements.txt)
training-logs:
	@test -x "$(TRAINING_LOGS_ENV)/bin/python" || { rm -rf "$(TRAINING_LOGS_ENV).new" \
		&& $(PYTHON) -m venv "$(TRAINING_LOGS_ENV).new" \
		&& "$(TRAINING_LOGS_ENV).new/bin/pip" install --quiet --no-deps -r bench/training_logs/requirements.txt \
		&& mv "$(TRAINING_LOGS_ENV).new" "$(TRAINING_LOGS_ENV)"; }
	"$(TRAINING_LOGS_ENV)/bin/python" bench/training_logs/generate.py tests/data/training_logs
	$(PYTHON) -m bench.training_logs.facts tests/data/training_logs

# Mutation testing (minutes per module; not part of `make test`). mutmut comes from the lock's `mutation`
# extra; bench/mutation.py holds the module table. The next `make test` syncs it away again.
mutation: $(VENV)/.installed
	@$(SYNC) --extra dev --extra mutation
	$(PY) -m bench.mutation $(if $(MODULES),--modules "$(MODULES)")
	@$(SYNC) --extra dev

# checkov pins dependencies that clash with ours: it lives in its own environment, locked in tools/checkov/. That
# environment holds nothing of the project (a virtual project: the lock's packages only), so it is kept outside the
# clone, one per lock and Python, like the package caches, and tools/checkov/.venv links to it: a fresh clone finds
# it made and its bytecode written (checkov imports the checks of every framework it knows: compiling them took
# ~15 s of CPU in each new environment).
CHECKOV := tools/checkov/.venv/bin/checkov
CHECKOV_ENV = $(TG_CACHE)/checkov-$(call LOCK_KEY,tools/checkov/uv.lock)
SCAN_OUT := cdk.out/scan
$(CHECKOV): $(UV_PIN) tools/checkov/uv.lock
	@echo "==> syncing the checkov environment with tools/checkov/uv.lock"
	@# uv locks a project environment's creation by the project's path, so two clones making the same new environment
	@# would not wait for each other: the sync runs under a lock of the environment's own.
	@mkdir -p "$(TG_CACHE)"
	@UV_PROJECT_ENVIRONMENT="$(CHECKOV_ENV)" $(PYTHON) -c 'import fcntl, subprocess, sys; \
		held = open(sys.argv[1], "a"); fcntl.flock(held, fcntl.LOCK_EX); sys.exit(subprocess.call(sys.argv[2:]))' \
		"$(CHECKOV_ENV).lock" $(SYNC) --project tools/checkov
	@# a checkout made before the environment moved out has a directory here
	@if [ ! -L tools/checkov/.venv ]; then rm -rf tools/checkov/.venv; fi
	@ln -sfn "$(CHECKOV_ENV)" tools/checkov/.venv
	@touch $@

# lint, types, the CDK tests and the rest of the suite run side by side (make -j), each as soon as what it needs is
# installed (the environments and the CDK CLI install side by side too); pytest spreads the rest over every core.
# (make runs a line that names $(MAKE) under -n, -q and -t too: the save is left out of those)
NOT_RUNNING = $(strip $(foreach flag,n q t,$(findstring $(flag),$(firstword -$(MAKEFLAGS)))))
test: $(CHROMIUM)
	@$(MAKE) --no-print-directory -j4 --output-sync=target lint typecheck infra unit; status=$$?; \
		$(if $(NOT_RUNNING),,$(call VENV_BYTECODE,save);) exit $$status

# pytest-xdist workers: one per core (the infra process runs beside them, so the cores stay busy while some tests
# wait on local servers and sleeps; a third worker on 2 cores cost 19 s more CPU for the same wall time, measured
# when the bad-input campaign still ran in a process of its own beside them).
# Files stay whole on one worker (--dist loadfile), so a module's fixtures (an emulated deployment, a demo's run)
# are built once, not once per worker. They are handed out in the order they are collected (--no-loadscope-reorder:
# xdist's default hands out the files with the most tests first, which put the few-test, many-second fault campaigns
# last and left one worker finishing them alone; tests/campaign/ is collected first).
PYTEST_WORKERS ?= $(shell nproc 2>/dev/null || echo 1)
unit: install
	$(VENV)/bin/pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --ignore=tests/infra

# The CDK tests (synthesized templates, cdk-nag, cfn-lint, checkov) in one process of their own: each process that
# synthesizes starts the jsii runtime and loads aws-cdk-lib into Node.js (~12 s of CPU with the first synth), once
# here instead of once per pytest worker.
infra: install $(CHECKOV)
	$(VENV)/bin/pytest -p no:xdist tests/infra

# The app synthesized directly (no CDK CLI, no bundling, no credentials) with the context cdk.json
# gives the CLI (and CONFIG=file if set), then checkov on the template. --skip-download: no call
# to Prisma Cloud, so it runs offline.
scan: $(VENV)/.installed $(CHECKOV)
	@rm -rf $(SCAN_OUT)
	@CDK_OUTDIR=$(SCAN_OUT) TG_SCAN_CONFIG="$(CONFIG)" CDK_CONTEXT_JSON="$$($(PY) -c 'import json, os; \
		c = json.load(open("cdk.json"))["context"]; c["aws:cdk:bundling-stacks"] = []; \
		c.update({"config": os.environ["TG_SCAN_CONFIG"]} if os.environ["TG_SCAN_CONFIG"] else {}); \
		print(json.dumps(c))')" $(PY) -m infra.app
	$(CHECKOV) -f $(SCAN_OUT)/TrainingGuard.template.json --framework cloudformation \
		--compact --quiet --skip-download

# The plan: one screen of what the guard will do, from the same layered configuration the app reads.
PLAN := $(VENV)/bin/training-guard plan $(if $(CONFIG),--config $(CONFIG))

synth: install
	$(CDK_RUN) synth $(CDK_FLAGS) --quiet
	@# the templates of this synth (cdk.out keeps older ones): the stack's, or with an organization the hub's and the
	@# member stack's (the CLI then names the folder itself)
	@$(PY) -c 'import json; artifacts = json.load(open("cdk.out/manifest.json"))["artifacts"].values(); \
		print("\n".join("template: cdk.out/" + a["properties"]["templateFile"] for a in artifacts \
		if a.get("type") == "aws:cloudformation:stack"))'
	@echo
	@$(PLAN)

plan: install
	@$(PLAN)

diff: install
	$(CDK_RUN) diff $(CDK_FLAGS)

# What moto never checks, checked in the account first; a failure stops the deploy (exit 1).
preflight: install
	$(VENV)/bin/training-guard preflight $(if $(CONFIG),--config $(CONFIG))

deploy: preflight
	@$(PLAN)
	$(CDK_RUN) deploy $(CDK_FLAGS) $(CDK_DEPLOY_FLAGS)

# Once per account and region, before the first deploy: the CDK's staging bucket and roles (CDKToolkit stack).
bootstrap: preflight
	$(CDK_RUN) bootstrap $(CDK_FLAGS)

clean:
	rm -rf cdk.out .pytest_cache .mypy_cache .ruff_cache mutants .venv .uv tools/checkov/.venv node_modules
