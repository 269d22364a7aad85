"""The router's "on the board's other processor instead" note names only a processor the
chosen runtime runs on there (its ``board_devices``): llama.cpp as edgeprof knows it runs on a
board's CPU or CUDA GPU, not on the Raspberry Pi 5's VideoCore VII (``--device gpu``)."""

from __future__ import annotations

from edgeprof.optimize.llm import choose_llm_format
from edgeprof.zoo.llm import resolve_llm


def test_no_other_processor_note_for_a_device_the_runtime_does_not_run_on():
    choice = choose_llm_format(resolve_llm("llm:smollm2-135m"), "raspberry_pi_5",
                               backends=["llama_cpp"], precisions="q8_0")
    assert choice.device == "cpu"
    assert not [n for n in choice.notes if "'s gpu instead" in n], choice.notes


def test_the_note_stays_where_the_runtime_runs_on_the_other_processor():
    choice = choose_llm_format(resolve_llm("llm:smollm2-135m"), "jetson_nano",
                               backends=["llama_cpp"], precisions="q8_0")
    assert choice.device == "cuda"
    assert [n for n in choice.notes if "jetson_nano's cpu instead" in n], choice.notes
