"""The one parser (:func:`build_parser`): every subcommand with its flags, each bound to its
command function (``cli/commands.py``; the fleet's in ``cli/fleet.py``). profile, estimate,
predict, recommend and optimize take a tensor model or a generative one: each kind's own
flags are a group of the command (a generative model's are added by ``cli/llm.py``)."""

from __future__ import annotations

import argparse

from edgeprof._version import __version__
from edgeprof.cli import llm
from edgeprof.cli.commands import (cmd_backends, cmd_batch, cmd_calibrate, cmd_compare,
                                   cmd_estimate, cmd_optimize, cmd_plugins, cmd_predict,
                                   cmd_profile, cmd_recommend, cmd_targets)
from edgeprof.cli.common import (Parser, add_isolation_flags, batch_list, device, dtype, for_kinds,
                                 html_file, key_value, kind_groups, names, non_negative_int,
                                 out_file, positive_float, positive_int, shape)
from edgeprof.cli.fleet import add_fleet_flag, add_parsers as add_fleet_parsers


# ----------------------------------------------------------------------------- parser
def _common_parser() -> argparse.ArgumentParser:
    """The flags every command takes."""
    common = Parser(add_help=False)
    common.add_argument("--plugins", metavar="FILE",
                        help="a plugins.toml of your own (also $EDGEPROF_PLUGINS)")
    common.add_argument("--targets-dir", metavar="DIR",
                        help="a folder of your own target descriptors, searched first "
                             "(also $EDGEPROF_TARGETS_DIR)")
    common.add_argument("--json", action="store_true",
                        help="print JSON to stdout (a generative model's: its payload)")
    common.add_argument("--debug", action="store_true",
                        help="show tracebacks, and the runtimes' own log output (TensorFlow, "
                             "absl, ONNX Runtime, torch warnings, llama.cpp), which is "
                             "silenced otherwise")
    return common


def _timing_args(sp, per: str) -> None:
    """The timing flags of tensor runs, the same in profile and batch (optimize has its own
    defaults); ``sp`` a parser or profile's tensor group. profile's --warmup is its own: it
    counts for both kinds of model."""
    sp.add_argument("--runs", type=positive_int,
                    help=f"minimum timed runs per {per} (default 100)")
    sp.add_argument("--min-time", type=positive_float, metavar="S",
                    help=f"minimum timed seconds per {per} (default 1; lowered to "
                         "--max-time when only that is given)")
    sp.add_argument("--max-time", type=positive_float, metavar="S",
                    help=f"cap on timed seconds per {per} (default 10)")


_MODEL_HELP = ("builtin:NAME, package.module:factory, file.py:factory, or a model file (.onnx, "
               ".tflite, .xml, .keras)")


def _model_args(sp, tensor=None, *, layers: bool = False) -> None:
    """The model and the tensor model's input flags. ``tensor``: the tensor group of a
    command that takes either kind of model (its --target is then added by the command);
    ``layers``: the command prints the layer table (--max-layers)."""
    if tensor is None:
        sp.add_argument("model", help=_MODEL_HELP)
        sp.add_argument("--target", "-t", default="host", help="target id (default: host)")
    else:
        sp.add_argument("model", help=f"{_MODEL_HELP}; or a generative model: llm:NAME (a "
                                      "built-in architecture with random weights), a .gguf "
                                      "file or a Hugging Face model folder. Each group of "
                                      "flags below applies to its kind of model only")
    g = tensor or sp
    g.add_argument("--batch-size", type=positive_int,
                   help="sets the first dimension of every input")
    g.add_argument("--input-shape", type=shape, action="append", metavar="SHAPE",
                   help="input shape with the batch dimension, e.g. 1x3x224x224 "
                        "(repeat for several inputs)")
    g.add_argument("--input-dtype", type=dtype, action="append", metavar="DTYPE",
                   help="input dtype, e.g. float32 or int64 (repeat per input)")
    if layers:
        g.add_argument("--max-layers", type=positive_int, default=40,
                       help="layers shown in the terminal table (all are in the CSV; default "
                            "40)")


def _target_arg(sp, generative: str) -> None:
    """--target of a command that takes either kind: host by default for a tensor model."""
    for_kinds(sp.add_argument("--target", "-t",
                              help=f"target id (tensor models: default host; generative "
                                   f"models: {generative})"), tensor="host")


