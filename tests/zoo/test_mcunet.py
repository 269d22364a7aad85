"""The MCUNet zoo networks against the model zoo's published MACs and parameter counts."""

import pytest
import torch

from edgeprof.core.models import resolve_model
from edgeprof.profilers.estimate.torch_graph import walk_torch
from edgeprof.zoo import MCUNET_NAMES, mcunet


def test_names_match_the_module():
    assert set(MCUNET_NAMES) == set(mcunet.NAMES)


@pytest.mark.parametrize("name", MCUNET_NAMES)
def test_counts_match_the_published_ones(name):
    module, shapes = getattr(mcunet, name)()
    walk = walk_torch(module, [torch.randn(*s) for s in shapes])
    macs = sum(r.macs for r in walk.layers)
    params = sum(p.numel() for p in module.parameters())
    ref_macs, ref_params = mcunet.PUBLISHED[name]
    # the zoo publishes MACs to 3 significant figures and parameters to 2 (e.g. 0.75M)
    assert macs == pytest.approx(ref_macs, rel=0.01)
    assert params == pytest.approx(ref_params, rel=0.01)


def test_builtin_spec_resolves():
    handle = resolve_model("builtin:mcunet_in2")
    assert [tuple(s.shape) for s in handle.input_specs] == [(1, 3, 160, 160)]
