"""Fake backends for edgeprof's tests: no runtime, known behaviour.

* ``fake_busy``     — ``run`` busy-waits a known time (``options["fake_ms"]``, default 1 ms);
  ``fake_first_ms`` makes the first call slower, ``fake_slow_calls`` / ``fake_slow_ms`` make the
  first N calls slower (a plateau, then fast), ``fake_warm_factor`` / ``fake_warm_rate`` make
  call n take ``fake_ms x (1 + factor x rate^n)`` (a gradual warm-up), ``fake_noise`` adds uniform jitter as a
  fraction of the time (seeded), ``fake_threads`` sets the reported thread count,
  ``fake_sync`` adds a sync callable that counts its calls, ``fake_prepare_s`` busy-waits in
  prepare, and ``fake_oom_above_batch`` raises MemoryError in run when the batch is larger.
* ``fake_segfault`` — ``run`` (or ``prepare`` with ``fake_when="prepare"``) kills its own
  process with SIGSEGV. Only ever run it isolated.
* ``fake_hang``     — ``run`` sleeps for an hour. Only ever run it isolated (or with a timeout).
* ``fake_raise``    — raises ``RuntimeError("fake failure")`` in run or prepare.
* ``fake_memory``   — allocates and touches ``fake_alloc_bytes`` (default 64 MB) in prepare and
  keeps it; each run also touches ``fake_run_alloc_bytes`` (default 0) transiently.
* ``fake_unsupported`` / ``fake_unavailable`` — raise UnsupportedError / are unavailable.

The module is also an edgeprof plugin (``edgeprof_register_backends``), so a spawned worker
can find these backends by name: :func:`write_plugins_file` writes a plugins.toml that lists
this file. :func:`fake_model` is a model factory that needs no torch: spec
``"<path to this file>:fake_model"`` resolves through ``edgeprof.core.models.resolve_model``.
"""

from __future__ import annotations

import os
import random
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from edgeprof.core.backend import Backend, Capabilities, PreparedModel
from edgeprof.core.errors import UnsupportedError
from edgeprof.core.hookspecs import hookimpl

FAKES_PATH = Path(__file__).resolve()
#: model spec for the torch-free fake model (input 1x8, float32)
FAKE_MODEL_SPEC = f"{FAKES_PATH}:fake_model"


def busy_wait_ns(ns: int) -> None:
    """Spin (no sleep, no syscalls) for ``ns`` nanoseconds of wall time."""
    clock = time.perf_counter_ns
    end = clock() + ns
    while clock() < end:
        pass


class FakeModule:
    """Just enough of an nn.Module for resolve_model (forward, parameters, eval)."""

    def forward(self, *xs):
        return xs

    def parameters(self):
        return iter(())

    def eval(self):
        return self


def fake_model():
    """A model factory without torch: (module, input shapes)."""
    return FakeModule(), [[1, 8]]


@dataclass(frozen=True)
class FakeOptions:
    """The fakes' knobs (see the module docstring), declared like any backend's options."""

    fake_ms: float = 1.0
    fake_first_ms: float = 0.0
    fake_slow_calls: int = 0
    fake_slow_ms: float = 0.0
    fake_noise: float = 0.0
    fake_warm_factor: float = 0.0
    fake_warm_rate: float = 0.95
    fake_threads: int | None = None
    fake_sync: bool = False
    fake_prepare_s: float = 0.0
    fake_oom_above_batch: int | None = None
    fake_scale_with_batch: bool = False
    fake_when: str = "run"
    fake_alloc_bytes: int = 64_000_000
    fake_run_alloc_bytes: int = 0


def _opt(config, name, default):
    return (config.options or {}).get(name, default)


class FakeBusyBackend(Backend):
    name = "fake_busy"
    Options = FakeOptions
    description = "busy-waits a known time per inference (tests)"
    capabilities = Capabilities(precisions=("fp32", "fp16", "int8"), model_formats=("torch",))

    def prepare(self, model, config, inputs):
        self.check_precision(config.precision)
        busy_wait_ns(int(float(_opt(config, "fake_prepare_s", 0.0)) * 1e9))
        base_ns = int(float(_opt(config, "fake_ms", 1.0)) * 1e6)
        first_ns = int(float(_opt(config, "fake_first_ms", 0.0)) * 1e6)
        slow_calls = int(_opt(config, "fake_slow_calls", 0))
        slow_ns = int(float(_opt(config, "fake_slow_ms", 0.0)) * 1e6)
        noise = float(_opt(config, "fake_noise", 0.0))
        warm_factor = float(_opt(config, "fake_warm_factor", 0.0))
        warm_rate = float(_opt(config, "fake_warm_rate", 0.95))
        oom_above = _opt(config, "fake_oom_above_batch", None)
        batch = model.batch_size
        rng = random.Random(config.seed)
        state = {"calls": 0, "syncs": 0}

        simple = not (first_ns or slow_calls or noise or warm_factor or oom_above is not None
                      or _opt(config, "fake_scale_with_batch", False))
        clock = time.perf_counter_ns

        def run_simple(xs):  # the hot path: nothing but the wait
            end = clock() + base_ns
            while clock() < end:
                pass
            return xs

        def run(xs):
            n = state["calls"]
            state["calls"] = n + 1
            if oom_above is not None and batch > oom_above:
                raise MemoryError(f"fake allocator: batch {batch} does not fit")
            ns = base_ns * batch if _opt(config, "fake_scale_with_batch", False) else base_ns
            if n == 0 and first_ns:
                ns = first_ns
            elif n <= slow_calls and slow_ns:
                ns = slow_ns
            elif warm_factor:  # call n takes base x (1 + factor x rate^n): a gradual warm-up
                ns = int(ns * (1.0 + warm_factor * warm_rate ** n))
            if noise:
                ns = int(ns * (1.0 + noise * rng.random()))
            busy_wait_ns(ns)
            return xs

        sync = None
        if _opt(config, "fake_sync", False):
            def sync():
                state["syncs"] += 1

        threads = {"intra_op": int(_opt(config, "fake_threads", config.threads or 1))}
        return PreparedModel(run=run_simple if simple else run, inputs=inputs, runtime="fake", runtime_version="0.0",
                             executed_precision=config.precision, threads=threads, sync=sync,
                             extra={"state": state})


