# Two commands: `make demo` and `make test`. Both create .venv and install everything
# (all runtime extras, pinned by constraints.txt) on first use; later runs reuse it.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
LLAMA_STAMP := $(VENV)/.installed-llama
# llama.cpp is built from source by pip (no wheel on the registry): portable, AVX2 baseline,
# never -march=native, so a wheel pip cached on one CPU model runs on the others we see.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
OUT    ?= out/demo

.PHONY: demo test install llama bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[all,dev]'
	@# onnx2torch declares torchvision, but PyPI's torchvision does not load beside the pinned
	@# CPU torch ("operator torchvision::nms does not exist"), and a broken one stops transformers
	@# from building any model. Remove it: edgeprof runs onnx2torch without its two torchvision
	@# ops (NonMaxSuppression, RoiAlign) and says so.
	$(PY) -m pip uninstall --quiet --yes torchvision
	@# headless Chromium for the HTML report's browser tests (Debian's package). Where apt is
	@# not available this only warns: those tests then fail, loudly, naming what is missing.
	command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) || \
	  echo "warning: could not install chromium; tests/profilers/report/test_html.py will fail"
	touch $(STAMP)

install: $(STAMP)

# `make test` needs llama.cpp (the llama_cpp backend's tests); `make demo` does not wait for it
$(LLAMA_STAMP): $(STAMP)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
	  $(PY) -m pip install --quiet -c constraints.txt -e '.[llama]'
	touch $(LLAMA_STAMP)

llama: $(LLAMA_STAMP)

test: $(LLAMA_STAMP)
	$(PY) -m pytest -q

demo: $(STAMP)
	$(VENV)/bin/edgeprof targets
	$(VENV)/bin/edgeprof backends
	$(VENV)/bin/edgeprof profile builtin:small_cnn --target raspberry_pi_4 --backend torch_eager --out $(OUT)
	@# a generative model: ONNX Runtime GenAI installs from a wheel (llama.cpp builds from
	@# source: `make llama`, then --backend llama_cpp)
	$(VENV)/bin/edgeprof profile llm:smollm2-135m --backend onnxruntime_genai --precision int4 \
	  --prompt-tokens 128 --gen-tokens 32 --repetitions 3 --target raspberry_pi_5 --out $(OUT)-llm
	$(VENV)/bin/edgeprof estimate llm:llama-3.2-3b --target raspberry_pi_5 --backend llama_cpp \
	  --precision q4_k_m --prompt-tokens 512 --gen-tokens 128

bench: $(LLAMA_STAMP)
	$(PY) -m pip install --quiet -c constraints.txt -e '.[bench]'
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) out .pytest_cache
