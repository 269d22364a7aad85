"""Quiet output: the runtimes' own log noise kept off the terminal, in one place.

TensorFlow's and absl's banners (oneDNN notices, "All log messages before
absl::InitializeLog()"), torch's FutureWarnings and UserWarnings, and ONNX Runtime's
quantization advice ("Please consider to run pre-processing before quantization", logged at
WARNING on the root logger), torch's deprecation of torchao's pytree registration say
nothing about the user's model and bury edgeprof's own lines. :func:`quieted` silences them for one command; ``--debug`` leaves everything on.

edgeprof's own warnings are not Python warnings (they are ``WarningRecord``s in the results,
printed by the CLI), so nothing of edgeprof's is lost. Errors still print: the root logger
keeps ERROR, and TensorFlow keeps its errors (``TF_CPP_MIN_LOG_LEVEL=2``).

Nothing heavy is imported here: environment variables reach the runtimes when they load
(later, lazily) and the worker processes edgeprof spawns, which inherit them. A variable the
user set is left as it is.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Iterator

#: set (unless the user set them) before any runtime loads; inherited by worker processes
QUIET_ENV = {
    "TF_CPP_MIN_LOG_LEVEL": "2",  # TensorFlow/LiteRT C++: errors only (no INFO/WARNING banners)
    "TF_CPP_MAX_VLOG_LEVEL": "-1",
    "GRPC_VERBOSITY": "ERROR",
    "GLOG_minloglevel": "2",
    "PYTHONWARNINGS": "ignore",  # spawned workers and converter subprocesses
    # LiteRT's native "INFO: Created TensorFlow Lite XNNPACK delegate" line has no log-level
    # switch: backends filter their native stderr while loading (backends/common.py)
    "EDGEPROF_QUIET_NATIVE": "1",
}
#: Python loggers of third-party libraries raised to ERROR
QUIET_LOGGERS = ("absl", "tensorflow", "h5py", "jax", "torch", "torch._dynamo",
                 "torch._inductor", "torch.onnx", "onnxscript", "nncf", "openvino",
                 "transformers", "tf2onnx", "matplotlib", "PIL")
#: single messages dropped at the logger that logs them: logger -> the messages' format
#: strings' beginnings. torch sets up its own loggers when it is imported (levels back to
#: WARNING, its own handler), after the levels above were set; a logger's filter stays.
QUIET_MESSAGES = {
    # torchao registers its KernelPreference Enum with torch's pytree when imported (tflite's
    # int8 conversion imports it, so optimize did): a deprecation between the two libraries
    "torch.utils._pytree": ("%s is an Enum subclass and is now natively supported",),
}


class _DropMessages(logging.Filter):
    """Drops the records whose format string begins with one of ``beginnings``."""

    def __init__(self, beginnings: tuple[str, ...]):
        super().__init__()
        self.beginnings = beginnings

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith(self.beginnings))


_FILTERS = {name: _DropMessages(beginnings) for name, beginnings in QUIET_MESSAGES.items()}


@contextlib.contextmanager
def quieted(debug: bool = False) -> Iterator[None]:
    """Within the block: third-party log noise off (unless ``debug``); restored after, so an
    in-process caller (a test, a notebook calling ``main``) gets its settings back."""
    if debug:
        yield
        return
    env_before = {k: os.environ.get(k) for k in QUIET_ENV}
    loggers = [logging.getLogger()] + [logging.getLogger(n) for n in QUIET_LOGGERS]
    levels = [lg.level for lg in loggers]
    with warnings.catch_warnings():
        quiet_third_party()
        try:
            yield
        finally:
            for name, drop in _FILTERS.items():
                logging.getLogger(name).removeFilter(drop)
            for lg, level in zip(loggers, levels):
                lg.setLevel(level)
            for k, v in env_before.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def quiet_third_party() -> None:
    """Silence the runtimes' noise in this process and the ones it starts (not undone: use
    :func:`quieted` for a block)."""
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    # edgeprof raises no Python warnings of its own: these are torch's FutureWarnings,
    # UserWarnings of converters, numpy/keras DeprecationWarnings ...
    warnings.simplefilter("ignore")
    root = logging.getLogger()  # ONNX Runtime's quantizer logs its advice on the root logger
    root.setLevel(max(root.level, logging.ERROR))
    for name in QUIET_LOGGERS:
        lg = logging.getLogger(name)
        lg.setLevel(max(lg.level, logging.ERROR))
    for name, drop in _FILTERS.items():  # a filter added twice is kept once
        logging.getLogger(name).addFilter(drop)


__all__ = ["QUIET_ENV", "QUIET_LOGGERS", "QUIET_MESSAGES", "quiet_third_party", "quieted"]