class FakeSegfaultBackend(Backend):
    name = "fake_segfault"
    Options = FakeOptions
    description = "kills itself with SIGSEGV (tests; run isolated only)"

    def prepare(self, model, config, inputs):
        if _opt(config, "fake_when", "run") == "prepare":
            os.kill(os.getpid(), signal.SIGSEGV)

        def run(xs):
            os.kill(os.getpid(), signal.SIGSEGV)

        return PreparedModel(run=run, inputs=inputs, runtime="fake", runtime_version="0.0",
                             executed_precision=config.precision)


class FakeHangBackend(Backend):
    name = "fake_hang"
    Options = FakeOptions
    description = "never returns from run (tests; run isolated only)"

    def prepare(self, model, config, inputs):
        def run(xs):
            time.sleep(3600)

        return PreparedModel(run=run, inputs=inputs, runtime="fake", runtime_version="0.0",
                             executed_precision=config.precision)


class FakeRaiseBackend(Backend):
    name = "fake_raise"
    Options = FakeOptions
    description = "raises RuntimeError in run or prepare (tests)"

    def prepare(self, model, config, inputs):
        if _opt(config, "fake_when", "run") == "prepare":
            raise RuntimeError("fake failure in prepare")

        def run(xs):
            raise RuntimeError("fake failure\nsecond line that must not show")

        return PreparedModel(run=run, inputs=inputs, runtime="fake", runtime_version="0.0",
                             executed_precision=config.precision)


class FakeMemoryBackend(Backend):
    name = "fake_memory"
    Options = FakeOptions
    description = "allocates a known amount of memory (tests)"
    requires = ("numpy",)

    def prepare(self, model, config, inputs):
        import numpy as np

        nbytes = int(_opt(config, "fake_alloc_bytes", 64_000_000))
        run_bytes = int(_opt(config, "fake_run_alloc_bytes", 0))
        held = np.ones(nbytes, dtype=np.uint8)  # ones: every page touched

        def run(xs):
            if run_bytes:
                # a fresh anonymous mapping, every page touched, then unmapped: RSS really rises
                # and falls (malloc could reuse already-resident heap pages instead)
                import mmap

                tmp = mmap.mmap(-1, run_bytes)
                for off in range(0, run_bytes, mmap.PAGESIZE):
                    tmp[off] = 1
                busy_wait_ns(2_000_000)
                tmp.close()
            else:
                busy_wait_ns(200_000)
            return held[:1]

        return PreparedModel(run=run, inputs=inputs, runtime="fake", runtime_version="0.0",
                             executed_precision=config.precision, extra={"held": held})


class FakeUnsupportedBackend(Backend):
    name = "fake_unsupported"
    Options = FakeOptions
    description = "supports nothing (tests)"

    def prepare(self, model, config, inputs):
        raise UnsupportedError("fake backend cannot run anything", backend=self.name)


class FakeUnavailableBackend(Backend):
    name = "fake_unavailable"
    Options = FakeOptions
    description = "its runtime is missing (tests)"
    requires = ("edgeprof_no_such_runtime_pkg",)
    install_hint = "pip install nothing"


FAKE_BACKENDS = [FakeBusyBackend, FakeSegfaultBackend, FakeHangBackend, FakeRaiseBackend,
                 FakeMemoryBackend, FakeUnsupportedBackend, FakeUnavailableBackend]


@hookimpl
def edgeprof_register_backends():
    return list(FAKE_BACKENDS)


def write_plugins_file(folder: str | os.PathLike) -> Path:
    """Write a plugins.toml in ``folder`` that loads this module; return its path."""
    path = Path(folder) / "plugins.toml"
    path.write_text(f'[plugins]\nmodules = ["{FAKES_PATH.as_posix()}"]\n', encoding="utf-8")
    return path


def fake_handle(batch_size: int = 1, features: int = 8):
    """A ModelHandle for the fake model, resolved without any registry."""
    from edgeprof.core.models import resolve_model

    return resolve_model(FAKE_MODEL_SPEC, input_shapes=[[batch_size, features]])
