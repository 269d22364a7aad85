"""The torch walk's block memo (edgeprof/profilers/estimate/torch_memo.py, issue 30): a block
replayed from what the walk learnt of it gives the rows, the peak and the notes the walk
without the memo gives, and a block whose rows could differ is walked again.

Each case walks fresh instances of a model (same seed) three ways: with the memo off, with
the memo emptied first (reuse within the walk only) and again with it full (reuse across
walks too); the three walks must be equal. Where reuse must not happen, the number of
replays says so.
"""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pytest

import torch
from torch import nn
from torch.nn import functional as F

from edgeprof.profilers.estimate import torch_memo
from edgeprof.profilers.estimate.torch_graph import walk_torch

ROOT = Path(__file__).resolve().parents[3]
NB201 = ROOT / "examples" / "nb201" / "nb201.py"


def _nb201():
    spec = importlib.util.spec_from_file_location("edgeprof_test_nb201", NB201)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _walk(make, shapes, seed=0):
    torch.manual_seed(seed)
    model = make()
    torch.manual_seed(seed + 1)
    return model, walk_torch(model, [torch.randn(*s) for s in shapes])


def compare(make, *shapes):
    """Walk ``make()`` without the memo, with it emptied, and with it full; assert the three
    walks are equal and return (replays in the walk with the memo emptied, replays in the
    walk with it full, the three models after their walks)."""
    torch_memo.ENABLED[0] = False
    try:
        m_off, off = _walk(make, shapes)
    finally:
        torch_memo.ENABLED[0] = True
    torch_memo.clear()
    n0 = torch_memo.STATS["replayed"]
    m_cold, cold = _walk(make, shapes)
    n1 = torch_memo.STATS["replayed"]
    m_warm, warm = _walk(make, shapes)
    n2 = torch_memo.STATS["replayed"]
    assert cold.layers == off.layers
    assert (cold.peak_live_elements, cold.notes, cold.total_parameter_count) == \
        (off.peak_live_elements, off.notes, off.total_parameter_count)
    assert warm == off
    return n1 - n0, n2 - n1, (m_off, m_cold, m_warm)


@pytest.fixture(autouse=True)
def _memo_on():
    torch_memo.ENABLED[0] = True
    yield
    torch_memo.ENABLED[0] = True


# ---------------------------------------------------------------------- NAS-Bench-201
def _archs(n, seed):
    ops = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
    rng, out = random.Random(seed), []
    while len(out) < n:
        arch = "+".join("|" + "|".join(f"{rng.choice(ops)}~{j}" for j in range(i)) + "|"
                        for i in (1, 2, 3))
        if not arch.endswith("|none~0|none~1|none~2|"):  # (nb201.py returns None for it)
            out.append(arch)
    return out


def test_nb201_networks_equal_the_walk_without_the_memo():
    nb = _nb201()
    archs = list(nb.CELLS.values()) + _archs(12, seed=30)
    for arch in archs:
        cold, warm, _ = compare(lambda arch=arch: nb.network(arch), (1, 3, 32, 32))
        assert cold >= 12, arch  # the four cells after the first of each stage, at least
        assert warm >= 15, arch  # every cell (and the stem, the reductions, the head)


def test_nb201_cells_are_replayed_only_within_their_stage():
    """The five cells of a stage share their structure and input shape; the stages differ in
    channels, so each stage's first cell is walked (its ops may replay)."""
    nb = _nb201()
    arch = nb.CELLS["cell_10439"]
    torch_memo.clear()
    replayed: list[str] = []
    replay = torch_memo.BlockMemo._replay

    def spy(self, m, template, args, kwargs, held):
        replayed.append(self.walker.info[id(m)][0][0])
        return replay(self, m, template, args, kwargs, held)

    torch_memo.BlockMemo._replay = spy
    try:
        _walk(lambda: nb.network(arch), [(1, 3, 32, 32)])
    finally:
        torch_memo.BlockMemo._replay = replay
    cells = [n for n in replayed if n.count(".") == 1 and n.startswith("cells.")]
    assert cells == [f"cells.{i}" for i in (1, 2, 3, 4, 7, 8, 9, 10, 13, 14, 15, 16)]


