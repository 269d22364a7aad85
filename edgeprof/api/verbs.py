"""The listings (``list_backends``, ``list_targets``) and the three verbs: ``estimate``,
``benchmark``, ``summarize``."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

from edgeprof.api.common import resolve_target, target_registry
from edgeprof.core.backend import (RunConfig, check_backend_options, option_specs,
                                   run_config_options)
from edgeprof.core.models import resolve_model
from edgeprof.core.plugins import get_registry
from edgeprof.core.workload import workload_name
from edgeprof.core.precision import get_precision
from edgeprof.core.requests import MeasureRequest
from edgeprof.core.results import BenchmarkResult, Estimate, Summary
from edgeprof.profilers.measure.measure import measure


# ------------------------------------------------------------------------- listings
def list_backends(plugins: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """Every registered backend with its availability, reason, install hint and capabilities
    (``prediction_only`` False), then the runtime families edgeprof only predicts (``data/
    runtimes.toml``: ``prediction_only`` True, never available here, with the processors they
    run on and the source)."""
    from edgeprof.profilers.predict.runtimes import prediction_only_rows

    reg = get_registry(plugins)
    rows = []
    for name, entry in reg.backends.items():
        cls = entry.cls
        try:
            a = cls.availability()
            available, reason, hint = a.available, a.reason, a.hint
        except Exception as e:  # an availability check must never take the listing down
            available, reason, hint = False, f"availability check failed: {e}", ""
        precisions, devices = cls.listed()
        rows.append({"name": name, "available": available, "reason": reason, "hint": hint,
                     "prediction_only": False, "workload": workload_name(cls),
                     "precisions": list(precisions), "devices": list(devices),
                     "model_formats": list(cls.capabilities.model_formats),
                     "plugin": entry.plugin,
                     "description": getattr(cls, "description", ""),
                     "options": [{"name": n, "type": t, "default": d}
                                 for n, t, d in option_specs(cls.Options)]})
    return rows + prediction_only_rows(reg)


def list_targets(targets_dir: str | os.PathLike | None = None,
                 plugins: str | os.PathLike | None = None) -> list[Any]:
    """The descriptor targets (validated), without detecting ``host``."""
    return target_registry(targets_dir, plugins).all()


# ---------------------------------------------------------------------- three verbs
def estimate(model: Any, target: Any = "host", precision: str = "fp32", *,
             batch_size: int | None = None, input_shapes: Sequence[Sequence[int]] | None = None,
             input_dtypes: Sequence[str] | None = None, plugins=None,
             targets_dir=None) -> Estimate:
    """Analytic per-layer estimate of ``model`` on ``target`` at ``precision``."""
    from edgeprof.profilers.estimate.analytic import estimate_model

    get_precision(precision)
    reg = get_registry(plugins)
    handle = resolve_model(model, input_shapes=input_shapes, input_dtypes=input_dtypes,
                           batch_size=batch_size, registry=reg)
    return estimate_model(handle, resolve_target(target, targets_dir, plugins), precision,
                          registry=reg)


def benchmark(model: Any, backend: str = "torch_eager", precision: str = "fp32", *,
              config: RunConfig | None = None, run_options: dict[str, Any] | None = None,
              batch_size: int | None = None, input_shapes=None, input_dtypes=None,
              plugins=None) -> BenchmarkResult:
    """Measure ``model`` on ``backend`` on this host (latency percentiles, memory ...).

    ``run_options``: the dict ``profile`` takes (the flags' names: ``runs``, ``min_time``,
    ``max_time``, ``warmup``, ``device``, ``isolate``, ``timeout``, ``options`` ..., or
    RunConfig's fields), applied over ``config`` (which is left unchanged). Isolated in a
    worker process when ``isolate`` or ``timeout`` is set."""
    opts = run_config_options(run_options, reserved=("precision", "batch_size"))
    reg = get_registry(plugins)
    check_backend_options(opts.get("options") or {}, [reg.backend(backend)])
    handle = resolve_model(model, input_shapes=input_shapes, input_dtypes=input_dtypes,
                           batch_size=batch_size, registry=reg)
    config = dataclasses.replace(config or RunConfig(), **opts, precision=precision,
                                 batch_size=handle.batch_size)
    return measure(MeasureRequest.for_handle(backend, handle, config, plugins_file=plugins),
                   registry=reg)


def summarize(estimate: Estimate, benchmark: BenchmarkResult | None, target: Any, *,
              host: Any = None, host_estimate: Estimate | None = None, force: bool = False,
              **options) -> Summary:
    """The estimate and the measurement together against ``target``. An estimate and a
    benchmark of different models, precisions or batch sizes are refused (UserError) unless
    ``force=True``."""
    from edgeprof.profilers.report.summary import summarize as _summarize

    return _summarize(estimate, benchmark, resolve_target(target), host=host,
                      host_estimate=host_estimate, force=force, **options)
