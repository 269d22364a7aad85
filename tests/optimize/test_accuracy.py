"""The built-in digits data set, training, npz validation, evaluation and acceptance."""

from __future__ import annotations

import numpy as np
import pytest

from edgeprof.core.errors import InputSpecError, UserError
from edgeprof.core.models import InputSpec, ModelHandle
from edgeprof.optimize.accuracy import (accept, agreement_with_reference, evaluate,
                                         load_digits_dataset, load_npz_dataset, torch_run_fn,
                                         train_builtin)

import torch


@pytest.mark.parametrize("name,shape,dtype", [
    ("small_cnn", (1, 28, 28), "float32"), ("mlp", (1, 28, 28), "float32"),
    ("small_resnet", (3, 32, 32), "float32"), ("small_mobilenet", (3, 32, 32), "float32"),
    ("tiny_transformer", (32,), "int64")])
def test_digits_encoded_for_each_builtin(name, shape, dtype):
    d = load_digits_dataset(name)
    assert d.x_train.shape[1:] == shape and str(d.x_test.dtype) == dtype
    assert len(d.y_train) + len(d.y_test) == 1797 and len(d.y_test) == 359
    assert set(np.unique(d.y_test)) == set(range(10))
    if dtype == "int64":
        assert d.x_test.min() >= 0 and d.x_test.max() <= 32
    else:
        assert 0.0 <= d.x_test.min() and d.x_test.max() <= 1.0


