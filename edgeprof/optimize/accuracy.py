"""Accuracy: a labelled data set that ships offline, trained built-in models, evaluation of
any runner, agreement with the fp32 reference, and the acceptance rule.

The built-in data set is scikit-learn's ``digits`` (1797 8x8 handwritten digits, 10
classes, shipped inside scikit-learn), encoded for each built-in model's input:

* ``1x28x28`` float (small_cnn, mlp) and ``3x32x32`` (small_resnet, small_mobilenet):
  bilinear resize of the 8x8 image, intensities scaled to [0, 1], repeated over channels;
* 32 int64 tokens (tiny_transformer): the image average-pooled to 8x4 = 32 cells, each
  cell's intensity (0..16 in half steps) quantized to a token id 0..32.

The split is fixed: a seeded permutation, 20 % held out for test.

Accuracy figures are fractions in [0, 1]; drops are in percentage points.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.core.errors import InputSpecError, UnknownNameError, UserError
from edgeprof.core.results import clean

DIGITS_CLASSES = 10
SPLIT_SEED = 0
TEST_FRACTION = 0.2
DEFAULT_MIN_RATIO = 0.99  # accept when accuracy >= 99 % of the fp32 accuracy ...
DEFAULT_MAX_DROP_PP = 1.0  # ... and the drop is within max_accuracy_drop


@dataclass
class Dataset:
    """A labelled data set in a model's input encoding (arrays have the batch axis first)."""

    name: str
    x_train: Any
    y_train: Any
    x_test: Any
    y_test: Any
    num_classes: int
    input_shape: tuple[int, ...]  # one sample, without the batch dimension
    dtype: str
    source: str
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return clean({"name": self.name, "train": int(len(self.y_train)),
                      "test": int(len(self.y_test)), "num_classes": self.num_classes,
                      "input_shape": list(self.input_shape), "dtype": self.dtype,
                      "source": self.source, "notes": self.notes})


# -------------------------------------------------------------------------- encoding
def _spec_of(model: Any) -> tuple[tuple[int, ...], str]:
    """(per-sample shape, dtype) of a model's first input: from a ModelHandle, a built-in
    model name, or ``(shape, dtype)``."""
    if isinstance(model, str):
        from edgeprof.zoo import BUILTIN_MODELS

        if model not in BUILTIN_MODELS:
            raise UnknownNameError("built-in model", model, BUILTIN_MODELS)
        _, shapes, dtypes = _build_builtin(model)
        return tuple(shapes[0][1:]), dtypes[0]
    if hasattr(model, "input_specs"):
        s = model.input_specs[0]
        return tuple(s.shape[1:]), s.dtype
    shape, dtype = model
    return tuple(shape), str(dtype)


