"""The torch -> tflite conversion (litert-torch) runs in a subprocess: a converter that aborts
or calls sys.exit fails that run only (issue 9, item 17).

The fault is injected with a ``sitecustomize.py`` on PYTHONPATH that replaces
``litert_torch.convert`` in every process started with it: on the old code the conversion ran
inside the profiling process, and an abort there killed the whole run and every result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import litert_torch  # noqa: F401  (installed by make test: a missing one must fail, not skip)
import pytest

from tests.processes import finished

SITECUSTOMIZE = '''
import importlib.abc, importlib.machinery, os, sys

MODE = os.environ.get("EDGEPROF_TEST_LITERT_FAULT")


class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "litert_torch":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)

            def convert(*args, **kwargs):
                if MODE == "abort":
                    os.abort()
                sys.exit(3)

            module.convert = convert

        spec.loader.exec_module = exec_module
        return spec


if MODE:
    sys.meta_path.insert(0, _Hook())
'''

FAST = ["--runs", "10", "--min-time", "0.02", "--max-time", "1", "--threads", "1"]


def _start(tmp_path: Path, cache: Path, fault: str, backends: str) -> subprocess.Popen:
    hook = tmp_path / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(hook), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "EDGEPROF_TEST_LITERT_FAULT": fault, "EDGEPROF_CACHE_DIR": str(cache)}
    return subprocess.Popen([sys.executable, "-m", "edgeprof", "profile", "builtin:mlp",
                             "--backend", backends, "--json", *FAST], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


@pytest.fixture(scope="module")
def profiles(tmp_path_factory, empty_cache_at) -> dict:
    """Both faulty conversions, run at once (each is a process waiting on a converter
    process): fault -> (stderr, the JSON document or None when the run was killed), and
    "cache": the folder of their caches."""
    tmp_path = tmp_path_factory.mktemp("litert-faults")
    started = {fault: _start(tmp_path, empty_cache_at(tmp_path / f"cache-{fault}"), fault,
                             backends)  # a fresh cache: the conversion really runs
               for fault, backends in (("abort", "torch_eager,tflite"), ("exit", "tflite"))}
    done: dict = {"cache": tmp_path}
    for fault, (code, out, err) in finished(started, timeout=600).items():
        try:
            doc = json.loads(out)
        except json.JSONDecodeError:
            doc = None
        done[fault] = (f"rc {code}: {err[-400:]}", doc)
    return done


def test_a_converter_abort_fails_its_run_and_the_others_survive(profiles):
    why, doc = profiles["abort"]
    assert doc is not None, f"the run was killed ({why})"
    rows = {r["backend"]: r for r in doc["runs"]}
    assert rows["torch_eager"]["status"] == "ok"
    tfl = rows["tflite"]
    assert tfl["status"] == "failed" and "\n" not in tfl["reason"]
    assert "litert-torch" in tfl["reason"] and "SIGABRT" in tfl["reason"]
    # nothing half-made was published in the cache
    assert not list((profiles["cache"] / "cache-abort").rglob("*.tflite"))


def test_a_converter_calling_sys_exit_fails_its_run(profiles):
    why, doc = profiles["exit"]
    assert doc is not None, f"the run was killed ({why})"
    (row,) = doc["runs"]
    assert row["status"] == "failed"
    assert "litert-torch" in row["reason"] and "sys.exit(3)" in row["reason"]


def test_which_models_convert_in_a_subprocess():
    import torch

    from edgeprof.backends.tflite_convert import _child_recipe
    from edgeprof.core.models import resolve_model

    built = _child_recipe(resolve_model("builtin:mlp"))
    assert built["kind"] == "resolve" and built["spec"] == "builtin:mlp"
    # an nn.Module object (Python API) has no spec to rebuild it from: converted in-process
    module = torch.nn.Sequential(torch.nn.Linear(4, 2))
    assert _child_recipe(resolve_model(module, input_shapes=[[1, 4]])) is None


# ---------------------------------------------------------------- the converter worker
def test_one_worker_converts_each_precision_and_a_dead_one_is_replaced(empty_cache):
    """Each precision of one model goes to the interpreter the first conversion started
    (importing torch, litert-torch and TensorFlow again cost ~9 s a conversion); a worker
    that died between conversions is replaced, not asked."""
    from edgeprof.backends import tflite_convert as tc
    from edgeprof.backends.tflite import TFLiteBackend
    from edgeprof.core.backend import RunConfig
    from edgeprof.core.models import resolve_model

    handle, backend = resolve_model("builtin:mlp"), TFLiteBackend()

    def convert(precision: str):
        pm = backend.prepare(handle, RunConfig(precision=precision, threads=1),
                             handle.make_inputs(0))
        assert not any("in this process" in n for n in pm.notes), pm.notes
        pm.close()
        return tc._WORKERS[0].proc

    first = convert("fp32")
    assert convert("fp16") is first and first.poll() is None
    first.kill()
    first.wait()
    second = convert("int8_dynamic")
    assert second is not first and second.poll() is None


def test_a_worker_is_not_reused_once_the_environment_or_folder_changed(monkeypatch, tmp_path):
    """A spec is rebuilt in the worker with the environment (plugins, caches) and working
    folder (relative paths) it started with: another one starts a fresh worker."""
    from edgeprof.backends.tflite_convert import _ConverterWorker

    worker = _ConverterWorker()
    try:
        assert worker.usable()
        monkeypatch.setenv("EDGEPROF_TEST_CHANGED", "1")
        assert not worker.usable()
        monkeypatch.delenv("EDGEPROF_TEST_CHANGED")
        assert worker.usable()
        monkeypatch.chdir(tmp_path)
        assert not worker.usable()
    finally:
        worker.close()
    assert worker.proc.returncode == 0  # it ended when its stdin closed
