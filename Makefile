# lmcache_vllm.fleet — the two entry points and a few helpers.
SHELL := /bin/bash
ENV := source scripts/env.sh &&

.PHONY: deploy test setup lint sanity unit sandbox-down clean

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

setup:
	bash scripts/setup-tools.sh

lint: setup
	$(ENV) ansible-lint --profile production

sanity: setup
	bash scripts/sanity.sh

unit: setup
	$(ENV) python -m pytest -p no:cacheprovider tests/unit tests/playbooks

sandbox-down: setup
	$(ENV) ansible-playbook playbooks/sandbox_down.yml

clean:
	rm -rf .cache/sanity tests/output
