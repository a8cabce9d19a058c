# lmcache_vllm.fleet — the two entry points, the day-two playbooks and a few helpers.
SHELL := /bin/bash
ENV := source scripts/env.sh &&
# The day-two targets run against INVENTORY (default: the sandbox of `make deploy`); ARGS are added to
# ansible-playbook's command line, e.g.  make status INVENTORY=inventories/prod ARGS="--limit gpu-01"
INVENTORY ?= inventories/sandbox
ARGS ?=
FLEET_CACHE ?= /var/cache/lmcache-vllm-fleet
PLAY := $(ENV) ansible-playbook -i $(INVENTORY)

# `make` alone lists the targets; nothing is installed or deployed without naming a target.
.DEFAULT_GOAL := help

.PHONY: help deploy test setup test-packages lint sanity unit sandbox-down clean distclean \
	validate plan status remove monitoring gpus

## help: list the targets (what `make` alone does)
help:
	@echo "lmcache_vllm.fleet: make <target> [INVENTORY=inventories/sandbox] [ARGS='...']"
	@sed -n 's/^## \{0,1\}/  /p' $(firstword $(MAKEFILE_LIST))

## deploy: bring up the local sandbox fleet (podman hosts with systemd) and deploy it
deploy:
	bash scripts/setup-tools.sh
	bash scripts/download-wheels.sh
	bash scripts/setup-testhosts.sh
	$(ENV) ansible-playbook playbooks/sandbox_up.yml
	$(ENV) ansible-playbook -i inventories/sandbox playbooks/deploy.yml

## test: install everything the tests need, then run every test
test:
	bash scripts/test.sh

## setup: the tool venv (ansible, pytest, molecule) and the collection path (installs no system package)
setup:
	bash scripts/setup-tools.sh

## test-packages: the Debian packages the tests run (redis-server, prometheus-redis-exporter)
test-packages:
	bash scripts/setup-test-packages.sh

## lint: ansible-lint --profile production
lint: setup
	$(ENV) ansible-lint --profile production

## sanity: ansible-test sanity
sanity: setup
	bash scripts/sanity.sh

## unit: the unit and playbook tests (pytest)
unit: setup test-packages
	$(ENV) python -m pytest -p no:cacheprovider tests/unit tests/playbooks

## sandbox-down: remove the sandbox hosts of `make deploy`
sandbox-down: setup
	$(ENV) ansible-playbook playbooks/sandbox_down.yml

## The day-two targets, one recipe (each runs playbooks/<target>.yml against INVENTORY):
##   validate: check every host's variables (no host contacted)
##   plan: predict N and render every host's unit files on this machine (no GPU, no host contacted)
##   status: the fleet table (text, HTML, JSON under fleet-status/); read-only
##   remove: stop and remove the units, venvs and users the collection created on every host
##   monitoring: Prometheus targets, recording and alerting rules, a Grafana dashboard under fleet-monitoring/
##   gpus: read every host's GPUs and check TP and vllm_server_gpus against them
DAY_TWO := validate plan status remove monitoring gpus
$(DAY_TWO): setup
	$(PLAY) playbooks/$@.yml $(ARGS)

## clean: remove the sanity and test outputs
clean:
	rm -rf .cache/sanity tests/output

## distclean: everything `make deploy` and `make test` put on this machine: the sandbox hosts, their images,
## the downloads under FLEET_CACHE, the tool venv and the collection path (the checkout itself stays)
distclean: clean
	-if [ -x .venv/bin/ansible-playbook ]; then $(ENV) ansible-playbook playbooks/sandbox_down.yml; fi
	-command -v podman >/dev/null && podman images --quiet --filter label=org.lmcache-vllm-fleet.recipe \
		| sort -u | xargs -r podman rmi --force
	case "$(FLEET_CACHE)" in /?*/?*) ;; *) echo "distclean: FLEET_CACHE=$(FLEET_CACHE) is not a directory of its own" >&2; exit 1;; esac
	rm -rf -- "$(FLEET_CACHE)" .venv .cache fleet-plan fleet-status fleet-monitoring
