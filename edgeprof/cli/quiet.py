"""Quiet output: the runtimes' own log noise kept off the terminal, in one place.

TensorFlow's and absl's banners (oneDNN notices, "All log messages before
absl::InitializeLog()"), torch's FutureWarnings and UserWarnings, and ONNX Runtime's
quantization advice ("Please consider to run pre-processing before quantization", logged at
WARNING on the root logger), torch's deprecation of torchao's pytree registration say
nothing about the user's model and bury edgeprof's own lines. :func:`quieted` silences them for one command; ``--debug`` leaves everything on.

A runtime's native output is another matter: C code writes to file descriptor 1 whatever
Python's ``sys.stdout`` is (MNN prints "The device supports: ..." when it is imported, in the
harness's import before the memory baseline; a converter's child process inherits the
descriptor; C stdio flushes its buffer whenever it likes). :func:`native_output_to_stderr`
points descriptor 1 at stderr for the whole command and gives ``sys.stdout`` a descriptor of
its own on the real output, so stdout carries edgeprof's output only (``--json`` stays one
document) for every backend and every moment, ``--debug`` included; the chatter is still
seen, on stderr.

edgeprof's own warnings are not Python warnings (they are ``WarningRecord``s in the results,
printed by the CLI), so nothing of edgeprof's is lost. Errors still print: the root logger
keeps ERROR, and TensorFlow keeps its errors (``TF_CPP_MIN_LOG_LEVEL=2``).

Nothing heavy is imported here: environment variables reach the runtimes when they load
(later, lazily) and the worker processes edgeprof spawns, which inherit them. A variable the
user set is left as it is.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
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


def _flush_c_stdio() -> None:
    """Empty C's stdio buffers (C code's printf into a pipe or file is block-buffered)."""
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):  # no C library to ask (not POSIX)
        pass


@contextlib.contextmanager
def native_output_to_stderr() -> Iterator[None]:
    """Within the block, file descriptor 1 is stderr: what native code, C stdio (flushed
    here, before the descriptor comes back) and child processes write to "stdout" goes to
    stderr. ``sys.stdout``, where it is descriptor 1 (the command line), writes to a
    duplicate of the real output meanwhile, so edgeprof's own output is unchanged. A
    ``sys.stdout`` that is something else (a test's capture, a notebook) is left alone; only
    the descriptor moves. Everything is restored after."""
    out = sys.stdout
    try:
        if out is not None:
            out.flush()
        _flush_c_stdio()  # what C code buffered before the block stays where it was going
        saved = os.dup(1)
    except (OSError, ValueError):  # no descriptor 1 (an embedding host): leave it alone
        yield
        return
    try:
        own = out is not None and out.fileno() == 1
    except (AttributeError, OSError, ValueError):  # not a file: a capture, a notebook
        own = False
    mine = None
    if own:
        mine = io.TextIOWrapper(io.BufferedWriter(io.FileIO(saved, "w", closefd=False)),
                                encoding=out.encoding, errors=out.errors,
                                line_buffering=out.line_buffering)
    os.dup2(2, 1)
    if mine is not None:
        sys.stdout = mine
    broken: BaseException | None = None
    try:
        yield
    finally:
        if mine is not None:
            try:
                mine.flush()
            except OSError as e:  # the output's reader has gone: raised after restoring
                broken = e
        _flush_c_stdio()  # native output buffered in the block goes to stderr
        os.dup2(saved, 1)
        if mine is not None:
            if sys.stdout is mine:
                sys.stdout = out
            if broken is not None:  # drop what could not be written (no "Exception
                null = os.open(os.devnull, os.O_WRONLY)  # ignored" when it is collected)
                os.dup2(null, saved)
                os.close(null)
            try:
                mine.close()
            except OSError:
                pass
        os.close(saved)
    if broken is not None:
        raise broken


@contextlib.contextmanager
def quieted(debug: bool = False) -> Iterator[None]:
    """Within the block: third-party log noise off (unless ``debug``) and native output off
    stdout (always); restored after, so an in-process caller (a test, a notebook calling
    ``main``) gets its settings back."""
    with native_output_to_stderr():
        if debug:
            yield
        else:
            with _quiet_logs():
                yield


@contextlib.contextmanager
def _quiet_logs() -> Iterator[None]:
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


__all__ = ["QUIET_ENV", "QUIET_LOGGERS", "QUIET_MESSAGES", "native_output_to_stderr",
           "quiet_third_party", "quieted"]
