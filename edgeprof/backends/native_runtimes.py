"""What the ncnn, MNN and ExecuTorch backends share: their converters' processes, their
native output kept off stdout, the CPU's fp16 arithmetic, and their classes' common part
(:class:`NativeRuntime`: precisions named as not offered, the checked build, one sample a
call, fp16 where the CPU has none).

Nothing here imports a runtime.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from edgeprof.core.errors import UnsupportedError


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """While a runtime's native code runs, send file descriptor 1 to 2: MNN prints its CPU
    features ("The device supports: ...") and its precision to stdout, which would corrupt
    ``--json`` output."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(2, 1)
    except (OSError, ValueError):  # no real stdout (an embedding host): leave it alone
        yield
        return
    try:
        yield
    finally:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        _flush_c_stdio()  # C's stdout is block-buffered into a file or pipe: empty it here
        os.dup2(saved, 1)
        os.close(saved)


def _flush_c_stdio() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):  # no C library to ask (not POSIX)
        pass


def run_tool(argv: Sequence[str], *, cwd: str | Path | None = None,
             timeout: float = 600.0) -> tuple[int, str]:
    """A converter's process: (exit status, its stdout and stderr together). A converter
    that aborts (MNN's C++ ``std::terminate``) cannot take edgeprof down with it."""
    try:
        r = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or "") if isinstance(e.stdout, str) else ""
        return 124, out + f"\n(timed out after {timeout:.0f} s)"
    return r.returncode, (r.stdout or "") + (r.stderr or "")


def python_tool(code: str, *args: str, cwd: str | Path | None = None,
                timeout: float = 600.0) -> tuple[int, str]:
    """``python -c code args...`` with this interpreter (a converter inside a wheel's
    Python module, run in its own process)."""
    return run_tool([sys.executable, "-c", code, *args], cwd=cwd, timeout=timeout)


def last_lines(text: str, n: int = 3, limit: int = 300) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " | ".join(lines[-n:])[:limit]


def cpu_has_fp16_arithmetic() -> bool:
    """True where the CPU computes in fp16 natively (ARMv8.2 ``asimdhp``/``fphp``); x86 CPUs
    without AVX512-FP16 only convert (F16C), so runtimes there compute fp16 models in fp32."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    flags = set(text.split())
    return bool(flags & {"asimdhp", "fphp", "avx512fp16"})


class NativeRuntime:
    """A backend mixin for the runtimes outside the Python frameworks (ncnn, MNN,
    ExecuTorch): what their classes share.

    * ``unoffered``: precisions the backend names as not offered, with the reason and what
      would make them, refused in one line instead of the generic "supports ..." message;
    * ``build``: through the conversion graph, checked against the source
      (``native`` names a file already in the backend's format, which runs as given;
      ``agreement(stored, requested)`` the precision whose tolerance the check applies);
    * ``one_sample``: the runtime's tensors have no batch axis, a batch above 1 is refused
      before converting (:func:`single_batch`);
    * ``executed(precision)``: an fp16 request on a CPU without fp16 arithmetic runs in fp32,
      with ``fp16_fallback`` as the note saying so.

    ``operator_profile`` stays the base class's None: none of their Python APIs times
    operators, and each backend's ``load`` notes why."""

    name: str  # the Backend's
    capabilities: Any
    unoffered: Mapping[str, str] = {}
    native: str | None = None
    one_sample: bool = False
    fp16_fallback: str = ""

    @classmethod
    def check_precision(cls, precision: str) -> None:
        reason = cls.unoffered.get(precision)
        if reason is not None:
            raise UnsupportedError(f"backend '{cls.name}' does not offer {precision}: {reason}; "
                                   f"it runs {', '.join(cls.capabilities.precisions)}",
                                   backend=cls.name, precision=precision)
        super().check_precision(precision)

    @classmethod
    def check_request(cls, model: Any, config: Any) -> None:
        super().check_request(model, config)
        if cls.one_sample:
            single_batch(model, cls.name)

    @staticmethod
    def agreement(stored: str, requested: str) -> str:
        return stored

    def build(self, model: Any, precision: str, calibration: Any = None) -> Any:
        """Through the conversion graph: the precision checked, the route to the backend's
        format converted (cached), the artifact's outputs checked against the source model.
        A file already in the format (``native``) runs as given; edgeprof does not
        re-quantize it."""
        from edgeprof.backends.common import built, converted

        self.check_precision(precision)
        model, artifact = converted(self, model, precision, calibration)
        stored = artifact.manifest.stored_precision or "fp32"
        if self.native and not artifact.manifest.route and precision != "fp32":
            raise UnsupportedError(f"'{Path(model.path).name}' is {self.native}; edgeprof does "
                                   "not re-quantize it, ask for fp32 (or give the source model)",
                                   backend=self.name, precision=precision)
        return built(self, artifact, model, precision, self.agreement(stored, precision))

    def executed(self, precision: str) -> tuple[str, str | None]:
        """(the precision that ran, a note or None) of a request on this CPU: an fp16 one
        runs in fp32 where the CPU has no fp16 arithmetic (ARMv8.2 asimdhp)."""
        if precision != "fp16" or cpu_has_fp16_arithmetic():
            return precision, None
        return "fp32", f"this CPU has no fp16 arithmetic (ARMv8.2 asimdhp): {self.fp16_fallback}"


def single_batch(handle: Any, backend: str) -> None:
    """ncnn and MNN-by-name take one sample per call where the graph has no batch axis;
    refuse a batch above 1 before converting."""
    for spec in handle.input_specs:
        if spec.shape and spec.shape[0] != 1:
            raise UnsupportedError(f"backend '{backend}' runs one sample per inference (its "
                                   f"tensors have no batch axis); got batch {spec.shape[0]}, "
                                   "use batch 1", backend=backend)


def describe(d: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in d.items())
