"""Compression methods applied for real on copies of the built-in models."""

from __future__ import annotations

import pytest

import torch

from edgeprof.core.errors import UnknownNameError, UnsupportedError, UserError  # noqa: E402
from edgeprof.optimize.compression import (compress, count_macs, count_parameters,  # noqa: E402
                                            is_n_m_sparse, n_m_mask, prune_channels,
                                            prune_magnitude, prune_n_m, to_channels_last)
from edgeprof.zoo import models as zoo  # noqa: E402


def build(factory):
    module, shapes = factory()
    torch.manual_seed(1)
    return module, torch.randn(*[2, *shapes[0][1:]])


def same_state(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_magnitude_pruning_zeroes_weights_on_a_copy():
    model, x = build(zoo.small_cnn)
    ref = {k: v.clone() for k, v in model.state_dict().items()}
    pruned, rec = prune_magnitude(model, 0.6)
    assert all(torch.equal(ref[k], v) for k, v in model.state_dict().items())  # not in place
    assert rec.sparsity == pytest.approx(0.6, abs=0.01)
    assert rec.parameters_after == rec.parameters_before
    assert rec.nonzero_after < 0.45 * rec.nonzero_before
    assert not any("weight_orig" in k or "weight_mask" in k for k in pruned.state_dict())
    assert pruned(x).shape == model(x).shape
    d = rec.to_dict()
    assert d["method"] == "magnitude" and d["sparsity"] == pytest.approx(rec.sparsity)


def test_magnitude_pruning_per_layer_scope():
    model, _ = build(zoo.mlp)
    pruned, rec = prune_magnitude(model, 0.5, scope="layer")
    for layer in rec.layers:
        assert layer["sparsity"] == pytest.approx(0.5, abs=0.01)


@pytest.mark.parametrize("bad", [1.0, -0.1, "half", True])
def test_bad_ratio_is_a_user_error(bad):
    model, x = build(zoo.small_cnn)
    with pytest.raises(UserError):
        prune_magnitude(model, bad)
    with pytest.raises(UserError):
        prune_channels(model, x, bad)


def test_channel_pruning_shrinks_small_cnn_layers():
    model, x = build(zoo.small_cnn)
    pruned, rec = prune_channels(model, x, 0.5, measure_macs=False)
    assert pruned.conv1.out_channels == 8 and pruned.conv2.in_channels == 8
    assert pruned.conv2.out_channels == 16 and pruned.classifier.in_features == 16 * 7 * 7
    assert model.conv1.out_channels == 16  # the original is untouched
    assert pruned(x).shape == (2, 10)
    assert rec.parameters_after < 0.5 * rec.parameters_before
    assert count_parameters(pruned)[0] == rec.parameters_after


def test_channel_pruning_keeps_the_kept_channels_exactly():
    """Pruning with ratio 0 changes nothing; the kept channels' outputs are preserved."""
    model, x = build(zoo.small_cnn)
    same, rec = prune_channels(model, x, 0.0, measure_macs=False)
    assert same_state(same, model) and rec.layers == []
    pruned, rec = prune_channels(model, x, 0.5, measure_macs=False)
    with torch.no_grad():
        full = model.conv1(x)
        kept = pruned.conv1(x)
    # every kept feature map equals one of the original ones
    for c in range(kept.shape[1]):
        assert any(torch.allclose(kept[:, c], full[:, o]) for o in range(full.shape[1]))


def test_channel_pruning_small_resnet_keeps_residuals_consistent():
    model, x = build(zoo.small_resnet)
    pruned, rec = prune_channels(model, x, 0.5)
    assert pruned(x).shape == (2, 10)
    # block-internal channels shrink, the residual stream keeps its width
    blk = pruned.layer2[0]
    assert blk.conv1.out_channels == 16 and blk.bn1.num_features == 16
    assert blk.conv2.in_channels == 16 and blk.conv2.out_channels == 32
    assert pruned.stem[0].out_channels == 16 and pruned.fc.in_features == 64
    assert {layer["producer"] for layer in rec.layers} == {
        f"layer{s}.{b}.conv1" for s in (1, 2, 3) for b in (0, 1)}
    assert rec.parameters_after < rec.parameters_before
    macs_before, macs_after = count_macs(model, x), count_macs(pruned, x)
    assert macs_after < 0.7 * macs_before
    assert (rec.macs_before, rec.macs_after) == (macs_before, macs_after)


def test_channel_pruning_mlp_and_channel_multiple():
    model, x = build(zoo.mlp)
    pruned, rec = prune_channels(model, x, 0.7, channel_multiple=32, measure_macs=False)
    hidden = [m.out_features for m in pruned.net if isinstance(m, torch.nn.Linear)][:2]
    assert all(h % 32 == 0 and h < 256 for h in hidden)
    assert pruned(x).shape == (2, 10)


def test_channel_pruning_needs_a_traceable_model_with_chains():
    model, _ = zoo.tiny_transformer()
    with pytest.raises(UnsupportedError):
        prune_channels(model, torch.randint(0, 100, (1, 32)), 0.5, measure_macs=False)


def test_two_four_sparsity_pattern():
    model, x = build(zoo.small_resnet)
    pruned, rec = prune_n_m(model)
    assert rec.sparsity == pytest.approx(0.5)
    assert any("stem.0" in n for n in rec.notes)  # 3 input channels: skipped, said so
    mods = dict(pruned.named_modules())
    for layer in rec.layers:
        w = mods[layer["layer"]].weight
        assert is_n_m_sparse(w, 2, 4)
    assert not is_n_m_sparse(model.layer1[0].conv1.weight, 2, 4)
    assert pruned(x).shape == (2, 10)


def test_n_m_mask_keeps_the_largest_in_each_group():
    w = torch.tensor([[1.0, -5.0, 0.5, 3.0, 2.0, 0.1, -0.2, 4.0]])
    mask = n_m_mask(w, 2, 4)
    assert mask.tolist() == [[False, True, False, True, True, False, False, True]]


def test_channels_last_layout():
    model, x = build(zoo.small_resnet)
    cl, rec = to_channels_last(model)
    assert cl.stem[0].weight.is_contiguous(memory_format=torch.channels_last)
    assert not model.stem[0].weight.is_contiguous(memory_format=torch.channels_last)
    assert all(p["channels_last"] for p in rec.layers)
    assert rec.parameters_after == rec.parameters_before
    out = cl(x.to(memory_format=torch.channels_last))
    assert torch.allclose(out, model(x), atol=1e-5)


def test_compress_dispatch_with_a_model_handle():
    from edgeprof.core.models import ModelHandle

    handle = ModelHandle(spec="builtin:small_cnn", name="small_cnn", format="torch",
                         input_specs=[__import__("edgeprof.core.models", fromlist=["InputSpec"])
                                      .InputSpec((1, 1, 28, 28))],
                         _module=zoo.small_cnn()[0])
    pruned, rec = compress(handle, "channels", ratio=0.25, measure_macs=False)
    assert pruned.conv1.out_channels == 12
    with pytest.raises(UnknownNameError):
        compress(handle, "distill")