def _backend_arg(sp, tensor_help: str, generative_help: str, **defaults) -> None:
    """--backend of a command that takes either kind; ``defaults`` by kind."""
    for_kinds(sp.add_argument("--backend", "-b", type=names, metavar="NAME[,NAME...]",
                              help=f"tensor models: {tensor_help}; generative models: "
                                   f"{generative_help}"), **defaults)


def _precision_arg(sp, tensor_help: str, **defaults) -> None:
    """--precision of a command that takes either kind: a generative model's formats."""
    for_kinds(sp.add_argument("--precision", "-p", type=names, metavar="NAME[,NAME...]",
                              help=f"tensor models: {tensor_help}; generative models: "
                                   f"{llm.FORMATS_HELP}"), **defaults)


#: --calibration of profile, estimate, predict and recommend (either kind of model)
CALIBRATION_HELP = ("a calibration file (edgeprof calibrate --measurements ... --out FILE): "
                    "a tensor model's is used instead of the search, a generative model's "
                    "before it")


def _add_profile(sub, common) -> None:
    pr = sub.add_parser("profile", parents=[common],
                        help="estimate + benchmark + summarize a model for a target (a "
                             "generative model: llama-bench's pp/tg measured here beside the "
                             "estimate and the target's prediction)")
    t, g = kind_groups(pr)
    _model_args(pr, t, layers=True)
    _target_arg(pr, "none, or the board to predict too (e.g. raspberry_pi_5)")
    _backend_arg(pr, "backend name(s), comma-separated, or 'all' (default torch_eager)",
                 f"{llm.BACKENDS_HELP} (default llama_cpp)",
                 tensor="torch_eager", generative="llama_cpp")
    _precision_arg(pr, "precision(s), comma-separated: fp32 (default), fp16, bf16, int8, "
                       "int8_static, int8_dynamic, int8_weight, int4_weight", tensor="fp32")
    pr.add_argument("--threads", type=positive_int,
                    help="intra-op threads here (default: physical cores) and, on a board "
                         "target, the board's threads its predictions are for (default: all "
                         "its big cores)")
    pr.add_argument("--device", type=device, default=None,
                    help="this machine's device the benchmarks run on: cpu (default), "
                         "cuda[:N] or vulkan[:N], for backends that declare that device "
                         "(vulkan: ncnn); a generative "
                         "model: cpu or cuda, this machine's processor and the --target "
                         "board's (without it: the runs on the CPU, the board's figures for "
                         "the processor its runtime uses there, a Jetson's GPU)")
    for_kinds(pr.add_argument("--warmup", type=non_negative_int, metavar="N",
                              help="untimed warm-up before timing: tensor models, runs of "
                                   "single inferences (default adaptive: until the timings "
                                   "settle); generative models, repetitions of one whole "
                                   "pp/tg test, as --repetitions counts them (default 1)"),
              generative=1)
    pr.add_argument("--out", "-o", metavar="DIR",
                    help="write the artifacts here: CSV/PNG/JSON for a tensor model; "
                         "profile.json, llm_bench.csv, estimate.csv, report.html for a "
                         "generative one")
    pr.add_argument("--calibration", metavar="FILE.json", help=CALIBRATION_HELP)
    t.add_argument("--stream-rate", type=positive_float, metavar="FPS",
                   help="input stream rate; gives stream_utilization")
    t.add_argument("--latency-budget-ms", type=positive_float, metavar="MS",
                   help="say whether each configuration meets this latency")
    _timing_args(t, "run")
    add_isolation_flags(pr)
    t.add_argument("--backend-option", type=key_value, action="append", metavar="KEY=VALUE",
                   help="a backend's own option, e.g. torch_compile.mode=max-autotune (repeat; "
                        "BACKEND.KEY for one backend, KEY for all; 'edgeprof backends' lists "
                        "them)")
    t.add_argument("--html", metavar="FILE", type=html_file,
                   help="also write the self-contained HTML report to FILE (--out DIR "
                        "always has report.html)")
    t.add_argument("--calibration-data", metavar="FILE.npz",
                   help="real samples (array x, one per row) to calibrate static int8 "
                        "(default: synthetic inputs, which say nothing about accuracy)")
    t.add_argument("--trace", action="store_true",
                   help="per-operator runtime profiles joined to the estimate's layers, and a "
                        "Chrome trace per run (written to --out)")
    t.add_argument("--recalibrate", action="store_true", help="redo the host calibration")
    add_fleet_flag(pr)  # --fleet SCHEDULER: measure on a board of the target (cli/fleet.py)
    llm.add_generative_args(g, "profile")
    pr.set_defaults(func=cmd_profile)


