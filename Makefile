# ddpbench: `make bench` runs the plan, `make test` runs the tests, `make check` their fast tier.
# Each sets up what it needs.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
HOSTS ?= hosts/local.yaml
PLAN ?= quick
OUT ?= results
TEST_WORKERS ?= 2
# The CPU build of this version lies on the CI machines' disk; a host whose python3 has torch
# (in the system, a venv or a conda env) keeps its own: see `venv` below.
TORCH_VERSION := 2.13.0

# The pinned image (docs/image.md): LOCK picks docker/requirements/LOCK.lock
# (cuda, cuda-sdxl with diffusers, cpu); IMAGE names it (default ddpbench:VERSION[-LOCK]).
LOCK ?= cuda
IMAGE ?=
IMAGE_TARBALL ?=
IMAGE_ARG = $(if $(IMAGE),--tag $(IMAGE),)

.PHONY: bench test check report verify setup venv clean test-hosts test-hosts-stop image image-save image-load image-lock image-requirements

# The venv with the host's torch: when python3 has one, the venv sees python3's packages (the
# .pth file from bench/venv_pth.py: --system-site-packages alone shows only the base
# interpreter's, not those of a venv or conda env that python3 is); else it gets the CPU build.
# Set-up says how long it takes here (bench/setup_time.py) and each step before it, and pip says its
# progress; recipes whose text is code, not output, are not echoed (@).
$(VENV)/pyvenv.cfg:
	@$(PYTHON) -m bench.setup_time $(VENV) $(or $(MAKECMDGOALS),venv)
	@if $(PYTHON) -c "import torch" 2>/dev/null; then \
	  echo "make: a venv that uses the torch of $(PYTHON)"; \
	  $(PYTHON) -m venv --system-site-packages $(VENV) && \
	  $(PYTHON) bench/venv_pth.py > "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/host-python.pth"; \
	else \
	  echo "make: a venv with torch $(TORCH_VERSION), its CPU build (about 200 MB: half the set-up)"; \
	  $(PYTHON) -m venv $(VENV) && $(PY) -m pip install "torch==$(TORCH_VERSION)"; \
	fi || { rm -rf $(VENV); exit 1; }

venv: $(VENV)/pyvenv.cfg

# What `make bench` needs (the controller's packages, diffusers for the UNet presets); the tests' extras on top.
# A host without a package index (pip cannot even get setuptools) goes on when the packages the
# controller imports are there already: `make bench` runs `python -m bench` from this folder.
$(VENV)/.installed: pyproject.toml $(VENV)/pyvenv.cfg
	@echo "make: ddpbench and the packages it needs, into $(VENV)"
	@$(PY) -m pip install -e '.[sdxl]' || { $(PY) -c 'import bench.cli, bench.report' && \
	  echo "warning: pip could not install ddpbench (no package index?); its packages are importable, so make bench goes on (no ddpbench command, no diffusers unless installed)" >&2; }
	@touch $@

$(VENV)/.test-installed: $(VENV)/.installed
	@echo "make: the tests' packages, into $(VENV)"
	@$(PY) -m pip install -e '.[test]'
	@touch $@

setup: $(VENV)/.test-installed

bench: $(VENV)/.installed
	$(PY) -m bench run --hosts $(HOSTS) --plan $(PLAN) --out $(OUT)

# `make test` runs every test, or those of TESTS='tests/suites/test_ddp.py ...', in TEST_WORKERS
# processes (pytest-xdist; 0: in pytest's own). Many tests wait on ranks, daemons and timeouts: two
# workers keep both of CI's cores busy. Ctrl-C or a SIGTERM to make stops it cleanly: pytest is
# make's own child (exec: no shell between them to swallow the SIGTERM make passes on), and the
# tests end the daemons they started (tests/conftest.py).
# A SIGINT sent to make's process alone, not to its group as Ctrl-C sends it, make keeps to itself.
test: $(VENV)/.test-installed
	bash tests/system-deps.sh
	exec $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup $(TESTS)

