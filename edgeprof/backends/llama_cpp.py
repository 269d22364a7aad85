"""llama.cpp backend (llama-cpp-python): GGUF files made with llama.cpp's own quantizer,
run on llama.cpp's C API with llama-bench's definitions.

Build (:meth:`LlamaCppBackend.build_llm`), cached by content under ``conversions/gguf/``:

- a preset (or a random-weight spec): :func:`edgeprof.backends.gguf_write.write_random_gguf`
  writes an F16 GGUF (F32 for ``f32``) with llama.cpp's tensor names and a synthetic
  vocabulary, then ``llama_model_quantize`` (the quantizer the ``llama-quantize`` tool
  runs, in this process) makes ``q2_k q4_0 q4_k_m q5_k_m q6_k q8_0`` from it: llama.cpp
  picks each tensor's type for a K-quant mix exactly as it does for a downloaded model.
  Quantizing from F16 rather than F32 halves the disk the base file takes; the quantizer
  widens to F32 before quantizing either way, and each tensor's type and size are the same.
- a user's GGUF: used as given when its file type is the format asked for, otherwise
  requantized from it (``allow_requantize``; from an already quantized file the quality is
  worse than quantizing from F16, which the notes say).

Run (:meth:`LlamaCppBackend.load_llm`): a model and a context on the C API (no ``Llama``
wrapper: nothing between the harness's clock and ``llama_decode`` but a ctypes call).
``prefill`` decodes the prompt in ``n_batch`` chunks (llama-bench's pp), ``decode``
generates exactly ``n`` tokens greedily (argmax of the last logits, end-of-sequence ignored)
and evaluates each one (llama-bench's tg: ``n`` single-token decodes). Context parameters
are llama.cpp's defaults (flash attention ``auto``, full-size SWA cache) with
``n_batch = n_ubatch = min(512, n_ctx)``.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from edgeprof.backends.llama_cpp_formats import LLAMA_CPP_FORMATS, MADE
from edgeprof.core.errors import EdgeprofError, ModelError, UnsupportedError, UserError
from edgeprof.core.hookspecs import hookimpl
from edgeprof.core.importing import dist_version
from edgeprof.core.llm import FormatInfo, GenerativeBackend, LLMModel, check_room
from edgeprof.zoo.llm import GGUF_FILE_TYPES

if TYPE_CHECKING:  # pragma: no cover
    from edgeprof.core.artifact import Artifact

#: edgeprof format -> llama.cpp's LLAMA_FTYPE_* constant name
FTYPES = {"q2_k": "LLAMA_FTYPE_MOSTLY_Q2_K", "q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0",
          "q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M", "q5_k_m": "LLAMA_FTYPE_MOSTLY_Q5_K_M",
          "q6_k": "LLAMA_FTYPE_MOSTLY_Q6_K", "q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0",
          "f16": "LLAMA_FTYPE_MOSTLY_F16", "f32": "LLAMA_FTYPE_ALL_F32"}
#: llama.cpp's file types (general.file_type) -> edgeprof format names: the zoo's table
FILE_TYPES = GGUF_FILE_TYPES
#: version of the random-GGUF writer (part of the cache key: bump when its output changes)
WRITER_VERSION = 2
#: llama-bench's micro-batch; prompts are decoded in chunks of this many tokens
N_BATCH = 512
ENTRY = "model.gguf"


class LlamaCppError(EdgeprofError):
    """llama.cpp refused or failed (quantizing, loading, decoding)."""


# ------------------------------------------------------------------------------ runtime
@functools.cache
def _gpu_offload() -> bool:
    """Whether this llama.cpp build offloads to a GPU (imports llama_cpp; False if absent)."""
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:
        return False
    try:
        import llama_cpp
    except Exception:  # noqa: BLE001 - a broken install offloads nothing
        return False
    return bool(llama_cpp.llama_supports_gpu_offload())


class _Devices:
    """``devices``: ``("cpu", "cuda")`` when the installed build offloads to a GPU (looked up
    on first use, so importing this module imports no runtime)."""

    def __get__(self, obj: Any, owner: Any = None) -> tuple[str, ...]:
        return ("cpu", "cuda") if _gpu_offload() else ("cpu",)


_LOG: deque[str] = deque(maxlen=64)
_LOG_CALLBACK: Any = None


@functools.cache
def _lib() -> Any:
    """``llama_cpp`` with its backend initialised and its log routed to :data:`_LOG`
    (llama.cpp otherwise prints its loader's chatter on stderr, whatever ``verbose`` says)."""
    global _LOG_CALLBACK
    import llama_cpp

    llama_cpp.llama_backend_init()

    state = {"keep": False}

    @llama_cpp.llama_log_callback
    def _keep(level: int, text: bytes, user_data: Any) -> None:
        # ggml_log_level: 1 debug, 2 info, 3 warn, 4 error, 5 continues the previous message
        line = text.decode("utf-8", "replace").rstrip("\n")
        if level == 5:
            if state["keep"] and _LOG:
                _LOG[-1] += line
            return
        state["keep"] = level in (3, 4) and bool(line.strip())
        if state["keep"]:
            _LOG.append(("!" if level == 4 else "") + line)

    _LOG_CALLBACK = _keep  # keep the ctypes callback alive
    llama_cpp.llama_log_set(_keep, ctypes.c_void_p(0))
    return llama_cpp


def _last_error(log: Sequence[str], default: str) -> str:
    """llama.cpp's most telling line: the last specific error, else the last warning, else
    ``default`` (function-name prefixes and the generic "failed to load model" dropped)."""
    import re

    def clean(line: str) -> str:
        return re.sub(r"^(?:[A-Za-z_]\w*: )+", "", " ".join(line.split()))

    errors = [clean(x[1:]) for x in log if x.startswith("!")]
    specific = [e for e in errors if e and e != "failed to load model"]
    pick = specific or errors or [clean(x) for x in log]
    return pick[-1][:300] if pick else default


def package_version() -> str:
    return dist_version("llama-cpp-python")


def build_commit() -> str:
    """What identifies the llama.cpp build: the PyPI sdist carries no git commit
    (llama_version() is the library's version), so the package version names it."""
    ll = _lib()
    try:
        lib_version = ll.llama_version().decode()
    except Exception:  # noqa: BLE001 - older builds lack llama_version
        lib_version = ""
    text = f"llama-cpp-python {package_version()}"
    return f"{text} (libllama {lib_version})" if lib_version else text


def gguf_file_format(path: str | os.PathLike) -> str | None:
    """The edgeprof name of a GGUF's file type (``general.file_type``), or None."""
    from edgeprof.core.gguf import read_gguf_header

    try:
        header = read_gguf_header(path)
    except (OSError, ValueError) as e:
        raise ModelError(f"'{path}' is not a readable GGUF file ({e}); re-download or "
                         "re-convert it", spec=str(path)) from None
    file_type = header.kv.get("general.file_type")
    return FILE_TYPES.get(int(file_type)) if isinstance(file_type, int) else None


def quantize_gguf(src: str | os.PathLike, dst: str | os.PathLike, fmt: str, *,
                  allow_requantize: bool = False, threads: int | None = None) -> None:
    """Quantize GGUF ``src`` to ``fmt`` into ``dst`` with llama.cpp's quantizer (in-process).
    A failure raises :class:`LlamaCppError` with llama.cpp's own reason on one line."""
    if fmt not in FTYPES:
        raise UnsupportedError(f"llama.cpp's quantizer does not make '{fmt}'; it makes "
                               f"{', '.join(FTYPES)}", backend="llama_cpp", precision=fmt)
    ll = _lib()
    params = ll.llama_model_quantize_default_params()
    params.ftype = getattr(ll, FTYPES[fmt])
    params.nthread = threads or len(os.sched_getaffinity(0))
    params.allow_requantize = allow_requantize
    _LOG.clear()  # from here on: llama.cpp's warnings and errors, its reason for a failure
    rc = ll.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params))
    if rc != 0:
        raise LlamaCppError(f"llama.cpp could not quantize '{Path(src).name}' to {fmt}: "
                            f"{_last_error(_LOG, f'llama_model_quantize returned {rc}')}")