def _add_estimate(sub, common) -> None:
    es = sub.add_parser("estimate", parents=[common],
                        help="the analytic estimate (and, with --backend, the prediction); "
                             "builds and runs nothing")
    t, g = kind_groups(es)
    _model_args(es, t, layers=True)
    _target_arg(es, "the board to predict, with the fit verdict")
    _backend_arg(es, "the runtime family on the board: adds its prediction (default none)",
                 f"{llm.BACKENDS_HELP} (default llama_cpp)", generative="llama_cpp")
    _precision_arg(es, "the precision to estimate (and predict) at (default fp32)",
                   tensor="fp32")
    es.add_argument("--threads", type=positive_int,
                    help="the board's threads (default: all its big cores; a calibration "
                         "from your measurements: the threads its rows ran)")
    es.add_argument("--calibration", metavar="FILE.json", help=CALIBRATION_HELP)
    llm.add_generative_args(g, "estimate")
    es.set_defaults(func=cmd_estimate)


def _constraint_args(sp) -> None:
    sp.add_argument("--latency-budget-ms", type=positive_float, metavar="MS",
                    help="latency per inference on the target")
    sp.add_argument("--memory-budget-mb", type=positive_float, metavar="MB",
                    help="weights + peak activations, decimal MB")
    sp.add_argument("--max-accuracy-drop", type=float, default=1.0, metavar="PP",
                    help="allowed top-1 drop in percentage points (default 1)")
    sp.add_argument("--stream-rate", type=positive_float, metavar="FPS",
                    help="inferences per second the target must keep up with")


def _add_recommend(sub, common) -> None:
    rc = sub.add_parser("recommend", parents=[common],
                        help="the router's ordered optimization plan for a target (analytic; "
                             "a generative model: the format to use there)")
    t, g = kind_groups(rc)
    _model_args(rc, t)
    _target_arg(rc, "the board, required (e.g. raspberry_pi_5)")
    _precision_arg(rc, "the baseline precision (default fp32)", tensor="fp32")
    _constraint_args(t)
    rc.add_argument("--threads", type=positive_int,
                    help="the board's threads the plan (a generative model: the choice) and "
                         "its predicted figures are for (default: all its big cores)")
    rc.add_argument("--calibration", metavar="FILE.json", help=CALIBRATION_HELP)
    llm.add_generative_args(g, "recommend")
    g.add_argument("--backend", "-b", type=names, metavar="NAME[,NAME...]",
                   help=f"{llm.BACKENDS_HELP} to choose among (default: all of them)")
    rc.set_defaults(func=cmd_recommend)


def _add_optimize(sub, common) -> None:
    op = sub.add_parser("optimize", parents=[common],
                        help="measure the plan, a backend x precision sweep and compressions "
                             "here; choose the fastest configuration that meets the "
                             "constraints (a generative model: recommend's format choice, "
                             "then the shortlist measured here with llama-bench's pp/tg, "
                             "which takes minutes; the target's figures stay predicted)")
    t, g = kind_groups(op)
    _model_args(op, t)
    _target_arg(op, "the board, required (e.g. raspberry_pi_5)")
    _backend_arg(op, "restrict the sweep to these backends (comma-separated)",
                 f"{llm.BACKENDS_HELP} to choose among (default: all of them)")
    _constraint_args(t)
    t.add_argument("--data", metavar="FILE.npz",
                   help="labelled data: arrays x (samples) and y (integer labels); built-in "
                        "models use scikit-learn's digits")
    t.add_argument("--compression", type=names,
                   default=",".join(("magnitude", "channels", "2:4", "channels_last")),
                   help="compressions to try (comma-separated: magnitude, channels, 2:4, "
                        "channels_last; default all four) or 'none'")
    t.add_argument("--train-seconds", type=positive_float, default=8.0, metavar="S",
                   help="training time of a built-in model on digits (cached; default 8)")
    t.add_argument("--finetune-steps", type=non_negative_int, default=200, metavar="N",
                   help="fine-tuning steps after pruning, on the training split, pruned "
                        "weights kept at zero; the reference gets as many plain steps "
                        "(default 200; 0 = none)")
    why = ("; shorter than profile's because optimize times many candidates, then times the "
           "close finalists again for longer")
    t.add_argument("--runs", type=positive_int,
                   help=f"minimum timed runs per candidate (default 30{why})")
    t.add_argument("--min-time", type=positive_float, metavar="S",
                   help=f"minimum timed seconds per candidate (default 0.3{why})")
    t.add_argument("--max-time", type=positive_float, metavar="S",
                   help="cap on timed seconds per candidate (default 1.5)")
    op.add_argument("--out", "-o", metavar="DIR",
                    help="write the artifacts here: CSV/PNG/JSON and report.html for a tensor "
                         "model; optimize.json (the choice, its candidates and the runs "
                         "measured here) and llm_bench.csv for a generative one")
    t.add_argument("--recalibrate", action="store_true", help="redo the host calibration")
    t.add_argument("--html", metavar="FILE", type=html_file,
                   help="also write the self-contained HTML report to FILE (--out DIR "
                        "always has report.html)")
    llm.add_generative_args(g, "optimize")
    g.add_argument("--precision", "-p", type=names, metavar="FORMAT[,FORMAT...]",
                   help=llm.FORMATS_HELP)
    op.set_defaults(func=cmd_optimize)