# Before each commit: the tests not marked slow, under 3 minutes and 2.5 minutes of CPU on 2 cores,
# its 10 slowest named. It needs none of the system packages that `make test` installs, and leaves
# to `make test` (tests/tiers.py's FULL_ONLY): the sshd hosts, Slurm, Docker and browser tests, the
# plans run end to end over every suite and runtime (DDP, FSDP, collectives, verify, resume), the
# bad and hostile input run through the CLI, and the make targets.
# Only the CHECK files are collected: importing the others' modules cost 3 s of CPU.
check: $(VENV)/.test-installed
	exec $(PY) -m pytest -q -m "not slow" --durations=10 $$($(PY) -c 'from tests.tiers import CHECK; print(*CHECK)')

# Real SSH hosts on this machine (sshd on 127.0.0.2, 127.0.0.3, ...) for `make bench HOSTS=hosts/loopback.yaml`.
test-hosts: $(VENV)/.test-installed
	bash tests/system-deps.sh
	$(PY) tests/support/loopback_hosts.py start --count $(or $(COUNT),2) --python $(abspath $(PY))

test-hosts-stop: $(VENV)/.test-installed
	$(PY) tests/support/loopback_hosts.py stop

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

# make verify BUNDLE=their/bundle.json [HOSTS=hosts/mine.yaml] [ARGS='--tolerance busbw_gbps=0.1 --max-hours 4 ...']
# make exits 2 for any failed recipe and cannot pass verify's status on: the last line names it, and
# docs/verify.md gives the command that returns it.
verify: $(VENV)/.installed
	@test -n "$(BUNDLE)" || { echo "error: give the bundle to verify: make verify BUNDLE=path/to/bundle.json" >&2; exit 2; }
	@echo "$(PY) -m bench verify $(BUNDLE) --hosts $(HOSTS) --out $(OUT) $(ARGS)"
	@$(PY) -m bench verify $(BUNDLE) --hosts $(HOSTS) --out $(OUT) $(ARGS) || { status=$$?; \
	  case $$status in 1) said=FAIL;; 2) said="an input was refused";; 3) said=INCONCLUSIVE;; 4) said="NOT COMPARABLE";; *) said="stopped";; esac; \
	  echo "make verify: ddpbench verify exited $$status ($$said); make exits 2 for any failure, so a script that needs the status runs $(PY) -m bench verify itself" >&2; \
	  exit $$status; }

image: $(VENV)/.installed
	$(PY) -m bench image build --lock $(LOCK) $(IMAGE_ARG)

image-save: $(VENV)/.installed
	$(PY) -m bench image save --lock $(LOCK) $(IMAGE_ARG) $(if $(IMAGE_TARBALL),--out $(IMAGE_TARBALL),)

image-load: $(VENV)/.installed
	$(PY) -m bench image load $(IMAGE_TARBALL)

# Resolve the Dockerfile's base image tag to its registry digest and write it into the Dockerfile.
image-lock: $(VENV)/.installed
	$(PY) -m bench image lock

# The lock files from their .in files, with the hash of every wheel, resolved for the image's
# Python: 3.12 on the CUDA base (Ubuntu 24.04), 3.11 on the tests' Debian bookworm.
UV_COMPILE = $(abspath $(PY)) -m uv pip compile --no-config --quiet --generate-hashes \
  --custom-compile-command 'make image-requirements' --python-platform x86_64-manylinux_2_28
image-requirements: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[image]'
	cd docker/requirements && for lock in cuda cuda-sdxl; do \
	  $(UV_COMPILE) --python-version 3.12 --index-url https://pypi.org/simple $$lock.in -o $$lock.lock || exit 1; \
	done
	cd docker/requirements && $(UV_COMPILE) --python-version 3.11 --index-url https://pypi.org/simple \
	  --find-links /opt/wheels cpu.in -o cpu.lock

clean:
	rm -rf $(VENV) results report
