# ddpbench: `make bench` runs the plan, `make test` runs the tests. Both set up what they need.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
HOSTS ?= hosts/local.yaml
PLAN ?= quick
OUT ?= results
# The CPU build of this version lies on the CI machines' disk; a GPU host that already has
# torch keeps its own (the venv sees the system's site-packages).
TORCH_VERSION := 2.13.0

.PHONY: bench test report verify setup clean test-hosts test-hosts-stop

$(VENV)/.installed: pyproject.toml
	@if $(PYTHON) -c "import torch" 2>/dev/null; then \
	  $(PYTHON) -m venv --system-site-packages $(VENV); \
	else \
	  $(PYTHON) -m venv $(VENV) && $(PY) -m pip install -q "torch==$(TORCH_VERSION)"; \
	fi
	$(PY) -m pip install -q -e '.[test]'
	@touch $@

setup: $(VENV)/.installed

bench: $(VENV)/.installed
	$(PY) -m bench run --hosts $(HOSTS) --plan $(PLAN) --out $(OUT)

test: $(VENV)/.installed
	bash tests/system-deps.sh
	$(PY) -m pytest -q

# Real SSH hosts on this machine (sshd on 127.0.0.2, 127.0.0.3, ...) for `make bench HOSTS=hosts/loopback.yaml`.
test-hosts: $(VENV)/.installed
	bash tests/system-deps.sh
	$(PY) tests/loopback_hosts.py start --count $(or $(COUNT),2) --python $(abspath $(PY))

test-hosts-stop: $(VENV)/.installed
	$(PY) tests/loopback_hosts.py stop

# `make report BUNDLES='results/*/bundle.json downloaded/*.json' OUT=report/`: every word of BUNDLES
# reaches the CLI quoted, so the CLI expands the globs itself and names one that matches nothing.
# OUT defaults to report/ here (results/ holds the runs).
REPORT_OUT = $(if $(filter command line environment,$(origin OUT)),$(OUT),report)
ifneq ($(filter report,$(MAKECMDGOALS)),)
ifeq ($(strip $(BUNDLES)),)
$(error BUNDLES is empty: say which bundles, e.g. make report BUNDLES='results/*/bundle.json' OUT=report/)
endif
endif

report: $(VENV)/.installed
	$(PY) -m bench report $(foreach b,$(BUNDLES),'$(b)') --out $(REPORT_OUT)

# make verify BUNDLE=their/bundle.json [HOSTS=hosts/mine.yaml] [ARGS='--tolerance busbw_gbps=0.1 ...']
verify: $(VENV)/.installed
	@test -n "$(BUNDLE)" || { echo "error: give the bundle to verify: make verify BUNDLE=path/to/bundle.json" >&2; exit 2; }
	$(PY) -m bench verify $(BUNDLE) --hosts $(HOSTS) --out $(OUT) $(ARGS)

clean:
	rm -rf $(VENV) results report
