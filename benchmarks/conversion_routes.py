"""Every conversion route edgeprof takes, tried on ResNet-, MobileNet-, EfficientNet- and
ViT-class graphs: success, and output agreement with the source model.

    .venv/bin/python benchmarks/conversion_routes.py [--out benchmarks/results/conversion_routes.txt]

Each model (small versions, random weights, seeded; defined here and in
benchmarks/reference_models.py) is exported to ONNX (torch.onnx, TorchScript exporter) and to
.tflite (litert-torch). From each file, every CPU backend builds its artifact through the
conversion graph (edgeprof/core/formats.py), exactly as `edgeprof profile FILE --backend all`
does; the agreement is edgeprof's own (backends/common.py): four seeded inputs of different
distributions, the worst relative max error (max |a-b| / max |reference|) and the lowest
cosine, against the source file run by its own runtime (ONNX Runtime without graph rewrites,
LiteRT without delegates). "informative" says whether the reference output really depends on
its input (it varies by >= 1% of its scale across the inputs).

A fresh cache folder is used, so every conversion runs; build time includes the agreement
check. Figures are from this machine and this run, not asserted anywhere.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BACKENDS = ("onnxruntime", "openvino", "tflite", "torch_eager")


def models():
    import torch
    from torch import nn

    from reference_models import MobileNetV2, ResNet50, ViT

    class SqueezeExcite(nn.Module):
        def __init__(self, c: int, r: int = 4):
            super().__init__()
            self.fc1, self.fc2 = nn.Conv2d(c, c // r, 1), nn.Conv2d(c // r, c, 1)

        def forward(self, x):
            s = x.mean((2, 3), keepdim=True)
            return x * torch.sigmoid(self.fc2(nn.functional.silu(self.fc1(s))))

    class MBConv(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, expand: int = 4, k: int = 3):
            super().__init__()
            mid = cin * expand
            self.body = nn.Sequential(
                nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.SiLU(),
                nn.Conv2d(mid, mid, k, stride, k // 2, groups=mid, bias=False),
                nn.BatchNorm2d(mid), nn.SiLU(), SqueezeExcite(mid),
                nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.skip = stride == 1 and cin == cout

        def forward(self, x):
            y = self.body(x)
            return x + y if self.skip else y

    class EfficientNetSmall(nn.Module):
        """EfficientNet-B0's pattern (Tan & Le 2019): MBConv + squeeze-excite + SiLU."""

        def __init__(self, num_classes: int = 10):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False),
                                      nn.BatchNorm2d(16), nn.SiLU())
            self.blocks = nn.Sequential(MBConv(16, 16, 1), MBConv(16, 24, 2),
                                        MBConv(24, 24, 1, k=5), MBConv(24, 40, 2, k=5))
            self.head = nn.Linear(40, num_classes)

        def forward(self, x):
            return self.head(self.blocks(self.stem(x)).mean((2, 3)))

    def seeded(make):
        torch.manual_seed(0)
        m = make().eval()
        # random BN statistics, so outputs depend on the input as a trained net's do
        g = torch.Generator().manual_seed(1)
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.normal_(0, 0.1, generator=g)
                mod.running_var.uniform_(0.5, 2.0, generator=g)
        return m

    shape = [[1, 3, 64, 64]]
    return {
        "resnet (ResNet-50 blocks [1,1,1,1])": (seeded(lambda: ResNet50(10, (1, 1, 1, 1))),
                                                shape),
        "mobilenet (MobileNetV2 x0.5)": (seeded(lambda: MobileNetV2(10, 0.5)), shape),
        "efficientnet (MBConv+SE, B0 pattern)": (seeded(EfficientNetSmall), shape),
        "vit (ViT, 2 layers, dim 96)": (seeded(lambda: ViT(64, 16, 96, 2, 3, 192, 10)), shape),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    os.environ["EDGEPROF_CACHE_DIR"] = tempfile.mkdtemp(prefix="edgeprof-routes-")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    warnings.simplefilter("ignore")
    import logging

    logging.disable(logging.WARNING)

    from edgeprof.backends.common import torch_source
    from edgeprof.backends.onnx_export import export_onnx
    from edgeprof.backends.tflite_convert import convert
    from edgeprof.core.models import resolve_model
    from edgeprof.core.plugins import get_registry

    reg = get_registry()
    rows = []
    work = Path(tempfile.mkdtemp(prefix="edgeprof-routes-files-"))
    for label, (module, shapes) in models().items():
        torch_handle = resolve_model(module, input_shapes=shapes, registry=reg)
        stem = label.split()[0]
        files = {}
        try:
            files["onnx"] = work / f"{stem}.onnx"
            files["onnx"].write_bytes(export_onnx(torch_handle).path.read_bytes())
        except Exception as e:  # noqa: BLE001
            rows.append((label, "torch", "(export to onnx)", "FAIL", None, None, None, 0.0,
                         f"{type(e).__name__}: {str(e)[:80]}"))
        try:
            files["tflite"] = work / f"{stem}.tflite"
            files["tflite"].write_bytes(convert(torch_handle, "fp32").path.read_bytes())
        except Exception as e:  # noqa: BLE001
            rows.append((label, "torch", "(convert to tflite)", "FAIL", None, None, None, 0.0,
                         f"{type(e).__name__}: {str(e)[:80]}"))
        for fmt, path in files.items():
            handle = resolve_model(str(path), registry=reg)
            for name in BACKENDS:
                backend = reg.backend(name)()
                t0 = time.perf_counter()
                try:
                    route = backend.route(fmt, "fp32").text()
                    if name == "torch_eager":  # the torch backends convert in prepare
                        art = torch_source(backend, handle, "fp32")[1]
                    else:
                        art = backend.build(handle, "fp32")
                    a = art.manifest.agreement or {}
                    rows.append((label, fmt, route, "ok", a.get("relative_error"),
                                 a.get("cosine_similarity"), a.get("informative"),
                                 time.perf_counter() - t0, a.get("reason") or ""))
                except Exception as e:  # noqa: BLE001
                    rows.append((label, fmt, f"-> {name}", "FAIL", None, None, None,
                                 time.perf_counter() - t0,
                                 f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"))
            print(f"done: {label} from {fmt}", file=sys.stderr)

    def fmt_num(v, spec):
        return "-" if v is None else format(v, spec)

    lines = ["# benchmarks/conversion_routes.py: fp32, 4 varied inputs, worst case per route",
             f"# {len(rows)} routes; python {sys.version.split()[0]}", "",
             f"{'model':<38} {'from':<6} {'route':<78} {'ok':<4} {'rel.err':>9} "
             f"{'cosine':>9} {'inform.':>7} {'build s':>7}  note"]
    for label, src, route, ok, rel, cos, inf, secs, note in rows:
        lines.append(f"{label:<38} {src:<6} {route:<78} {ok:<4} {fmt_num(rel, '.2e'):>9} "
                     f"{fmt_num(cos, '.6f'):>9} {str(inf if inf is not None else '-'):>7} "
                     f"{secs:7.1f}  {note}")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
