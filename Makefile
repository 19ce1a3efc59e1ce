# fivespot: every target installs what it needs into .venv/ first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The lowest versions pyproject.toml allows (tools/lower_bounds.py), to prove the lower bounds.
LOWEST := .venv-lowest
LOWEST_STAMP := $(LOWEST)/.installed
# What the unit suite cannot reach runs at the lower bounds too: gunicorn and TLS serving, the
# kubernetes client (watches, leases, status writes), the API server calling a webhook.
LOWEST_INTEGRATION := tests/integration/test_control_plane_is_real.py \
	tests/integration/test_webhook_server.py tests/integration/test_providers.py
# The Kubernetes versions (fivespot/policies/kubeversions.py; docs/reference/kubernetes-versions.md): the whole suite
# runs on one, KUBERNETES_VERSION (`make test KUBERNETES_VERSION=1.34`), else the default; on every
# other supported minor, `test-versions` runs the tests whose outcome depends on the API server's
# version: compile's CRD rules against the server, the fidelity corpus (whole Status identical),
# the compiled example installed and its policies type-checked, the example applied wave by wave
# with the webhook called by the API server, host governance through the webhook, the capacity
# controller's flip, and a `fivespot init` repo installed and running.
VERSION_TESTS := tests/integration/test_kubernetes_versions.py \
	tests/integration/test_checker_fidelity.py \
	tests/integration/test_author_rights.py \
	tests/integration/test_compiled_example_installs.py::test_whole_example_applies_server_side_and_every_crd_is_established \
	tests/integration/test_compiled_example_installs.py::test_every_compiled_policy_type_checks_without_warnings \
	tests/integration/test_gitops_waves.py::test_a_first_install_straight_to_fail_refuses_no_write_after_any_healthy_wave \
	tests/integration/test_webhook_admission.py::test_host_governance_denies_a_scheduled_capacity_on_a_governed_node_via_the_api_server \
	tests/integration/test_capacity_controller.py::test_schedule_on_writes_the_active_value_and_reports_active \
	tests/integration/test_install.py::test_install_from_init_runs_everything_and_a_schedule_flips_a_target
CLUSTER_DIR := .cluster
EXAMPLE := examples/agent-sandbox

.PHONY: soak-governance install run test unit-then-lowest unit integration test-lowest typecheck imports controlplane engines engines-then-peers cluster cluster-down clean golden demo bench bench-compile bench-check bench-webhook bench-webhook-creates bench-capacity bench-providers bench-market-open bench-peers peers bench-composite bench-deploy bench-gitops bench-audit bench-informers bench-faults image image-lock reference kind

.PHONY: controlplane-versions test-versions docs test-docs

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,calendars,docs,image]'
	@touch $(STAMP)

# The main job on the bundled example: compile it and show the verdicts for its fixtures.
run: install
	$(BIN)/fivespot run-example $(EXAMPLE)/config --out out

$(LOWEST_STAMP): pyproject.toml tools/lower_bounds.py $(STAMP)
	@test -x $(LOWEST)/bin/python || $(PYTHON) -m venv $(LOWEST)
	$(LOWEST)/bin/python -m pip install --quiet --upgrade pip
	$(BIN)/python tools/lower_bounds.py > $(LOWEST)/constraints.txt
	$(LOWEST)/bin/python -m pip install --quiet -c $(LOWEST)/constraints.txt -e '.[dev,calendars,image]'
	@touch $@

# Builds (or reuses) the control plane, then the whole suite: the type check, the layer contracts,
# unit tests, the docs site and the lower bounds, then integration tests. The GitOps engines the last integration
# tests sync with (`make engines`), then the peers the import equivalence test runs (`make peers`,
# ~5 minutes cold), build (or are reused) beside the unit tests and the lower
# bounds, which leave a core mostly idle: a cold engine build is ~20 CPU-minutes (~10 minutes of
# both cores, plus 5 GB of modules; bench/RESULTS.md). pytest exits 5 when it collects no test; make
# treats that as a failure.
# The other supported Kubernetes versions' control planes (`controlplane-versions`, ~33 CPU-minutes
# cold) build beside the integration tests, niced: those wait on servers and use about a quarter of
# the machine. The versions' own tests (`test-versions`) run last.
test: install controlplane typecheck imports
	$(MAKE) --no-print-directory -j2 unit-then-lowest engines-then-peers
	$(MAKE) --no-print-directory -j2 integration controlplane-versions
	$(MAKE) --no-print-directory test-versions