# ----------------------------------------------------------------------- small models
class Block(nn.Module):
    def __init__(self, c=8, hidden=8, mode=0):
        super().__init__()
        self.conv = nn.Conv2d(c, hidden, 3, padding=1)
        self.bn = nn.BatchNorm2d(hidden)
        self.back = nn.Conv2d(hidden, c, 1)
        self.mode = mode

    def forward(self, x):
        y = F.relu(self.bn(self.conv(x)))
        if self.mode == 1:
            y = y * torch.sigmoid(y)
        return x + self.back(y)


def test_repeated_blocks_replay_and_equal():
    cold, warm, _ = compare(lambda: nn.Sequential(*[Block() for _ in range(4)]), (1, 8, 6, 6))
    assert cold == 3 and warm == 4


def test_same_structure_different_input_shapes_is_not_replayed():
    def make():
        return nn.Sequential(Block(), Block(), nn.AvgPool2d(2), Block(), nn.Flatten(),
                             nn.Linear(8 * 3 * 3, 4))
    cold, _, _ = compare(make, (1, 8, 6, 6))
    assert cold == 1  # the second block only: the third sees 3x3, not 6x6


def test_same_class_different_parameter_shapes_is_not_replayed():
    cold, _, _ = compare(lambda: nn.Sequential(Block(hidden=4), Block(hidden=6),
                                               Block(hidden=4)), (1, 8, 5, 5))
    assert cold == 1  # the third block, like the first


def test_same_modules_different_plain_attribute_is_not_replayed():
    cold, _, _ = compare(lambda: nn.Sequential(Block(mode=0), Block(mode=1), Block(mode=0),
                                               Block(mode=1)), (1, 8, 5, 5))
    assert cold == 2  # the third like the first, the fourth like the second


class Wired(nn.Module):
    """The same modules, wired by a list attribute (as a NAS cell's edge list)."""

    def __init__(self, order):
        super().__init__()
        self.ops = nn.ModuleList([nn.Conv2d(4, 4, 1), nn.AvgPool2d(3, 1, 1)])
        self.order = order

    def forward(self, x):
        feats = [x]
        for src, op in zip(self.order, self.ops):
            feats.append(op(feats[src]) if src >= 0 else op(x.mul(0.0)))
        return feats[-1] + feats[1]


def test_same_modules_different_wiring_is_not_replayed():
    cold, _, _ = compare(lambda: nn.Sequential(Wired([0, 1]), Wired([0, 0]), Wired([0, -1]),
                                               Wired([0, 1])), (1, 4, 5, 5))
    assert cold == 1  # the fourth only


def test_shared_module_and_tied_weights_turn_the_memo_off():
    def shared():
        b = Block()
        return nn.Sequential(b, Block(), b, Block())

    def tied():
        blocks = [Block() for _ in range(4)]
        blocks[2].conv.weight = blocks[0].conv.weight
        return nn.Sequential(*blocks)

    for make in (shared, tied):
        cold, warm, _ = compare(make, (1, 8, 5, 5))
        assert cold == warm == 0


