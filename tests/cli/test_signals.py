"""edgeprof's SIGINT/SIGTERM handling: a dedicated exception, never lost in a gc callback.

Each case signals its own process, so each runs in a fresh interpreter: what other tests
loaded into pytest's process (OpenVINO's threads, for one) must not decide where the kernel
delivers the signal.
"""

from __future__ import annotations

import gc
import os
import signal
import time

import pytest

from edgeprof.cli.signals import Interrupted, handling_signals


def case_a_signal_becomes_interrupted_with_its_exit_status(sig, code, line):
    with handling_signals(), pytest.raises(Interrupted) as err:
        os.kill(os.getpid(), sig)
        time.sleep(5)
    assert (err.value.exit_code, err.value.message) == (code, line)
    assert isinstance(err.value, KeyboardInterrupt)  # cleanup written for Ctrl-C runs too


def case_handlers_are_restored_afterwards():
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with handling_signals():
        assert signal.getsignal(signal.SIGTERM) is not before[1]
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def case_an_interrupt_raised_inside_a_gc_callback_is_delivered_again():
    """Python drops an exception raised in a gc callback ("Exception ignored"); JAX has one,
    and a third of all Ctrl-Cs were lost there."""
    fired = []

    def callback(phase, info):
        if phase == "stop" and not fired:
            fired.append(True)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)  # the handler runs here, inside the callback

    gc.callbacks.append(callback)
    try:
        with handling_signals(), pytest.raises(Interrupted):
            gc.collect()
            assert fired
            time.sleep(5)  # interrupted again, out here
    finally:
        gc.callbacks.remove(callback)


def case_a_second_signal_does_not_abort_the_cleanup_of_the_first():
    cleaned = []
    with handling_signals(), pytest.raises(Interrupted) as err:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
            cleaned.append(True)
    assert cleaned and err.value.signum == signal.SIGINT


def _in_fresh_interpreter(call: str) -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = f"import tests.cli.test_signals as m, signal; m.{call}"
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.mark.parametrize("call", [
    'case_a_signal_becomes_interrupted_with_its_exit_status(signal.SIGINT, 130, '
    '"edgeprof: interrupted")',
    'case_a_signal_becomes_interrupted_with_its_exit_status(signal.SIGTERM, 143, '
    '"edgeprof: interrupted (SIGTERM)")',
    "case_handlers_are_restored_afterwards()",
    "case_an_interrupt_raised_inside_a_gc_callback_is_delivered_again()",
    "case_a_second_signal_does_not_abort_the_cleanup_of_the_first()",
])
def test_signal_handling(call):
    _in_fresh_interpreter(call)
