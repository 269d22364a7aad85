"""Threads in the board predictor: which thread count a published row or a prediction is
for, and how a runtime family's kernels scale with it.

A prediction is for a configuration, and the thread count is part of it. The shipped
calibrations are fitted to rows at the thread counts their sources state (or, where a
source states none, the runtime's own default: TFLite runs one thread unless told
otherwise); a prediction for another count goes through Amdahl's law on the kernels'
work::

    speedup(t) = 1 / (serial + (1 - serial) / t)        work(t) = work(P) x speedup(P) / speedup(t)

with ``P`` the board's big cores (the descriptor's peaks are for all of them) and
``serial`` the family's serial share: fitted where a board's rows of that family ran at
two thread counts or more, else the prior in ``data/runtimes.toml`` (with its source).
Per-inference and per-layer overheads (dispatch, the call) do not scale. A GPU runtime
ignores host threads.
"""

from __future__ import annotations

import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

RUNTIMES_FILE = Path(__file__).parent / "data" / "runtimes.toml"


@lru_cache(maxsize=1)
def runtimes_table() -> dict[str, dict[str, Any]]:
    return tomllib.loads(RUNTIMES_FILE.read_text(encoding="utf-8"))


def known_families() -> list[str]:
    """The runtime families the published rows name (edgeprof backends and others)."""
    return sorted(k for k in runtimes_table() if k != "default")


def family_info(family: str) -> dict[str, Any]:
    """The runtime family's entry of ``data/runtimes.toml`` ([default] filled in)."""
    t = runtimes_table()
    out = dict(t["default"])
    out.update(t.get(family, {}))
    return out


def is_gpu_family(family: str) -> bool:
    return family_info(family)["default_threads"] == "gpu"


def big_cores(target) -> int:
    """All of the board's big cores (what a prediction is for unless told otherwise)."""
    n = getattr(target, "big_cores", None)
    if n:
        return int(n)
    cores = getattr(target, "cores", None)
    return int(getattr(cores, "value", cores) or 1)


def default_threads(family: str, target) -> tuple[int | None, str]:
    """(threads, why) a runtime runs on ``target`` when none is set; None for a GPU."""
    info = family_info(family)
    d = info["default_threads"]
    if d == "gpu":
        return None, info["default_threads_source"]
    if d == "cores":
        return big_cores(target), info["default_threads_source"]
    return int(d), info["default_threads_source"]


_NUM = re.compile(r"(\d+)")


def parse_threads(text: str | None, family: str, target) -> tuple[int | None, str]:
    """The thread count of a published row's ``threads`` cell: a number where the source
    states one ('4', 'multi-threaded (4 cores)', 'default (4)', '1 (single core)'), the
    runtime's default where it does not ('not stated', 'default'), None on a GPU."""
    s = (text or "").strip().lower()
    if is_gpu_family(family) or s.startswith("n/a"):
        return None, "GPU: threads do not apply"
    if s.startswith("not stated") or not s:
        t, why = default_threads(family, target)
        return t, f"not stated: the runtime's default ({why})"
    m = _NUM.search(s)
    if s.startswith("default") and not m:
        t, why = default_threads(family, target)
        return t, f"the runtime's default ({why})"
    if m:
        return int(m.group(1)), "as published"
    t, why = default_threads(family, target)
    return t, f"unreadable ({text!r}): the runtime's default ({why})"


def speedup(threads: int, serial: float) -> float:
    return 1.0 / (serial + (1.0 - serial) / max(int(threads), 1))


def work_scale(threads: int | None, target, serial: float) -> float:
    """Factor on the kernels' work (at the descriptor's all-big-core peak) for ``threads``:
    1 at the board's big cores, larger below; 1 on a GPU (``threads`` None)."""
    if threads is None:
        return 1.0
    p = big_cores(target)
    t = max(1, int(threads))
    return speedup(p, serial) / speedup(min(t, p), serial)