class CallsTwice(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.other = Block()

    def forward(self, x):
        x = self.block(x)
        x = self.block(x)  # the same module again: its parameters are counted once
        x = self.other(x)
        return self.block(x)


def test_a_module_called_again_replays_with_its_parameters_counted_once():
    cold, _, (_, m_cold, _) = compare(CallsTwice, (1, 8, 5, 5))
    assert cold >= 1
    w = walk_torch(m_cold, [torch.randn(1, 8, 5, 5)])
    convs = [r for r in w.layers if r.name.startswith("block.conv")]
    assert [r.parameter_count for r in convs] == [8 * 8 * 9 + 8, 0, 0]


def test_hooks_turn_the_memo_off_and_run_as_often():
    calls = {"n": 0}

    def make():
        model = nn.Sequential(*[Block() for _ in range(4)])
        model[1].conv.register_forward_hook(lambda m, a, out: calls.__setitem__("n",
                                                                               calls["n"] + 1))
        return model

    cold, warm, _ = compare(make, (1, 8, 5, 5))
    assert cold == warm == 0 and calls["n"] == 3


def test_a_hook_registered_globally_by_the_user_turns_the_memo_off():
    seen = []
    handle = torch.nn.modules.module.register_module_forward_hook(
        lambda m, a, out: seen.append(type(m).__name__))
    try:
        cold, warm, _ = compare(lambda: nn.Sequential(*[Block() for _ in range(3)]),
                                (1, 8, 5, 5))
    finally:
        handle.remove()
    assert cold == warm == 0 and seen.count("Block") == 9


class Counting(nn.Module):
    """A block that changes its own state on every call (and its rows with it)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        y = self.conv(x)
        return y * 2 if self.calls % 2 else y + x


def test_a_block_that_changes_its_state_is_not_replayed():
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c = Counting(), Counting(), Counting()

        def forward(self, x):
            for _ in range(3):
                x = self.c(self.b(self.a(x)))
            return x

    cold, warm, models = compare(Twice, (1, 4, 5, 5))
    assert cold == warm == 0
    assert [(m.a.calls, m.b.calls, m.c.calls) for m in models] == [(3, 3, 3)] * 3


class Slimmable(nn.Module):
    """The parent sets a child's attribute before each call (as slimmable networks do)."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(4)])

    def forward(self, x):
        for i, b in enumerate(self.blocks):
            b.mode = i // 2
            x = b(x)
        for b in self.blocks:
            b.mode = 1 - b.mode
            x = b(x)
        return x


def test_a_parent_that_sets_a_child_attribute_before_the_call():
    cold, _, _ = compare(Slimmable, (1, 8, 5, 5))
    assert cold >= 1


OUTSIDE: list = []


class ReadsOutside(nn.Module):
    """A block that reads an activation it is not given (a global set by its parent)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1)

    def forward(self, x):
        return self.conv(x) + OUTSIDE[0]


class SetsOutside(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([ReadsOutside() for _ in range(4)])

    def forward(self, x):
        small = x.mean((2, 3), keepdim=True)
        for i, b in enumerate(self.blocks):
            OUTSIDE[:] = [small if i % 2 else x * 1.5]  # another shape, other elements
            x = b(x)
        OUTSIDE.clear()
        return x


def test_a_block_reading_a_tensor_from_outside_is_not_replayed():
    cold, warm, _ = compare(SetsOutside, (1, 4, 5, 5))
    assert cold == warm == 0


KEPT: list = []


class Keeps(nn.Module):
    """A block that leaves a tensor of its own alive (the peak follows it)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1)

    def forward(self, x):
        y = self.conv(x)
        KEPT.append(y * 3)
        return y + x


def test_a_block_that_leaves_a_tensor_alive_is_not_replayed():
    def make():
        KEPT.clear()
        return nn.Sequential(*[Keeps() for _ in range(4)])

    cold, warm, _ = compare(make, (1, 4, 5, 5))
    KEPT.clear()
    assert cold == warm == 0


class ListArgument(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1)

    def forward(self, xs):
        return self.conv(torch.cat(xs, 1)[:, :4]) + xs[0] @ xs[0].transpose(2, 3)


class PassesLists(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([ListArgument() for _ in range(3)])

    def forward(self, x):
        for b in self.blocks:
            x = b([x, x * 2])
        return x


def test_a_block_given_a_list_is_walked_with_its_functional_rows():
    cold, warm, (m_off, _, _) = compare(PassesLists, (1, 4, 5, 5))
    assert cold == warm == 0
    torch_memo.ENABLED[0] = False
    w = walk_torch(m_off, [torch.randn(1, 4, 5, 5)])
    assert {"blocks.0.cat", "blocks.0.matmul", "blocks.2.add"} <= {r.name for r in w.layers}


class Returns(nn.Module):
    """Returns its input itself (``skip``), or a tuple of fresh tensors."""

    def __init__(self, skip):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1)
        self.skip = skip

    def forward(self, x):
        if self.skip:
            return x
        y = self.conv(x)
        return y, y.relu()