unit-then-lowest: install controlplane
	$(BIN)/python -m pytest -m unit
	$(MAKE) --no-print-directory test-docs
	$(MAKE) --no-print-directory test-lowest

# The docs site built strictly (every warning an error), the addresses fivespot names looked up in
# it, and its pages rendered by headless Chromium (tests/docs/). The tutorial's and the how-tos'
# commands run with the integration tests (tests/integration/test_docs_commands.py).
test-docs: install
	$(BIN)/python -m pytest -m docs

# The unit suite and LOWEST_INTEGRATION on the lowest dependency versions pyproject.toml allows
# (about 4 min; bounded at 20). The generated-input test runs once, in `unit`: it exercises
# fivespot's own error paths, not the libraries', and is the slowest unit test.
test-lowest: $(LOWEST_STAMP) controlplane
	timeout 1200 $(LOWEST)/bin/python -m pytest -m unit -q --ignore=tests/unit/test_generated_inputs.py
	timeout 1200 $(LOWEST)/bin/python -m pytest -m integration -q $(LOWEST_INTEGRATION)

unit: install
	$(BIN)/python -m pytest -m unit

integration: install controlplane engines peers
	$(BIN)/python -m pytest -m integration

typecheck: install
	$(BIN)/python -m mypy
	$(BIN)/python -m mypy --strict image/build.py image/supply_chain.py

# The layers (docs/explanation/architecture.md): every contract in .importlinter must hold, the
# one that forbids import circles inside a package too.
imports: install
	$(BIN)/lint-imports

controlplane: install
	$(BIN)/python -m fivespot.devcluster build

# Every supported minor's control plane (each cached apart; etcd built once).
controlplane-versions: install
	nice -n 19 $(BIN)/python -m fivespot.devcluster build --all-versions

# VERSION_TESTS on every supported minor but the selected one, one after the other.
test-versions: install controlplane-versions
	@for version in $$($(BIN)/python -m fivespot.devcluster versions --others); do \
		echo "== Kubernetes $$version: the version-dependent tests"; \
		KUBERNETES_VERSION=$$version $(BIN)/python -m pytest -m integration -q $(VERSION_TESTS) || exit 1; \
	done

# The real GitOps engines the end-to-end tests sync with (Argo CD, Flux, kustomize, redis), pinned
# in tools/engines/versions and built once into ~/.cache/fivespot/engines (fivespot/devcluster/engines.py);
# and KEDA's ScaledObject CRD, pinned in tools/crds/versions (fivespot/devcluster/upstream_crds.py).
engines: install
	$(BIN)/python -m fivespot.devcluster engines

# The engines, then the peers `fivespot import`'s equivalence test runs (marker `peers`; about 5
# minutes cold, cached like the engines): one Go build at a time, beside the unit tests.
engines-then-peers: install
	$(MAKE) --no-print-directory engines
	$(MAKE) --no-print-directory peers

cluster: controlplane
	$(BIN)/python -m fivespot.devcluster up --state-dir $(CLUSTER_DIR)

cluster-down: install
	$(BIN)/python -m fivespot.devcluster down --state-dir $(CLUSTER_DIR)

clean:
	rm -rf $(VENV) $(LOWEST) out .pytest_cache .mypy_cache .hypothesis .import_linter_cache

golden: install
	$(BIN)/fivespot compile $(EXAMPLE)/config --out tests/unit/golden/agent-sandbox

# Regenerate docs/reference/kinds.md (every kind, field by field) after a model changed.
reference: install
	$(BIN)/fivespot reference > docs/reference/kinds.md

