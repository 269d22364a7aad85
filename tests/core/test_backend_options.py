"""Typed backend options: ``Backend.Options`` dataclasses, validated from ``RunConfig.options``;
the harness's knobs in ``RunConfig.harness_options``."""

from __future__ import annotations

import dataclasses
import json

import pytest

from edgeprof.cli.main import main
from edgeprof.core.backend import (Backend, HarnessOptions, NoOptions, RunConfig,
                                   check_backend_options)
from edgeprof.core.errors import UnknownNameError, UserError
from edgeprof.core.plugins import get_registry
from edgeprof.core.requests import MeasureRequest

FAST = dict(min_time_s=0.02, max_time_s=1.0, runs=10)


@pytest.fixture(scope="module")
def reg():
    return get_registry()


def test_every_builtin_backend_declares_frozen_typed_options_with_defaults(reg):
    expected = {"torch_eager": {}, "torch_compile": {"mode": "default"},
                "onnxruntime": {"providers": None, "graph_optimization": "all"},
                "openvino": {"performance_hint": "none", "num_streams": 1},
                "tflite": {"xnnpack": True}, "tensorrt": {"engine_cache": True}}
    for name, defaults in expected.items():
        cls = reg.backend(name)
        opts = cls.options_for(RunConfig())
        assert isinstance(opts, cls.Options) and dataclasses.asdict(opts) == defaults
        with pytest.raises(dataclasses.FrozenInstanceError):
            opts.__setattr__("x", 1)
    assert Backend.Options is NoOptions
    h = RunConfig().harness_options
    assert isinstance(h, HarnessOptions) and h.memory and h.keep_samples and h.ci_width is None


def test_values_are_read_as_the_declared_type(reg):
    ort, tflite = reg.backend("onnxruntime"), reg.backend("tflite")
    # a CLI string becomes the declared type; JSON lists (tuples) become tuples
    assert tflite.options_for({"xnnpack": "false"}).xnnpack is False
    assert ort.options_for({"providers": "CPUExecutionProvider"}).providers == \
        ("CPUExecutionProvider",)
    trt = json.loads(json.dumps({"providers": [("TensorrtExecutionProvider", {"device_id": 0}),
                                               "CUDAExecutionProvider"]}))
    assert ort.options_for(trt).providers == (("TensorrtExecutionProvider", {"device_id": 0}),
                                              "CUDAExecutionProvider")
    with pytest.raises(UserError, match=r"option 'xnnpack' must be bool, got 'maybe'"):
        tflite.options_for({"xnnpack": "maybe"})
    with pytest.raises(UnknownNameError, match="max-autotune"):
        reg.backend("torch_compile").options_for({"mode": "max-autotun"})


def test_backend_qualified_keys_go_to_their_backend_only(reg):
    options = {"torch_compile.mode": "max-autotune", "onnxruntime.graph_optimization": "basic"}
    assert reg.backend("torch_compile").options_for(options).mode == "max-autotune"
    assert reg.backend("onnxruntime").options_for(options).graph_optimization == "basic"
    check_backend_options(options, [reg.backend("torch_compile"), reg.backend("onnxruntime")])
    # a misspelt backend is not silently ignored
    with pytest.raises(UserError, match="'torch_compil'.*not among"):
        check_backend_options({"torch_compil.mode": "default"}, [reg.backend("torch_compile")])
    # a plain key applies to every backend of the run
    with pytest.raises(UserError, match="backend 'onnxruntime' has no option 'mode'"):
        check_backend_options({"mode": "default"},
                              [reg.backend("torch_compile"), reg.backend("onnxruntime")])


def test_harness_knobs_are_not_backend_options(reg):
    with pytest.raises(UserError, match="unknown harness option.*ci_widht"):
        RunConfig(harness_options={"ci_widht": 0.1})
    with pytest.raises(UserError, match="has no option 'keep_samples'"):
        reg.backend("onnxruntime").options_for({"keep_samples": False})
    cfg = RunConfig(harness_options={"ci_width": 0.05}, options={"xnnpack": False})
    back = RunConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert back == cfg and isinstance(back.harness_options, HarnessOptions)


def test_torch_compile_mode_reaches_torch_compile(reg, monkeypatch):
    import torch

    from edgeprof.core.models import resolve_model

    cls = reg.backend("torch_compile")
    assert cls.availability().available, cls.availability().reason  # torch is installed
    seen = []

    def fake_compile(module, mode=None, **kw):  # records the mode, compiles nothing
        seen.append(mode)
        return module

    monkeypatch.setattr(torch, "compile", fake_compile)
    handle = resolve_model("builtin:mlp")
    p = cls().prepare(handle, RunConfig(threads=1, options={"mode": "reduce-overhead"}),
                      handle.make_inputs(0))
    assert seen == ["reduce-overhead"] and p.extra["mode"] == "reduce-overhead"


def test_unknown_option_on_the_cli_is_one_line_exit_2_naming_valid_keys(capsys):
    code = main(["profile", "builtin:mlp", "--backend", "torch_eager,onnxruntime",
                 "--backend-option", "onnxruntime.graph_optimisation=basic", "--runs", "10"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err, err
    assert "backend 'onnxruntime' has no option 'graph_optimisation'" in err
    assert "providers:" in err and "graph_optimization:" in err
    with pytest.raises(SystemExit) as e:  # not KEY=VALUE: argparse's one line, exit 2
        main(["profile", "builtin:mlp", "--backend-option", "novalue"])
    assert e.value.code == 2 and "KEY=VALUE" in capsys.readouterr().err


def test_backend_option_flag_reaches_the_backend(capsys):
    code = main(["profile", "builtin:mlp", "--backend", "onnxruntime", "--json", "--runs", "10",
                 "--min-time", "0.02", "--max-time", "1", "--threads", "1",
                 "--backend-option", "graph_optimization=disable"])
    out = capsys.readouterr().out
    assert code == 0 and '"ORT_DISABLE_ALL"' in out and '"ORT_ENABLE_ALL"' not in out


def test_isolated_runner_carries_backend_options_and_harness_knobs():
    """RunConfig travels to the worker as JSON: the typed options and the harness knobs too."""
    from edgeprof.core.models import resolve_model
    from edgeprof.profilers.measure.measure import measure

    handle = resolve_model("builtin:mlp")
    cfg = RunConfig(**FAST, threads=1, isolate=True, timeout_s=120,
                    options={"onnxruntime.graph_optimization": "basic"},
                    harness_options={"keep_samples": False})
    r = measure(MeasureRequest.for_handle("onnxruntime", handle, cfg))
    assert r.status == "ok", r.reason
    assert r.extra["graph_optimization_level"] == "ORT_ENABLE_BASIC"
    assert r.stats.samples_ms == [] and r.config["harness_options"]["keep_samples"] is False


def test_backends_listing_shows_options_with_defaults(capsys):
    assert main(["backends", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert {"name": "mode", "type": "'default'|'reduce-overhead'|'max-autotune'|"
            "'max-autotune-no-cudagraphs'", "default": "default"} in rows["torch_compile"]["options"]
    assert rows["torch_eager"]["options"] == []
    assert main(["backends"]) == 0
    assert "xnnpack=True (bool)" in capsys.readouterr().out