def test_split_is_fixed():
    a, b = load_digits_dataset("small_cnn"), load_digits_dataset("small_cnn")
    assert np.array_equal(a.y_test, b.y_test) and np.array_equal(a.x_train, b.x_train)
    assert not np.array_equal(load_digits_dataset("small_cnn", seed=1).y_test, a.y_test)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("EDGEPROF_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    yield train_builtin("small_cnn", seconds=8.0, max_epochs=3)
    mp.undo()


def test_trained_small_cnn_is_well_above_chance(trained):
    assert trained.accuracy > 0.85  # chance is 0.10
    assert trained.train_seconds <= 9.0 and trained.steps > 0
    data = load_digits_dataset("small_cnn")
    assert evaluate(torch_run_fn(trained.module), data) == pytest.approx(trained.accuracy)


def test_trained_weights_are_cached(trained, monkeypatch):
    monkeypatch.setenv("EDGEPROF_CACHE_DIR", str(trained.cache_path).rsplit("/trained/", 1)[0])
    again = train_builtin("small_cnn", seconds=8.0, max_epochs=3)
    assert again.from_cache and again.accuracy == trained.accuracy
    for a, b in zip(again.module.state_dict().values(), trained.module.state_dict().values()):
        assert torch.equal(a, b)


def test_untrained_model_is_near_chance():
    from edgeprof.zoo.models import small_cnn

    acc = evaluate(torch_run_fn(small_cnn()[0]), load_digits_dataset("small_cnn"))
    assert acc < 0.3


def test_agreement_and_acceptance(trained):
    data = load_digits_dataset("small_cnn")
    run = torch_run_fn(trained.module)
    ref = run(data.x_test)
    agree = agreement_with_reference(ref, run(data.x_test))
    assert agree["top1_agreement"] == 1.0 and agree["max_abs_error"] == 0.0
    noisy = ref + np.random.default_rng(0).normal(0, 5, ref.shape)
    worse = agreement_with_reference(ref, noisy)
    assert worse["top1_agreement"] < 1.0 and worse["cosine_similarity"] < 1.0
    assert accept(0.955, 0.96).accepted
    a = accept(0.94, 0.96)
    assert not a.accepted and a.drop_pp == pytest.approx(2.0) and len(a.reasons) == 2
    assert accept(0.94, 0.96, max_accuracy_drop=2.5, min_ratio=0.97).accepted
    with pytest.raises(UserError):
        accept(95, 0.96)


def handle(shape=(1, 1, 28, 28), dtype="float32"):
    from edgeprof.zoo.models import small_cnn

    return ModelHandle(spec="builtin:small_cnn", name="small_cnn", format="torch",
                       input_specs=[InputSpec(shape, dtype)], _module=small_cnn()[0])


def test_npz_dataset_loads_and_evaluates(tmp_path):
    d = load_digits_dataset("small_cnn")
    path = tmp_path / "mine.npz"
    np.savez(path, x=d.x_test[:50], y=d.y_test[:50])
    ds = load_npz_dataset(path, handle())
    assert ds.x_test.shape == (50, 1, 28, 28) and ds.num_classes == 10
    assert 0.0 <= evaluate(torch_run_fn(handle().torch_module()), ds) <= 1.0


@pytest.mark.parametrize("arrays,match", [
    ({"x": np.zeros((4, 1, 32, 32), "float32"), "y": np.zeros(4, "int64")}, "x has shape"),
    ({"x": np.zeros((4, 1, 28, 28), "float32")}, "no array 'y'"),
    ({"x": np.zeros((4, 1, 28, 28), "float32"), "y": np.zeros(3, "int64")}, "one label per"),
    ({"x": np.zeros((4, 1, 28, 28), "float32"), "y": np.array([0, 1, 2, 10])}, "out of range"),
    ({"x": np.zeros((4, 1, 28, 28), "float32"), "y": np.array([0, -1, 2, 3])}, ">= 0"),
    ({"x": np.zeros((4, 1, 28, 28), "float32"), "y": np.array([0.5, 1, 2, 3])}, "integer"),
])
def test_npz_validation_errors(tmp_path, arrays, match):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(InputSpecError, match=match) as e:
        load_npz_dataset(path, handle())
    assert "\n" not in str(e.value)


def test_npz_token_model_needs_integer_x(tmp_path):
    path = tmp_path / "tokens.npz"
    np.savez(path, x=np.zeros((4, 32), "float32"), y=np.zeros(4, "int64"))
    with pytest.raises(InputSpecError, match="token"):
        load_npz_dataset(path, ((32,), "int64"), num_classes=10)


def test_npz_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_npz_dataset(tmp_path / "nope.npz", handle())


def test_fine_tune_recovers_accuracy_and_keeps_pruned_weights_zero(trained):
    from edgeprof.optimize.accuracy import fine_tune, load_digits_dataset
    from edgeprof.optimize.compression import prune_n_m

    data = load_digits_dataset("small_cnn")
    pruned, _record = prune_n_m(trained.module, n=2, m=4)
    zeros = {name: (p == 0) for name, p in pruned.named_parameters() if p.dim() >= 2}
    info = fine_tune(pruned, data, max_steps=60, seconds=30)
    assert info["steps"] == 60 and info["masked_tensors"] >= 1
    for name, p in pruned.named_parameters():
        if name in zeros:
            assert bool((p[zeros[name]] == 0).all()), f"{name}: pruned weights came back"
    assert info["accuracy_after"] >= info["accuracy_before"] - 0.01
    assert info["accuracy_after"] > 0.5


def test_accuracy_of_a_quantized_input_tflite_model(trained):
    """Issue 21: tflite int8_static takes int8 inputs; optimize rejected it with 'accuracy not
    measured' though profile ran the same build. The backend's own feed quantizes the data
    (scale and zero point from the interpreter's input details)."""
    from dataclasses import replace

    from edgeprof.core.backend import RunConfig
    from edgeprof.core.models import resolve_model
    from edgeprof.core.plugins import get_registry
    from edgeprof.optimize.evaluate import predict_with

    handle = replace(resolve_model("builtin:small_cnn"), _module=trained.module)
    data = load_digits_dataset("small_cnn")
    cls = get_registry().backend("tflite")
    x = data.x_test[:64]
    ref = predict_with(get_registry().backend("torch_eager"), handle,
                       RunConfig(precision="fp32"), x)
    logits = predict_with(cls, handle, RunConfig(precision="int8_static"), x)
    assert logits.shape == ref.shape
    agree = float(np.mean(logits.argmax(1) == ref.argmax(1)))
    assert agree > 0.8
