"""Time resolving a ``.gguf`` model file: its header alone (``core.gguf``, what
``resolve_llm`` reads) against the ``gguf`` package's ``GGUFReader`` (what it read before),
side by side in one run, on SmolLM2-135M (49,152-token vocabulary) in q4_0, built here with
random weights.

    .venv/bin/python benchmarks/gguf_resolve.py [--rounds 3] [--write]

Rows: median and range over ``--rounds`` of ``resolve_llm(path)`` and of reading the same
metadata and tensor table with ``GGUFReader``. ``--write`` saves the table to
benchmarks/results/gguf_resolve.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("EDGEPROF_CACHE_DIR", tempfile.mkdtemp(prefix="edgeprof-gguf-"))
    from gguf import GGUFReader

    from edgeprof.core.plugins import get_registry
    from edgeprof.zoo.llm import resolve_llm

    backend = get_registry().backends_for("generate")["llama_cpp"].cls()
    path = backend.build_llm(resolve_llm("llm:smollm2-135m"), "q4_0", None).entry_path

    def old() -> None:
        reader = GGUFReader(str(path), "r")
        {name: f.contents() for name, f in reader.fields.items()}
        {t.name: t for t in reader.tensors}

    rows = [("resolve_llm: the header alone (core.gguf)",
             timeit.repeat(lambda: resolve_llm(str(path)), number=1, repeat=args.rounds)),
            ("gguf.GGUFReader: fields and tensor table",
             timeit.repeat(old, number=1, repeat=args.rounds))]
    new_med = statistics.median(rows[0][1])
    lines = [f"`.venv/bin/python benchmarks/gguf_resolve.py --rounds {args.rounds}` "
             f"({platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
             f"{path.stat().st_size / 1e6:.0f} MB file)", "",
             "| read | rounds | median ms | range ms | vs the header |", "|---|---:|---:|---:|---:|"]
    for name, ts in rows:
        med = statistics.median(ts)
        lines.append(f"| {name} | {len(ts)} | {med * 1e3:.1f} | {min(ts) * 1e3:.1f}-"
                     f"{max(ts) * 1e3:.1f} | {med / new_med:.0f}x |")
    text = "\n".join(lines)
    print(text)
    if args.write:
        (ROOT / "benchmarks" / "results" / "gguf_resolve.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