def _board_device(text: str) -> str:
    """A board's processor (``--device`` of predict): a device name a target descriptor may
    give (cpu, cuda[:N], gpu, npu); whether the board has it is the target's to say."""
    import re

    from edgeprof.targets.descriptor import DEVICES

    if not re.fullmatch(rf"(?:{'|'.join(DEVICES)})|cuda:\d+", text):
        raise argparse.ArgumentTypeError(f"device must be one of {', '.join(DEVICES)} (a "
                                         f"board's processors: 'edgeprof targets show T'), "
                                         f"got '{text}'")
    return text


def _add_predict(sub, common) -> None:
    pd = sub.add_parser("predict", parents=[common],
                        help="predicted latency on a board, without building or running (a "
                             "generative model: its prefill and decode tokens/s there)")
    t, g = kind_groups(pd)
    _model_args(pd, t)
    _target_arg(pd, "the board, required (e.g. raspberry_pi_5)")
    pd.add_argument("--backend", "-b", required=True,
                    help="the runtime family on the board (tensor models: tflite, onnxruntime, "
                         "tensorrt ...; generative models: llama_cpp, onnxruntime_genai, "
                         "openvino_genai, transformers)")
    _precision_arg(pd, "the precision to predict at (default fp32)", tensor="fp32")
    pd.add_argument("--threads", type=positive_int,
                    help="the board's threads (default: all its big cores; a calibration "
                         "from your measurements: the threads its rows ran)")
    pd.add_argument("--calibration", metavar="FILE.json", help=CALIBRATION_HELP)
    pd.add_argument("--device", type=_board_device, default=None,
                    help="the board's processor (cpu, cuda, gpu, npu: 'edgeprof targets show T'; "
                         "default: the one the runtime uses there)")
    pd.add_argument("--runtime-version", metavar="VERSION",
                    help="the runtime build on the board (a generative model's, e.g. b9307); "
                         "a calibration fitted with another build is used with a warning "
                         "naming both")
    llm.add_generative_args(g, "predict")
    pd.set_defaults(func=cmd_predict)


def _add_batch(sub, common) -> None:  # tensor models only
    bs = sub.add_parser("batch", parents=[common],
                        help="latency and throughput per batch size (measured), and the largest "
                             "batch that fits the target (estimated)")
    _model_args(bs)
    bs.add_argument("--batch-sizes", type=batch_list, default=[1, 2, 4, 8, 16, 32],
                    help="comma-separated, e.g. 1,2,4,8 (default 1,2,4,8,16,32)")
    bs.add_argument("--backend", "-b", default="torch_eager",
                    help="the backend measured at every batch size (default torch_eager)")
    bs.add_argument("--precision", "-p", default="fp32",
                    help="the precision measured (default fp32)")
    bs.add_argument("--device", type=device, default=None,
                    help="this machine's device the batches run on: cpu (default) or "
                         "cuda[:N]; on cuda the batch that fits is the GPU's (host_gpu)")
    bs.add_argument("--latency-budget-ms", type=positive_float, metavar="MS",
                    help="say whether each batch meets this latency (p90 where reported, "
                         "else the median)")
    _timing_args(bs, "batch size")
    bs.add_argument("--warmup", type=positive_int, metavar="N",
                    help="untimed warm-up runs (single inferences) before timing; default "
                         "adaptive: until the timings settle")
    bs.add_argument("--backend-option", type=key_value, action="append", metavar="KEY=VALUE",
                    help="a backend option, e.g. xnnpack=false (repeat)")
    bs.add_argument("--out", "-o", metavar="DIR", help="write batch_sizes.csv/.json here")
    bs.set_defaults(func=cmd_batch)