class Identities(nn.Module):
    def __init__(self):
        super().__init__()
        self.skips = nn.ModuleList([Returns(True) for _ in range(3)])
        self.pairs = nn.ModuleList([Returns(False) for _ in range(3)])
        self.same: list = []

    def forward(self, x):
        for s, p in zip(self.skips, self.pairs):
            y = s(x)
            self.same.append(y is x)
            a, b = p(y)
            x = a + b
        return x


def test_blocks_returning_their_input_or_a_tuple():
    cold, warm, models = compare(Identities, (1, 4, 5, 5))
    assert cold >= 2 and warm >= 4
    assert [m.same for m in models] == [[True] * 3] * 3


class InPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(4, 4, 1)

    def forward(self, x):
        x = self.act(x)  # writes its argument
        return self.conv(x).add_(1.0)


def test_blocks_writing_in_place():
    cold, _, _ = compare(lambda: nn.Sequential(nn.Conv2d(4, 4, 1), InPlace(), InPlace(),
                                               InPlace()), (1, 4, 5, 5))
    assert cold == 2


class NeedsValues(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        y = self.lin(x)
        return y.relu() if y.sum().item() > -1e9 else y


def test_a_forward_that_reads_values_is_walked_for_real_without_the_memo():
    cold, warm, _ = compare(lambda: nn.Sequential(*[NeedsValues() for _ in range(4)]), (2, 8))
    assert cold == warm == 0


class CallsForward(nn.Module):
    """Calls a block's ``forward`` directly (no hooks: its rows are named after the caller)."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(3)])

    def forward(self, x):
        x = self.blocks[0](x)
        x = self.blocks[1](x)
        return self.blocks[2].forward(x)


def test_a_block_called_through_forward_is_not_replayed():
    cold, warm, _ = compare(CallsForward, (1, 8, 5, 5))
    assert cold == 1 and warm == 2


def test_the_stand_ins_are_removed_after_the_walk():
    model = nn.Sequential(*[Block() for _ in range(3)])
    walk_torch(model, [torch.randn(1, 8, 5, 5)])
    assert all("forward" not in m.__dict__ for m in model.modules())


def test_signature_keys_plain_attributes_and_parameter_shapes():
    torch_memo._setup(torch)
    a, b = Block(), Block()
    assert torch_memo.signature(a) == torch_memo.signature(b)
    b.mode = 1
    assert torch_memo.signature(a) != torch_memo.signature(b)
    b.mode, b.extra = 0, [1, 2]
    assert torch_memo.signature(a) != torch_memo.signature(b)
    del b.extra
    b.flag = True
    a.flag = 1  # equal in Python, not the same value
    assert torch_memo.signature(a) != torch_memo.signature(b)
    c = Block(hidden=6)
    assert torch_memo.signature(c) != torch_memo.signature(Block())
    d = Block()
    d.cache = torch.zeros(2)  # a tensor outside _parameters/_buffers: no key
    assert torch_memo.signature(d) is None


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1)

    def forward(self, a, b):
        return self.conv(a) + b * a


class Pairs(nn.Module):
    """The same block given one tensor twice, then two tensors of the same shape: the rows
    read one input, then two."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Pair() for _ in range(4)])

    def forward(self, x):
        y = x * 2
        x = self.blocks[0](x, x)
        x = self.blocks[1](x, y)
        x = self.blocks[2](x, x)
        return self.blocks[3](x, y)


def test_arguments_sharing_a_tensor_are_keyed():
    cold, _, _ = compare(Pairs, (1, 4, 5, 5))
    assert cold == 2
