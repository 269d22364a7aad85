"""ConfigPredictor: the one call behind every board figure (``edgeprof.predict``, the plan of
recommend/optimize, a sweep's board figure) gives predict's number and label."""

from __future__ import annotations

import pytest

from edgeprof.api import predict
from edgeprof.core.errors import UserError
from edgeprof.core.models import resolve_model
from edgeprof.profilers.predict.config import ConfigPredictor
from edgeprof.targets import get_target


@pytest.mark.parametrize("target, backend, precision", [
    ("raspberry_pi_4", "tflite", "int8_static"), ("raspberry_pi_4", "openvino", "int8_weight"),
    ("mcu", "tflite", "int8"), ("jetson_nano", "onnxruntime", "fp32")])
def test_the_same_figure_and_label_as_predict(target, backend, precision):
    want = predict("builtin:small_cnn", target, backend, precision)
    got = ConfigPredictor(get_target(target), backend, precision)(
        resolve_model("builtin:small_cnn"))
    assert (got.value_ms, got.low_ms, got.high_ms, got.provenance, got.calibration) == \
        (want.value_ms, want.low_ms, want.high_ms, want.provenance, want.calibration)


def test_what_predict_refuses_it_refuses():
    with pytest.raises(UserError) as e:
        ConfigPredictor(get_target("raspberry_pi_4"), "tensorrt", "fp32")
    with pytest.raises(UserError) as f:
        predict("builtin:small_cnn", "raspberry_pi_4", "tensorrt")
    assert str(e.value) == str(f.value)