def _add_listings(sub, common) -> None:
    t = sub.add_parser("targets", parents=[common], help="list targets, or show one's figures")
    t.add_argument("action", nargs="?", choices=["list", "show"], default="list",
                   help="list every target (default), or show one target's figures")
    t.add_argument("id", nargs="?", help="target id (for 'show')")
    t.add_argument("--recalibrate", action="store_true", help="redo the host calibration")
    t.set_defaults(func=cmd_targets)

    b = sub.add_parser("backends", parents=[common],
                       help="list backends: available or not, and why")
    b.set_defaults(func=cmd_backends)

    pl = sub.add_parser("plugins", parents=[common], help="list loaded plugins and where from")
    pl.set_defaults(func=cmd_plugins)


def _add_compare_and_calibrate(sub, common) -> None:
    c = sub.add_parser("compare", parents=[common],
                       help="compare two profile.json files (significance per run)")
    c.add_argument("a", help="the first profile.json (A, the baseline)")
    c.add_argument("b", help="the second profile.json (B, compared with A)")
    c.add_argument("--html", metavar="FILE", type=html_file,
                   help="write the before/after page (self-contained HTML) to FILE")
    c.add_argument("--force", action="store_true",
                   help="compare profiles of a different model, target or input shape anyway")
    c.set_defaults(func=cmd_compare)

    cal = sub.add_parser("calibrate", parents=[common],  # predict helper
                         help="measure sampled kernels here, fit a latency predictor, save it")
    cal.add_argument("--target", default="host",
                     help="'host' (measured here), or a board's target with --fleet")
    cal.add_argument("--backend", required=True, help="the runtime to calibrate")
    cal.add_argument("--precision", default=None,
                     help="default fp32; a generative backend: q4_0 or int4 where it makes it")
    cal.add_argument("--kernels", default=None, help="kernel set: default or tiny (default: "
                                                     "default)")
    cal.add_argument("--runs", type=int, default=None,
                     help="minimum timed runs per kernel (default 20)")
    cal.add_argument("--models", type=names, default=None,
                     help="generative backends: the presets to measure (default "
                          "smollm2-135m,smollm2-360m,qwen2.5-0.5b)")
    cal.add_argument("--measurements", metavar="FILE.csv",
                     help="your own timings on the board: columns model,latency_ms and "
                          "optionally input_shape,precision,threads,runtime,source; a "
                          "generative backend's: llama-bench tests, model,test,tokens_per_s "
                          "and optionally precision,threads,runtime_version,device,source")
    cal.add_argument("--threads", type=positive_int,
                     help="with --measurements: the threads every row ran")
    cal.add_argument("--out", metavar="FILE.json", dest="calibration_out", type=out_file,
                     help="with --measurements: where to write the calibration, a file or a "
                          "folder to write it in (default: your calibration folder, where it "
                          "is preferred over the shipped one)")
    add_isolation_flags(cal, "preset (generative backends)")  # where each preset runs
    add_fleet_flag(cal)  # --fleet SCHEDULER: measure the kernels on a board of --target
    cal.set_defaults(func=cmd_calibrate)


def build_parser() -> argparse.ArgumentParser:
    """The one parser. profile, estimate, recommend and optimize take a tensor model or a
    generative one: their flags for one kind only sit in that kind's group, and
    :func:`edgeprof.cli.common.resolve_kind` refuses the other kind's and fills the defaults
    that differ by kind, after parsing."""
    common = _common_parser()
    p = Parser(prog="edgeprof", description=(
        "How will this model run on that device, with which runtime and compression, and why. "
        "Estimates are analytic; benchmarks are measured on this machine; figures for another "
        "target are estimated from both and labelled so. Generative models (llm:NAME, .gguf, "
        "HF folder) take profile, estimate, predict, recommend and optimize with their own "
        "group of flags."))
    p.add_argument("--version", action="version", version=f"edgeprof {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    _add_listings(sub, common)
    _add_profile(sub, common)
    _add_estimate(sub, common)
    _add_predict(sub, common)
    _add_recommend(sub, common)
    _add_optimize(sub, common)
    _add_batch(sub, common)
    _add_compare_and_calibrate(sub, common)
    add_fleet_parsers(sub, common)
    return p
