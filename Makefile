# Two commands: `make demo` and `make test`. Both create .venv and install everything
# (all runtime extras, pinned by constraints.txt) on first use; later runs reuse it.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
OUT    ?= out/demo

.PHONY: demo test install bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[all,dev]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

demo: $(STAMP)
	$(VENV)/bin/edgeprof targets
	$(VENV)/bin/edgeprof backends
	$(VENV)/bin/edgeprof profile builtin:small_cnn --target raspberry_pi_4 --backend torch_eager --out $(OUT)

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) out .pytest_cache