def encode_digits(images: Any, shape: tuple[int, ...], dtype: str):
    """Encode 8x8 digit images (values 0..16) for an input of per-sample ``shape``."""
    import numpy as np

    imgs = np.asarray(images, dtype=np.float32)
    n = imgs.shape[0]
    if dtype.startswith("int"):
        if len(shape) != 1 or 64 % shape[0]:
            raise InputSpecError(f"the digits token encoding needs a sequence length dividing 64, "
                                 f"the model takes {shape}")
        cells = imgs.reshape(n, shape[0], 64 // shape[0]).mean(axis=2)  # row-major pooling
        return np.rint(cells * 2).astype(dtype)
    if len(shape) == 3 and shape[0] in (1, 3):
        import torch
        import torch.nn.functional as F

        t = torch.from_numpy(imgs / 16.0).unsqueeze(1)
        t = F.interpolate(t, size=tuple(shape[1:]), mode="bilinear", align_corners=False)
        return t.repeat(1, shape[0], 1, 1).numpy().astype(dtype)
    if len(shape) == 1 and shape[0] == 64:
        return (imgs.reshape(n, 64) / 16.0).astype(dtype)
    raise InputSpecError(f"the digits data set has no encoding for input shape {shape} "
                         f"({dtype}); give your own data with load_npz_dataset")


def load_digits_dataset(model: Any, *, seed: int = SPLIT_SEED,
                        test_fraction: float = TEST_FRACTION) -> Dataset:
    """scikit-learn's digits encoded for ``model`` (a built-in name, a ModelHandle, or
    ``(per-sample shape, dtype)``), with the fixed seeded train/test split."""
    import numpy as np
    from sklearn.datasets import load_digits

    shape, dtype = _spec_of(model)
    d = load_digits()
    x = encode_digits(d.images, shape, dtype)
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(seed).permutation(len(y))
    n_test = int(round(len(y) * test_fraction))
    test, train = perm[:n_test], perm[n_test:]
    return Dataset("digits", x[train], y[train], x[test], y[test], DIGITS_CLASSES, shape, dtype,
                   "scikit-learn load_digits (UCI optical recognition of handwritten digits)",
                   [f"8x8 images encoded for input {shape} {dtype}; split seed {seed}"])


# --------------------------------------------------------------------------- user data
def load_npz_dataset(path: str | os.PathLike, model_handle: Any,
                     num_classes: int | None = None) -> Dataset:
    """A user's ``.npz`` with arrays ``x`` (samples, batch axis first) and ``y`` (integer
    labels), validated against the model's first input and, where known, its class count
    (``num_classes``, else a torch model's output width). Everything is the test split."""
    import numpy as np

    p = Path(path)
    if not p.is_file():
        raise UserError(f"data file '{p}' does not exist")
    try:
        with np.load(p, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
    except Exception as e:
        raise UserError(f"cannot read '{p}' as .npz: {type(e).__name__}: {e}") from None
    missing = [k for k in ("x", "y") if k not in arrays]
    if missing:
        raise InputSpecError(f"'{p.name}' has no array {' or '.join(repr(m) for m in missing)}; "
                             f"it has {sorted(arrays) or 'none'} (need x: samples, y: labels)")
    x, y = arrays["x"], arrays["y"]
    shape, dtype = _spec_of(model_handle)
    if x.ndim != len(shape) + 1 or tuple(x.shape[1:]) != shape:
        raise InputSpecError(f"'{p.name}': x has shape {tuple(x.shape)} but the model takes "
                             f"(N, {', '.join(map(str, shape))})")
    if dtype.startswith("int"):
        if not np.issubdtype(x.dtype, np.integer):
            raise InputSpecError(f"'{p.name}': x is {x.dtype} but the model takes {dtype} "
                                 "token ids")
    elif not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)):
        raise InputSpecError(f"'{p.name}': x is {x.dtype}, not numeric")
    if y.ndim != 1 or len(y) != len(x):
        raise InputSpecError(f"'{p.name}': y must be one label per sample, shape ({len(x)},); "
                             f"got {tuple(y.shape)}")
    if np.issubdtype(y.dtype, np.floating) and np.all(np.mod(y, 1) == 0):
        y = y.astype(np.int64)
    if not np.issubdtype(y.dtype, np.integer):
        raise InputSpecError(f"'{p.name}': y must hold integer class labels, got {y.dtype}")
    if len(y) == 0:
        raise InputSpecError(f"'{p.name}' holds no samples")
    if y.min() < 0:
        raise InputSpecError(f"'{p.name}': labels must be >= 0, found {int(y.min())}")
    classes = num_classes or _output_width(model_handle, x[:1].astype(dtype))
    if classes is not None and y.max() >= classes:
        raise InputSpecError(f"'{p.name}': label {int(y.max())} is out of range for a model "
                             f"with {classes} outputs")
    empty = x[:0].astype(dtype)
    return Dataset(p.stem, empty, y[:0].astype(np.int64), x.astype(dtype), y.astype(np.int64),
                   int(classes or (y.max() + 1)), shape, dtype, str(p))


def _output_width(model_handle: Any, sample: Any) -> int | None:
    if getattr(model_handle, "format", None) != "torch":
        return None
    out = predict(torch_run_fn(model_handle.torch_module()), sample)
    return int(out.shape[-1]) if out.ndim >= 2 else None


# -------------------------------------------------------------------------- evaluation
def _logits(out: Any):
    import numpy as np

    if isinstance(out, (list, tuple)):
        out = out[0]
    if hasattr(out, "detach"):
        out = out.detach().float().cpu().numpy()
    return np.asarray(out)


def torch_run_fn(module: Any, dtype: Any = None) -> Callable[[Any], Any]:
    """A callable mapping a numpy batch to numpy logits through a torch module."""
    import torch

    module.eval()

    def run(batch):
        t = torch.from_numpy(batch)
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        with torch.inference_mode():
            return module(t).float().numpy()

    return run


def predict(run_fn: Callable[[Any], Any], x: Any, batch_size: int = 256):
    """Logits of ``run_fn`` over ``x`` in batches, as one numpy array."""
    import numpy as np

    outs = [_logits(run_fn(x[i:i + batch_size])) for i in range(0, len(x), batch_size)]
    return np.concatenate(outs) if outs else np.zeros((0, 0))


def evaluate(run_fn: Callable[[Any], Any], dataset: Dataset, batch_size: int = 256,
             split: str = "test") -> float:
    """Top-1 accuracy (a fraction) of ``run_fn`` (numpy batch -> logits) on ``dataset``."""
    import numpy as np

    if split not in ("test", "train"):
        raise UserError(f"split must be 'test' or 'train', got {split!r}")
    x, y = getattr(dataset, f"x_{split}"), getattr(dataset, f"y_{split}")
    if len(y) == 0:
        raise UserError(f"data set '{dataset.name}' has no {split} samples")
    logits = predict(run_fn, x, batch_size)
    if logits.ndim != 2 or logits.shape[0] != len(y):
        raise UserError(f"the runner returned shape {logits.shape} for {len(y)} samples; it "
                        "must return one row of class scores per sample")
    return float(np.mean(logits.argmax(axis=1) == y))