# The docs site (docs/, Sphinx + MyST) into build/docs/, every warning an error: a broken link or
# anchor, a page in no table of contents, a directive that fails. Open build/docs/index.html.
docs: install
	$(BIN)/sphinx-build -W --keep-going -n -q -b html docs build/docs

# The container image, without a container engine (image/build.py; needs apt, umoci, skopeo):
# build/image/oci (OCI layout) and build/image/fivespot-VERSION.docker.tar (docker load, kind
# load image-archive), with its CycloneDX SBOM (sbom.cdx.json), its in-toto SLSA provenance
# (provenance.intoto.json) and inputs.txt beside them. Rebuilt only when an input changed; caches
# in ~/.cache/fivespot/image.
image: install
	$(BIN)/python image/build.py build --out build/image --reuse

# kind, for users with Docker: create a kind cluster, load the image, compile CONFIG and install it.
kind: image
	image/kind.sh $(or $(CONFIG),$(EXAMPLE)/config)

# Re-pin image/requirements.txt and image/build-requirements.txt to what pyproject.toml allows
# today (then `make image`).
image-lock: install
	$(BIN)/python image/build.py lock

# Local control plane + compiled example + webhook, provider and capacity controller as local
# processes; flips a ManualSchedule and shows `kubectl get scap` through a whole handback.
demo: install controlplane
	$(BIN)/python -m fivespot.devcluster.demo

# Benchmarks (not tests): each prints its numbers; record them in bench/RESULTS.md.
bench: bench-compile bench-check bench-webhook bench-capacity bench-providers bench-composite bench-deploy bench-gitops bench-audit

bench-compile: install
	$(BIN)/python bench/compile/run.py

bench-check: install controlplane
	$(BIN)/python bench/check/run.py
	$(BIN)/python bench/check/cli.py

bench-webhook: install controlplane
	$(BIN)/python bench/webhook/run.py

# A burst of ScheduledCapacity creates through the webhook, the target guard's writes meanwhile.
bench-webhook-creates: install controlplane
	$(BIN)/python bench/webhook/creates.py

soak-governance: install controlplane
	FIVESPOT_SOAK_TRIALS=1000 $(BIN)/python -m pytest -m integration -q -s tests/integration/test_capacity_governance.py -k under_load

bench-capacity: install controlplane
	$(BIN)/python bench/capacity/run.py

bench-providers: install controlplane
	$(BIN)/python bench/providers/run.py

# Market open (issue 16): every object on one schedule flips at once, beside a bare client.
# fivespot beside kube-green and GoKubeDownscaler on one control plane (issue 39): the peers are
# pinned in tools/peers/versions and built once into ~/.cache/fivespot/peers (fivespot/devcluster/peers.py);
# about 30 minutes; prints one table (docs/explanation/compared.md says how to read it).
peers: install
	$(BIN)/python -m fivespot.devcluster peers

bench-peers: install controlplane peers
	$(BIN)/python bench/peers/run.py

bench-market-open: install controlplane
	$(BIN)/python bench/capacity --objects 0 --rounds 0 --burst-separate 0 --grow-to 0 --burst 1000
	$(BIN)/python bench/providers --burst 1000

bench-composite: install controlplane
	$(BIN)/python bench/providers/composite.py

# The image build (time, reproducibility, size) and `fivespot install` until Available.
bench-deploy: install controlplane
	$(BIN)/python bench/deploy/run.py

# Recovery from each API server and webhook fault the suite injects, over several rounds.
bench-faults: install controlplane
	$(BIN)/python bench/faults/run.py

# fivespot audit over 10,000 stored objects beside kubectl's listing of them (issue 30).
bench-audit: install controlplane
	$(BIN)/python bench/audit/run.py

# One informer per namespace against one cluster-wide: threads, memory, watches (issue 36).
bench-informers: install controlplane
	$(BIN)/python bench/informers/run.py

# From a push to the config repo to the policy in force, with real Argo CD and real Flux.
bench-gitops: install controlplane engines
	$(BIN)/python bench/gitops/run.py
