"""Measure one configuration: the single place where a backend's failure becomes a status."""

from __future__ import annotations

from edgeprof.core.backend import Backend, RunConfig
from edgeprof.core.errors import EdgeprofError, UserError
from edgeprof.core.models import ModelHandle
from edgeprof.core.results import BenchmarkResult
from edgeprof.profilers.measure.harness import benchmark_backend


def run_one(backend: Backend, handle: ModelHandle, config: RunConfig) -> BenchmarkResult:
    """Benchmark with the status rules of docs/design.md: never raises for a backend's failure."""
    from edgeprof.core.errors import BackendUnavailableError, UnsupportedError

    cls = type(backend)
    base = dict(backend=cls.name, model=handle.name, requested_precision=config.precision,
                executed_precision=None, batch_size=handle.batch_size, config=config.to_dict())
    a = cls.availability()
    if not a.available:
        return BenchmarkResult(status="unavailable",
                               reason=a.reason + (f"; {a.hint}" if a.hint else ""), **base)
    caps = cls.capabilities
    if config.device == "cpu" and "cpu" not in caps.devices:
        # the default device, for a backend that has no CPU path: its own first device
        from dataclasses import replace as _replace

        config = _replace(config, device=caps.devices[0])
        base["config"] = config.to_dict()
    try:
        cls.check_request(handle, config)  # what the capabilities rule out, before any work
        return benchmark_backend(backend, handle, config)
    except UnsupportedError as e:
        return BenchmarkResult(status="unsupported", reason=str(e), **base)
    except BackendUnavailableError as e:
        return BenchmarkResult(status="unavailable", reason=str(e), **base)
    except UserError:
        raise
    except EdgeprofError as e:
        return BenchmarkResult(status="failed", reason=str(e), **base)
    except Exception as e:  # a runtime's own failure is that run's failure, not ours
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return BenchmarkResult(status="failed", reason=f"{type(e).__name__}: {msg}", **base)