# ------------------------------------------------------------------------------ session
class LlamaCppSession:
    """One sequence on a llama.cpp context (see :class:`edgeprof.core.llm.GenerativeSession`)."""

    def __init__(self, path: Path, *, threads: int, n_ctx: int, device: str = "cpu",
                 users_file: bool = False) -> None:
        ll = _lib()
        self._ll = ll
        self.path = Path(path)
        self.build_commit = build_commit()
        self._model = self._ctx = None
        mparams = ll.llama_model_default_params()
        mparams.n_gpu_layers = 99 if device.startswith("cuda") else 0
        _LOG.clear()
        self._model = ll.llama_model_load_from_file(str(self.path).encode(), mparams)
        if not self._model:
            why = _last_error(_LOG, "llama_model_load_from_file returned NULL")
            msg = f"llama.cpp cannot load '{self.path}': {why}"
            if users_file:
                raise ModelError(msg + " (truncated or corrupted GGUF? re-download or "
                                 "re-convert it)", spec=str(self.path))
            raise LlamaCppError(msg)
        self.n_ctx_train = int(ll.llama_model_n_ctx_train(self._model))
        if n_ctx > self.n_ctx_train:
            self.close()
            raise UserError(f"a context of {n_ctx} tokens is longer than the model's maximum "
                            f"({self.n_ctx_train}); ask for fewer prompt, generated or depth "
                            "tokens")
        cparams = ll.llama_context_default_params()
        cparams.n_ctx = n_ctx
        cparams.n_batch = cparams.n_ubatch = min(N_BATCH, n_ctx)
        cparams.n_threads = cparams.n_threads_batch = threads
        cparams.no_perf = True
        # sliding-window layers keep only their window (llama-cpp-python defaults to a
        # full-size cache there): what the estimate's KV accounting and fit assume
        cparams.swa_full = False
        _LOG.clear()
        self._ctx = ll.llama_init_from_model(self._model, cparams)
        if not self._ctx:
            self.close()
            raise LlamaCppError(f"llama.cpp cannot make a context of {n_ctx} tokens for "
                                f"'{self.path.name}': {_last_error(_LOG, 'out of memory?')}")
        self.n_ctx = int(ll.llama_n_ctx(self._ctx))
        self.n_batch = min(N_BATCH, self.n_ctx)
        self.n_vocab = int(ll.llama_vocab_n_tokens(ll.llama_model_get_vocab(self._model)))
        self.model_size_bytes = int(ll.llama_model_size(self._model))
        self.n_params = int(ll.llama_model_n_params(self._model))
        self.threads = threads
        self.device = device
        self._mem = ll.llama_get_memory(self._ctx)
        self._n_past = 0
        self._ready = False  # logits of the last evaluated token are there
        self._one = (ll.llama_token * 1)()

    # -- the protocol --------------------------------------------------------------------
    def reset(self) -> None:
        self._ll.llama_memory_clear(self._mem, True)
        self._n_past = 0
        self._ready = False

    def prefill(self, token_ids: Sequence[int]) -> None:
        ids = list(token_ids)
        if not ids:
            raise UserError("prefill needs at least one token")
        bad = [t for t in ids if not 0 <= t < self.n_vocab]
        if bad:
            raise UserError(f"token id {bad[0]} is outside the vocabulary (0..{self.n_vocab - 1})")
        check_room(self._n_past, len(ids), self.n_ctx)
        ll, ctx = self._ll, self._ctx
        for i in range(0, len(ids), self.n_batch):
            chunk = ids[i:i + self.n_batch]
            arr = (ll.llama_token * len(chunk))(*chunk)
            self._decode(ll.llama_batch_get_one(arr, len(chunk)), len(chunk))
        ll.llama_synchronize(ctx)
        self._ready = True

    def decode(self, n: int, on_token: Callable[[int], None]) -> None:
        import numpy as np

        if n < 0:
            raise UserError(f"decode needs n >= 0, got {n}")
        if n and not self._ready:
            raise LlamaCppError("decode() before prefill(): there are no logits to sample from")
        check_room(self._n_past, n, self.n_ctx)
        ll, ctx, nv, one = self._ll, self._ctx, self.n_vocab, self._one
        as_array, get_logits, batch_get_one = np.ctypeslib.as_array, ll.llama_get_logits_ith, \
            ll.llama_batch_get_one
        for _ in range(n):
            tok = int(as_array(get_logits(ctx, -1), shape=(nv,)).argmax())
            on_token(tok)
            one[0] = tok
            self._decode(batch_get_one(one, 1), 1)
        ll.llama_synchronize(ctx)

    def close(self) -> None:
        ll = self._ll
        if self._ctx:
            ll.llama_free(self._ctx)
            self._ctx = None
        if self._model:
            ll.llama_model_free(self._model)
            self._model = None

    def __enter__(self) -> LlamaCppSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # -- helpers -------------------------------------------------------------------------
    @property
    def n_past(self) -> int:
        """Tokens the KV cache holds."""
        return self._n_past

    def _decode(self, batch: Any, n: int) -> None:
        rc = self._ll.llama_decode(self._ctx, batch)
        if rc != 0:
            why = {1: "no KV-cache slot for the batch (context full)", 2: "aborted",
                   -1: "invalid batch"}.get(rc, f"error {rc}")
            raise LlamaCppError(f"llama_decode failed after {self._n_past} tokens: {why}")
        self._n_past += n


