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
	@# headless Chromium for the HTML report's browser tests (Debian's package). Where apt is
	@# not available this only warns: those tests then fail, loudly, naming what is missing.
	command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) || \
	  echo "warning: could not install chromium; tests/profilers/report/test_html.py will fail"
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

demo: $(STAMP)
	$(VENV)/bin/edgeprof targets
	$(VENV)/bin/edgeprof backends
	$(VENV)/bin/edgeprof profile builtin:small_cnn --target raspberry_pi_4 --backend torch_eager --out $(OUT)

bench: $(STAMP)
	$(PY) -m pip install --quiet -c constraints.txt -e '.[bench]'
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) out .pytest_cache
