"""Predict, then measure: the host calibrations of onnxruntime, openvino and tflite against a
zoo of architectures defined in the project.

    .venv/bin/python benchmarks/predict_host.py [--backends onnxruntime,openvino,tflite]
        [--kernels default|tiny] [--models N] [--runs 20] [--max-time 3] [--cold] [--write]

Per backend at fp32: calibrate here (``calibrate_host``: the kernel set measured with the
harness, fitted, leave-one-out cross-validated; timed), then for every zoo model PREDICT its
host latency from that calibration (``predict_with``: nothing of the model is measured yet),
then MEASURE it with ``edgeprof.api.benchmark`` (short runs; measured again, up to twice,
when the harness saw other processes keep the cores busy, keeping the quietest -- the same
rule ``calibrate`` applies to its kernels). The zoo leaves out the whole
models the calibration measures (small_cnn, mlp, small_resnet, small_mobilenet and the
MLPerf Tiny CNNs): every prediction below is out of sample. Image models run at reduced
input sizes (noted) so the whole run fits on 2 cores; vgg16 and yolov3 (250-550 MB of fp32
weights each) are left out to keep it short.

Prints per backend: calibration time and samples, its leave-one-out error, then on the zoo
% within +-10 % / +-25 %, median |error| and Spearman's rho; then the per-model table, and
the load average before and after, and per model the cores other processes kept busy
while it was measured (this machine is shared: the load moves the measured side, never the
prediction; "quiet only" repeats the figures for the measurements the load spared).
``--write`` saves the output to benchmarks/results/predict_host.txt (with ``--cold``:
predict_host_cold.txt). The calibrations are written to a temporary folder, not to the
user's.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: (label, builtin model, input shapes or None for the model's own)
ZOO: list[tuple[str, str, list | None]] = [
    ("resnet18@112", "resnet18", [[1, 3, 112, 112]]),
    ("resnet50@112", "resnet50", [[1, 3, 112, 112]]),
    ("resnet50_vd@112", "resnet50_vd", [[1, 3, 112, 112]]),
    ("alexnet", "alexnet", None),
    ("squeezenet1_1@112", "squeezenet1_1", [[1, 3, 112, 112]]),
    ("densenet121@112", "densenet121", [[1, 3, 112, 112]]),
    ("shufflenet_v2@112", "shufflenet_v2", [[1, 3, 112, 112]]),
    ("mobilenet_v1@112", "mobilenet_v1", [[1, 3, 112, 112]]),
    ("mobilenet_v1_025_160", "mobilenet_v1_025_160", None),
    ("mobilenet_v2@112", "mobilenet_v2", [[1, 3, 112, 112]]),
    ("mobilenet_v3_small@112", "mobilenet_v3_small", [[1, 3, 112, 112]]),
    ("ssd_mobilenet_v2@192", "ssd_mobilenet_v2", [[1, 3, 192, 192]]),
    ("yolov4_tiny@160", "yolov4_tiny", [[1, 3, 160, 160]]),
    ("yolov8n@160", "yolov8n", [[1, 3, 160, 160]]),
    ("vit_tiny_112", "vit_tiny_112", None),
    ("tiny_transformer", "tiny_transformer", None),
    ("wide_mlp", "wide_mlp", None),
    ("tiny_fc_autoencoder", "tiny_fc_autoencoder", None),
    ("lstm", "lstm", None),
    ("gru", "gru", None),
]
KINDS = {"resnet18": "CNN", "resnet50": "CNN", "resnet50_vd": "CNN", "alexnet": "CNN",
         "squeezenet1_1": "CNN", "densenet121": "CNN", "shufflenet_v2": "mobile",
         "mobilenet_v1": "mobile", "mobilenet_v1_025_160": "mobile", "mobilenet_v2": "mobile",
         "mobilenet_v3_small": "mobile", "ssd_mobilenet_v2": "detector",
         "yolov4_tiny": "detector", "yolov8n": "detector", "vit_tiny_112": "ViT",
         "tiny_transformer": "transformer", "wide_mlp": "MLP", "tiny_fc_autoencoder": "MLP",
         "lstm": "RNN", "gru": "RNN"}


#: a measurement is "quiet" when other processes kept fewer cores than this busy during it
#: (the harness's own reading, ``config.harness.other_processes_cores``)
from edgeprof.profilers.predict.host import QUIET_CORES  # noqa: E402


def load() -> str:
    try:
        return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "load average unavailable"


def summary(errors: list[float], measured: list[float], predicted: list[float]) -> dict:
    import numpy as np
    from scipy.stats import spearmanr

    e = np.abs(np.asarray(errors))
    rho = float(spearmanr(measured, predicted).statistic) if len(e) > 2 else float("nan")
    return {"n": len(e), "within_10": float(np.mean(e <= 0.10)) if len(e) else math.nan,
            "within_25": float(np.mean(e <= 0.25)) if len(e) else math.nan,
            "median": float(np.median(e)) if len(e) else math.nan, "rho": rho}


def run_backend(backend: str, zoo, args, say) -> dict:
    from edgeprof import api
    from edgeprof.core.backend import RunConfig
    from edgeprof.core.models import resolve_model
    from edgeprof.core.plugins import get_registry
    from edgeprof.profilers.estimate.analytic import estimate_model
    from edgeprof.profilers.predict.host import _quietest, busy_cores, calibrate_host
    from edgeprof.profilers.predict.predictor import predict_with
    from edgeprof.targets import get_target

    reg = get_registry()
    host = get_target("host")
    t0 = time.perf_counter()
    cal, _ = calibrate_host(backend, "fp32", kernels=args.kernels, runs=args.runs,
                            max_time_s=args.max_time, save=False, registry=reg,
                            progress=lambda m: say(f"  [{time.perf_counter() - t0:5.0f} s] {m}"))
    cal_s = time.perf_counter() - t0
    say(f"{backend}: calibrated in {cal_s:.0f} s ({len(cal.samples)} samples)")
    rows = []
    for label, name, shapes in zoo:
        handle = resolve_model(f"builtin:{name}", input_shapes=shapes, registry=reg)
        est = estimate_model(handle, host, "fp32")
        pred = predict_with(cal, est, host, backend, "fp32")  # before any measurement
        config = RunConfig(precision="fp32", runs=args.runs, min_time_s=0.05,
                           max_time_s=args.max_time)
        # measured again (up to twice) when other processes kept the cores busy during it,
        # keeping the quietest: the same rule as the calibration's kernels
        res = _quietest(lambda: api.benchmark(handle, backend, "fp32", config=config))
        row = {"model": label, "kind": KINDS.get(name, "?"), "macs": est.total_macs,
               "predicted_ms": pred.value_ms, "low_ms": pred.low_ms, "high_ms": pred.high_ms,
               "extrapolated": len(pred.extrapolated_layers), "status": res.status,
               "measured_ms": res.stats.median_ms if res.ok else None,
               "reason": "" if res.ok else (res.reason or "")[:80],
               "busy": busy_cores(res)}
        if res.ok:
            row["error"] = (pred.value_ms - row["measured_ms"]) / row["measured_ms"]
        rows.append(row)
        say(f"  {backend} {label}: predicted {pred.value_ms:.3g} ms, "
            + (f"measured {row['measured_ms']:.3g} ms ({100 * row['error']:+.0f} %)"
               if res.ok else f"{res.status}: {row['reason']}"))
    ok = [r for r in rows if r["status"] == "ok"]
    s = summary([r["error"] for r in ok], [r["measured_ms"] for r in ok],
                [r["predicted_ms"] for r in ok])
    quiet = [r for r in ok if r["busy"] is not None and r["busy"] < QUIET_CORES]
    q = summary([r["error"] for r in quiet], [r["measured_ms"] for r in quiet],
                [r["predicted_ms"] for r in quiet])
    return {"backend": backend, "cal": cal, "cal_s": cal_s, "rows": rows, "summary": s,
            "quiet": q}


def pct(x: float) -> str:
    return "-" if x != x else f"{100 * x:.0f} %"


def table(results: list[dict], args, load_before: str, load_after: str) -> str:
    lines = [f"host {platform_line()}; kernel set '{args.kernels}', runs>={args.runs}, "
             f"max-time {args.max_time} s; {load_before} (start), {load_after} (end)",
             "calibration times: " + ("cold (an empty edgeprof cache: every kernel converted "
                                      "afresh)" if args.cold else "with edgeprof's conversion "
                                      "cache as it was (--cold: from an empty one)"), "",
             "backend      calibration  samples  LOO med|err|  LOO +-10%  | zoo  ok  "
             "within +-10%  within +-25%  median |err|  Spearman",
             "-" * 118]
    for r in results:
        cv, s = r["cal"].cv, r["summary"]
        rho = "-" if s["rho"] != s["rho"] else f"{s['rho']:.2f}"
        lines.append(f"{r['backend']:12s} {r['cal_s']:9.0f} s {len(r['cal'].samples):8d} "
                     f"{pct(cv['median_abs_error']):>13s} {pct(cv['within_10']):>10s}  | "
                     f"{len(r['rows']):3d} {s['n']:3d} {pct(s['within_10']):>13s} "
                     f"{pct(s['within_25']):>13s} {pct(s['median']):>13s} {rho:>9s}")
        q = r["quiet"]
        qrho = "-" if q["rho"] != q["rho"] else f"{q['rho']:.2f}"
        lines.append(f"{'  quiet only':38s}{'':13s}  | {'':3s} {q['n']:3d} "
                     f"{pct(q['within_10']):>13s} {pct(q['within_25']):>13s} "
                     f"{pct(q['median']):>13s} {qrho:>9s}")
    lines += ["", "fit per backend (work basis: per-inference ms, per-layer ms, ms per "
              "spilled MB; per class ms/GMAC and ms/MB):"]
    for r in results:
        p = r["cal"].parameters
        th = ", ".join(f"{k} {p['ms_per_gmac'][k]:.3g}/{p['ms_per_mb'][k]:.3g}"
                       for k in p.get("ms_per_gmac", {}))
        lines.append(f"  {r['backend']}: {p['per_inference_ms']:.3g}, {p['per_layer_ms']:.3g}, "
                     f"{p.get('ms_per_spilled_mb', 0):.3g}; {th}")
    lines.append(f"'quiet only': the models whose measurement saw other processes keep < "
                 f"{QUIET_CORES} cores busy (the harness's reading)")
    lines += ["", "model                   kind         GMACs  backend      predicted ms "
              "(90 % interval)      measured ms   error  busy cores"]
    for r in results:
        for row in r["rows"]:
            interval = f"({row['low_ms']:.3g}-{row['high_ms']:.3g})"
            busy = "-" if row["busy"] is None else f"{row['busy']:.2f}"
            meas = (f"{row['measured_ms']:11.3g}   {100 * row['error']:+5.0f} %  {busy:>6s}"
                    if row["status"] == "ok" else f"{row['status']}: {row['reason']}")
            ext = " *" if row["extrapolated"] else ""
            lines.append(f"{row['model']:23s} {row['kind']:11s} {row['macs'] / 1e9:6.3f}  "
                         f"{r['backend']:12s} {row['predicted_ms']:10.3g} {interval:19s}"
                         f"{meas}{ext}")
    lines.append("* the prediction names layers outside the calibration's kernel range "
                 "(extrapolated, interval widened)")
    return "\n".join(lines)


def platform_line() -> str:
    import platform

    from edgeprof.targets import get_target

    host = get_target("host")
    return f"{host.processor} ({int(host.cores.value)} cores, {platform.machine()})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="onnxruntime,openvino,tflite")
    ap.add_argument("--kernels", default="default", help="kernel set: default or tiny")
    ap.add_argument("--models", type=int, default=len(ZOO), help="first N zoo models")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--max-time", type=float, default=3.0,
                    help="seconds per measurement at most (below ~2 s big models stop "
                         "before their warm-up settles)")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--dump", metavar="FILE.json",
                    help="also save the calibrations and the per-model rows as JSON")
    ap.add_argument("--cold", action="store_true",
                    help="start from an empty edgeprof cache (every conversion redone, the "
                         "host roofline measured again): the calibration times a first run has")
    args = ap.parse_args()
    import atexit
    import shutil

    scratch = tempfile.mkdtemp(prefix="edgeprof-predict-host-")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    os.environ["EDGEPROF_CALIBRATIONS_DIR"] = os.path.join(scratch, "calibrations")
    if args.cold:
        os.environ["EDGEPROF_CACHE_DIR"] = os.path.join(scratch, "cache")

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    before = load()
    results = [run_backend(b.strip(), ZOO[:args.models], args, say)
               for b in args.backends.split(",") if b.strip()]
    text = table(results, args, before, load())
    print(text)
    if args.dump:
        import json

        Path(args.dump).write_text(json.dumps(
            [{"backend": r["backend"], "cal_s": r["cal_s"], "calibration": r["cal"].to_dict(),
              "rows": r["rows"], "summary": r["summary"], "quiet": r["quiet"]}
             for r in results], default=str))
    if args.write:
        out = Path(__file__).parent / "results" / ("predict_host_cold.txt" if args.cold
                                                   else "predict_host.txt")
        cmd = " ".join(["$ .venv/bin/python benchmarks/predict_host.py"] + sys.argv[1:])
        out.write_text(cmd + "\n" + text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