# ------------------------------------------------------------------------------ backend
class LlamaCppBackend(GenerativeBackend):
    """llama.cpp through llama-cpp-python: GGUF in llama.cpp's own quantization formats."""

    name: ClassVar[str] = "llama_cpp"
    description: ClassVar[str] = ("llama.cpp (llama-cpp-python): GGUF made with llama.cpp's "
                                  "quantizer; prefill/decode as llama-bench times them")
    requires: ClassVar[tuple[str, ...]] = ("llama_cpp",)
    install_hint: ClassVar[str] = (
        "run 'make llama', or build it portable by hand (no wheel on PyPI: pip compiles "
        "llama.cpp, about 10 minutes on 2 cores; not -march=native, so the cached wheel runs "
        "on any AVX2 CPU): CMAKE_ARGS='-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON "
        "-DGGML_F16C=ON' pip install 'edgeprof[llama]' (add -DGGML_CUDA=ON for NVIDIA GPUs)")
    formats: ClassVar[tuple[str, ...]] = MADE
    #: each format's byte layout: the quantizer's per-tensor types (llama_cpp_formats)
    format_layouts: ClassVar[Mapping[str, FormatInfo]] = LLAMA_CPP_FORMATS
    devices = _Devices()  # type: ignore[assignment]
    #: llama.cpp runs on a board's CPU, or offloads all layers to CUDA (a Jetson's GPU)
    board_devices = ("cpu", "cuda")
    #: a mixture of experts is written as Mixtral is (gguf_write: llama architecture with
    #: expert_count); what that cannot hold (a shared expert) is refused by
    #: :meth:`architecture_reason`
    runs_experts = True

    @classmethod
    def runtime_version(cls) -> str:
        return f"llama-cpp-python {package_version()}"

    # -- what it can do ------------------------------------------------------------------
    def architecture_reason(self, model: LLMModel, fmt: str) -> str | None:
        if model.source_kind == "gguf":
            return None  # llama.cpp itself decides when it loads the file
        if model.source_kind == "hf_folder" and not model.random_weights:
            return ("llama_cpp runs GGUF files: convert the folder with llama.cpp's "
                    "convert_hf_to_gguf.py and give the .gguf")
        from edgeprof.backends.gguf_write import llama_cpp_architecture

        try:
            llama_cpp_architecture(model.spec)
        except UnsupportedError as e:
            return str(e)
        return None

    # -- build ---------------------------------------------------------------------------
    def build_llm(self, model: LLMModel, fmt: str, workdir: Path | None = None) -> Artifact:
        """The GGUF for ``model`` in ``fmt`` (cached by content; ``workdir`` is not needed:
        the artifact lives in edgeprof's conversion cache)."""
        self.check_buildable(model, fmt)
        if model.source_kind == "gguf":
            return self._build_from_file(model, fmt)
        return self._build_random(model, fmt)

    def _random_base(self, model: LLMModel, dtype: str) -> Artifact:
        """The random-weight F16/F32 GGUF written from the spec (cached)."""
        from edgeprof.backends.gguf_write import write_random_gguf
        from edgeprof.core.cache import cached_entry, key_digest

        gguf_version = dist_version("gguf")
        key = {"spec": model.spec.to_dict(), "precision": dtype, "seed": 0,
               "writer": WRITER_VERSION, "gguf": gguf_version}
        step = {"src": "llm-spec", "dst": f"gguf-{dtype}", "converter": "edgeprof gguf_write",
                "package": "gguf", "version": gguf_version}

        def build(folder: Path) -> dict[str, Any]:
            write_random_gguf(model.spec, folder / ENTRY, dtype=dtype, seed=0)
            return {"notes": [model.note or "random weights", "weights drawn from N(0, 0.02), "
                              "norm weights 1, a synthetic vocabulary"],
                    "stored_precision": dtype}

        return cached_entry("gguf", key, build, entry=ENTRY, manifest={
            "format": "gguf", "backend": self.name, "requested_precision": dtype,
            "route": [step], "source_digest": key_digest(key)})

    def _build_random(self, model: LLMModel, fmt: str) -> Artifact:
        base = self._random_base(model, "f32" if fmt == "f32" else "f16")
        if fmt in ("f16", "f32"):
            return base
        return self._quantized(base, fmt, notes=list(base.manifest.notes),
                               source_digest=base.manifest.source_digest)

    def _quantized(self, base: Artifact, fmt: str, *, notes: list[str], source_digest: str,
                   requantize: bool = False, users_file: bool = False) -> Artifact:
        from edgeprof.core.cache import cached_entry, key_digest

        version = package_version()
        key = {"previous": key_digest(base.manifest.key or {"source": source_digest}),
               "precision": fmt, "llama-cpp-python": version, "requantize": requantize}
        src = base.entry_path
        src_fmt = base.manifest.stored_precision or base.manifest.requested_precision
        step = {"src": f"gguf-{src_fmt}", "dst": f"gguf-{fmt}",
                "converter": "llama_model_quantize", "package": "llama-cpp-python",
                "version": version}

        def build(folder: Path) -> dict[str, Any]:
            try:
                quantize_gguf(src, folder / ENTRY, fmt, allow_requantize=requantize)
            except LlamaCppError as e:
                if users_file:
                    raise ModelError(f"{e} (truncated or corrupted GGUF? re-download or "
                                     "re-convert it)", spec=str(src)) from None
                raise
            return {"notes": notes, "stored_precision": fmt}

        return cached_entry("gguf", key, build, entry=ENTRY, manifest={
            "format": "gguf", "backend": self.name, "requested_precision": fmt,
            "route": [*base.manifest.route, step], "source_digest": source_digest})

    def _build_from_file(self, model: LLMModel, fmt: str) -> Artifact:
        """A user's GGUF: as given when it is already ``fmt``, else requantized from it."""
        from edgeprof.core.artifact import Artifact, Manifest, sha256_file

        if model.path is None or not Path(model.path).is_file():
            raise ModelError(f"GGUF file '{model.path or model.given}' does not exist",
                             spec=model.given)
        path = Path(model.path).resolve()
        have = model.file_format or gguf_file_format(path)
        digest = sha256_file(path)
        given_notes = [model.note] if model.note else []
        manifest = Manifest(format="gguf", backend=self.name, requested_precision=have or fmt,
                            stored_precision=have, route=[], source_digest=digest,
                            files={path.name: {"size": path.stat().st_size, "sha256": digest}},
                            entry=path.name, key={"source": digest},
                            notes=[*given_notes, "the user's GGUF file, used as given"])
        as_given = Artifact(path.parent, manifest)
        if have == fmt:
            return as_given
        if have in ("f32", "f16", "bf16"):
            how = f"quantized from the file's {have} weights"
        else:
            how = (f"requantized from the file's {have or 'unknown'} weights: quality is worse "
                   "than quantizing from F16/F32; speed and size are those of the format")
        return self._quantized(as_given, fmt, notes=[*given_notes, how], source_digest=digest,
                               requantize=True, users_file=True)

    # -- load ----------------------------------------------------------------------------
    def load_llm(self, artifact: Artifact, *, threads: int, n_ctx: int,
                 device: str = "cpu") -> LlamaCppSession:
        if device not in self.devices:
            raise UnsupportedError(f"{self.name} runs on {', '.join(self.devices)}, not "
                                   f"'{device}' (this llama.cpp build has no GPU offload)",
                                   backend=self.name)
        if threads < 1 or n_ctx < 1:
            raise UserError(f"threads and n_ctx must be at least 1, got {threads} and {n_ctx}")
        users_file = not artifact.manifest.route  # a user's GGUF used as given
        return LlamaCppSession(artifact.entry_path, threads=threads, n_ctx=n_ctx, device=device,
                               users_file=users_file)


@hookimpl
def edgeprof_register_backends():
    return [LlamaCppBackend]


__all__ = ["FILE_TYPES", "FTYPES", "LlamaCppBackend", "LlamaCppError", "LlamaCppSession",
           "build_commit", "gguf_file_format", "quantize_gguf"]