def agreement_with_reference(ref_logits: Any, logits: Any, precision: str = "fp32") -> dict:
    """Top-1 agreement, max abs error and cosine similarity against the fp32 reference
    (``edgeprof.backends.common.compare_outputs``) as a dict."""
    from edgeprof.backends.common import compare_outputs

    return compare_outputs(_logits(ref_logits), _logits(logits), precision).to_dict()


@dataclass
class Acceptance:
    accepted: bool
    accuracy: float
    reference_accuracy: float
    ratio: float  # accuracy / reference accuracy
    drop_pp: float  # (reference - accuracy) x 100
    min_ratio: float
    max_accuracy_drop: float
    reasons: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return clean(self.__dict__)


def accept(accuracy: float, reference_accuracy: float, *, min_ratio: float = DEFAULT_MIN_RATIO,
           max_accuracy_drop: float = DEFAULT_MAX_DROP_PP) -> Acceptance:
    """Accept a compressed/converted model when its accuracy is at least ``min_ratio`` of
    the fp32 accuracy and its drop is within ``max_accuracy_drop`` percentage points."""
    for name, v in (("accuracy", accuracy), ("reference_accuracy", reference_accuracy)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
            raise UserError(f"{name} must be a fraction in [0, 1], got {v!r}")
    for name, v in (("min_ratio", min_ratio), ("max_accuracy_drop", max_accuracy_drop)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or not math.isfinite(v):
            raise UserError(f"{name} must be a non-negative number, got {v!r}")
    ratio = accuracy / reference_accuracy if reference_accuracy > 0 else 1.0
    drop = (reference_accuracy - accuracy) * 100
    reasons = []
    if ratio < min_ratio:
        reasons.append(f"accuracy {accuracy:.4f} is {ratio:.2%} of fp32's {reference_accuracy:.4f}"
                       f" (needs {min_ratio:.0%})")
    if drop > max_accuracy_drop + 1e-9:
        reasons.append(f"drop {drop:.2f} pp exceeds max_accuracy_drop {max_accuracy_drop:g} pp")
    return Acceptance(not reasons, float(accuracy), float(reference_accuracy), ratio, drop,
                      float(min_ratio), float(max_accuracy_drop), reasons)


# ----------------------------------------------------------------------------- training
@dataclass
class TrainedModel:
    name: str
    module: Any
    accuracy: float  # on the digits test split
    epochs: int  # complete epochs
    steps: int
    train_seconds: float
    stopped_by: str  # "epochs" or "time"
    seed: int
    cache_path: str | None
    from_cache: bool

    def to_dict(self) -> dict[str, Any]:
        return clean({k: v for k, v in self.__dict__.items() if k != "module"})


def _build_builtin(name: str):
    from edgeprof.zoo import BUILTIN_MODELS

    mod_name, _, attr = BUILTIN_MODELS[name].partition(":")
    module, shapes = getattr(importlib.import_module(mod_name), attr)()
    dtypes = ["float32"] * len(shapes)
    if isinstance(shapes, dict):
        shapes, dtypes = shapes["shapes"], shapes.get("dtypes", dtypes)
    return module, shapes, dtypes


def train_builtin(name: str, seconds: float = 8.0, *, seed: int = 0, max_epochs: int = 30,
                  batch_size: int = 32, lr: float = 2e-3, cache: bool = True,
                  threads: int | None = 1) -> TrainedModel:
    """Train built-in model ``name`` on digits (CPU, seeded) for at most ``max_epochs``
    epochs or ``seconds`` of training, whichever ends first (the run is deterministic when
    the epochs end first; ``stopped_by`` says which did); cache the weights in
    ``cache_dir("trained")`` keyed by the model, the recipe and torch's version.
    ``threads`` (default 1: small models train fastest on one thread, and a shared machine
    does not stall on it) is torch's intra-op thread count while training, then restored."""
    import torch

    from edgeprof._version import __version__
    from edgeprof.core.cache import cache_dir
    from edgeprof.zoo import BUILTIN_MODELS

    if name not in BUILTIN_MODELS:
        raise UnknownNameError("built-in model", name, BUILTIN_MODELS)
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
        raise UserError(f"seconds must be a positive number, got {seconds!r}")
    torch.manual_seed(seed)
    module, shapes, dtypes = _build_builtin(name)
    data = load_digits_dataset((tuple(shapes[0][1:]), dtypes[0]))
    recipe = {"model": name, "arch": repr(module), "seed": seed, "max_epochs": max_epochs,
              "batch_size": batch_size, "lr": lr, "torch": torch.__version__,
              "edgeprof": __version__, "data": "digits", "split_seed": SPLIT_SEED}
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]
    folder = cache_dir("trained")
    weights, meta_path = folder / f"{name}-{digest}.pt", folder / f"{name}-{digest}.json"
    if cache and weights.is_file() and meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        module.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
        module.eval()
        return TrainedModel(name, module, meta["accuracy"], meta["epochs"], meta["steps"],
                            meta["train_seconds"], meta["stopped_by"], seed, str(weights), True)

    previous_threads = torch.get_num_threads()
    if threads:
        torch.set_num_threads(int(threads))
    try:
        epochs, steps, stopped_by, elapsed = _fit(module, data, seed=seed, batch_size=batch_size,
                                                  lr=lr, seconds=seconds, max_epochs=max_epochs)
        acc = evaluate(torch_run_fn(module), data)
    finally:
        torch.set_num_threads(previous_threads)
    path = None
    if cache:
        from edgeprof.core.io import write_text, write_with

        write_with(weights, lambda tmp: torch.save(module.state_dict(), tmp))
        write_text(meta_path, json.dumps({"accuracy": acc, "epochs": epochs, "steps": steps,
                                          "train_seconds": elapsed, "stopped_by": stopped_by,
                                          "recipe": recipe}, indent=2))
        path = str(weights)
    return TrainedModel(name, module, acc, epochs, steps, elapsed, stopped_by, seed, path, False)


def _fit(module, data, *, seed: int, batch_size: int, lr: float, seconds: float,
         max_epochs: int | None = None, max_steps: int | None = None,
         masks: dict | None = None) -> tuple[int, int, str, float]:
    """Adam on the training split, seeded shuffles, until ``max_epochs``, ``max_steps`` or
    ``seconds`` (a hard ceiling), whichever comes first; ``masks`` (parameter -> bool tensor)
    are applied after every step. Returns (epochs, steps, stopped_by, seconds)."""
    import torch

    x = torch.from_numpy(data.x_train)
    y = torch.from_numpy(data.y_train)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(module.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    module.train()
    t0 = time.perf_counter()
    epochs = steps = 0
    stopped_by = None
    while stopped_by is None:
        perm = torch.randperm(len(y), generator=gen)
        for i in range(0, len(y), batch_size):
            idx = perm[i:i + batch_size]
            opt.zero_grad()
            loss_fn(module(x[idx]), y[idx]).backward()
            opt.step()
            if masks:
                with torch.no_grad():
                    for p, m in masks.items():
                        p.mul_(m)
            steps += 1
            if max_steps is not None and steps >= max_steps:
                stopped_by = "steps"
                break
            if time.perf_counter() - t0 >= seconds:
                stopped_by = "time"
                break
        else:
            epochs += 1
            if max_epochs is not None and epochs >= max_epochs:
                stopped_by = "epochs"
    module.eval()
    return epochs, steps, stopped_by, time.perf_counter() - t0


def fine_tune(module: Any, data: Dataset, *, seconds: float = 3.0, max_steps: int = 300,
              batch_size: int = 32, lr: float = 5e-4, seed: int = 0,
              threads: int | None = 1) -> dict[str, Any]:
    """Recover a compressed model's accuracy on ``data``'s training split, in place.

    Pruned weights stay zero: every weight tensor's zero pattern at the start is a mask that
    is applied again after each step (so magnitude and 2:4 sparsity survive; channel pruning
    has already removed its channels). Stops at ``max_steps`` or ``seconds``, whichever comes
    first; returns what it did (steps, seconds, test accuracy before and after)."""
    import torch

    if data.x_train is None or len(data.x_train) == 0:
        raise UserError("fine-tuning needs a training split with samples")
    previous_threads = torch.get_num_threads()
    if threads:
        torch.set_num_threads(int(threads))
    try:
        before = evaluate(torch_run_fn(module.eval()), data)
        masks = {p: (p != 0) for p in module.parameters() if p.dim() >= 2 and bool((p == 0).any())}
        _, steps, _, elapsed = _fit(module, data, seed=seed, batch_size=batch_size, lr=lr,
                                    seconds=seconds, max_steps=max_steps, masks=masks)
        after = evaluate(torch_run_fn(module), data)
        return {"steps": steps, "seconds": elapsed, "accuracy_before": before,
                "accuracy_after": after, "masked_tensors": len(masks)}
    finally:
        torch.set_num_threads(previous_threads)


__all__ = ["Acceptance", "Dataset", "TrainedModel", "accept", "agreement_with_reference",
           "encode_digits", "evaluate", "fine_tune", "load_digits_dataset", "load_npz_dataset",
           "predict", "torch_run_fn", "train_builtin"]
