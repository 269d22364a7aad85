"""One error hierarchy for edgeprof.

::

    EdgeprofError                      exit 1 unless a subclass says otherwise
    ├── UserError                      exit 2: the input or configuration is wrong
    │   ├── ConfigError                a TOML file (plugins.toml, a target) is malformed; .path, .field
    │   │   ├── TargetError            a target descriptor is invalid
    │   │   ├── CalibrationError       a calibration file is corrupted or of another format [1]
    │   │   │   └── LLMCalibrationError  an LLM calibration file is, too [2]
    │   │   └── MeasurementsError      a measurements CSV is unusable; names the file and line [3]
    │   ├── UnknownNameError           unknown target / backend / model / precision; .kind, .name, .known
    │   ├── ModelError                 a model spec or file cannot be loaded; .spec
    │   ├── InputSpecError             --input-shape / --input-dtype / batch size is wrong
    │   ├── PluginError                a plugin cannot be imported or clashes with another
    │   ├── NotOfferedError            a runtime does not offer the precision asked; .offered [4]
    │   └── OutputError                --out cannot be used or written; .path, .result
    ├── UnsupportedError               exit 3: the backend cannot do this (precision, format)
    ├── BackendUnavailableError        exit 3: runtime or device missing; .reason, .hint
    ├── MeasurementError               exit 3: a run that should work produced no measurement
    │   ├── WorkerLost                 the worker process died, hung past its timeout or sent nothing [5]
    │   └── SchedulerLostError         the connection to the fleet's scheduler is gone [6]
    ├── ConstraintError                exit 4: the user's constraints cannot be met
    ├── ArtifactError                  an artifact's file is missing or differs from its manifest [7]
    └── LlamaCppError                  llama.cpp refused or failed (quantizing, loading, decoding) [8]

Defined beside their users: [1] ``profilers/predict/calibration.py``, [2]
``profilers/predict/llm/files.py``, [3] ``profilers/predict/measured.py``, [4]
``profilers/predict/runtimes.py``, [5] ``profilers/measure/runners.py``, [6]
``profilers/measure/fleet_dispatcher.py``, [7] ``core/artifact.py``, [8]
``backends/llama_cpp.py``. ``tests/core/test_errors.py`` keeps the drawing whole: every
subclass in the package, under its base.

Every error carries its context as attributes, and ``str(err)`` is one line that says what
was wrong and what to do; the CLI prints exactly that line and exits with ``err.exit_code``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class EdgeprofError(Exception):
    """Base of every error edgeprof raises on purpose."""

    exit_code: int = 1


class UserError(EdgeprofError):
    """The user's input or configuration is wrong (exit status 2)."""

    exit_code = 2


class ConfigError(UserError):
    """A configuration file is malformed. ``path`` and ``field`` say where."""

    def __init__(self, message: str, *, path: object = None, field: str | None = None):
        where = ""
        if path is not None:
            where = f"{path}"
            if field:
                where += f": field '{field}'"
            where += ": "
        super().__init__(where + message)
        self.path = path
        self.field = field


class TargetError(ConfigError):
    """A target descriptor is missing a field, has an unknown one, or a wrong unit or type."""


class UnknownNameError(UserError):
    """A name (target, backend, model, precision ...) is not known."""

    def __init__(self, kind: str, name: str, known: Iterable[str], hint: str = ""):
        self.kind = kind
        self.name = name
        self.known = sorted(known)
        close = difflib.get_close_matches(name, self.known, n=1)
        self.closest = close[0] if close else None
        msg = f"unknown {kind} '{name}'"
        if self.closest:
            msg += f" (did you mean '{self.closest}'?)"
        msg += f"; known: {', '.join(self.known) if self.known else '(none)'}"
        if hint:
            msg += f". {hint}"
        super().__init__(msg)


class ModelError(UserError):
    """A model spec cannot be resolved or the model cannot be loaded."""

    def __init__(self, message: str, *, spec: str | None = None):
        super().__init__(message)
        self.spec = spec


class InputSpecError(UserError):
    """An input shape, dtype or batch size is invalid for the model."""


class PluginError(UserError):
    """A plugin cannot be loaded, or two plugins register the same name."""


class OutputError(UserError):
    """The output folder cannot be used (a file, foreign files, read-only, full disk).
    ``path`` names it; ``result`` holds what was computed when writing failed afterwards."""

    def __init__(self, message: str, *, path: object = None, result: object = None):
        super().__init__(message)
        self.path = path
        self.result = result


class UnsupportedError(EdgeprofError):
    """The backend cannot do what was asked (a precision, a model format, a device)."""

    exit_code = 3

    def __init__(self, message: str, *, backend: str | None = None, precision: str | None = None):
        super().__init__(message)
        self.backend = backend
        self.precision = precision


class BackendUnavailableError(EdgeprofError):
    """The backend's runtime or device is missing. ``hint`` says how to enable it."""

    exit_code = 3

    def __init__(self, backend: str, reason: str, hint: str = ""):
        msg = f"backend '{backend}' is unavailable: {reason}"
        if hint:
            msg += f" ({hint})"
        super().__init__(msg)
        self.backend = backend
        self.reason = reason
        self.hint = hint


class MeasurementError(EdgeprofError):
    """A run that should have worked produced no measurement (crash, hang, timeout)."""

    exit_code = 3


class ConstraintError(EdgeprofError):
    """The user's constraints cannot all be met."""

    exit_code = 4


__all__ = [
    "BackendUnavailableError",
    "ConfigError",
    "ConstraintError",
    "EdgeprofError",
    "InputSpecError",
    "MeasurementError",
    "ModelError",
    "OutputError",
    "PluginError",
    "TargetError",
    "UnknownNameError",
    "UnsupportedError",
    "UserError",
]
