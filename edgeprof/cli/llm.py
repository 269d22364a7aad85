"""Generative models (``llm:NAME``, a ``.gguf`` file, a Hugging Face folder) on the command
line: their flags, an argument group of ``profile``, ``estimate``, ``predict``,
``recommend`` and ``optimize`` (:func:`add_generative_args`), and the command functions
those subcommands (and ``calibrate`` of a generative backend) run when the model is a
generative one (``edgeprof.cli.common.resolve_kind`` chooses), and the printing of a
generative backend's ``calibrate``. Parsing and printing only: the work is in
``edgeprof.api`` (``profile_llm``, ``estimate_llm``, ``recommend_llm``, ``calibrate``);
errors and exit codes are main's (``_run``).
"""

from __future__ import annotations

import json
import sys

from edgeprof.cli.common import (KindGroup, Progress, add_isolation_flags, depths, keeping_results,
                                 make_console, non_negative_int, positive_float, positive_int)
from edgeprof.cli.render_llm import render_choice, render_llm
from edgeprof.core.errors import UserError


# ----------------------------------------------------------------------------- parser
#: the help of the flags both kinds take, for a generative model
BACKENDS_HELP = ("generative backend(s), comma-separated: llama_cpp, onnxruntime_genai, "
                 "openvino_genai, transformers, or 'all'; predict, estimate and profile also "
                 "take the runtimes edgeprof only predicts: llamafile, mlc, rkllm")
FORMATS_HELP = ("weight format(s), comma-separated: q2_k q4_0 q4_k_m q5_k_m q6_k q8_0 f16 "
                "(llama_cpp), int4 int8 fp32 (onnxruntime_genai) ...; each runs on the "
                "backends that make it")


def add_generative_args(group: KindGroup, command: str) -> None:
    """The flags only a generative model takes, for ``command`` (profile, estimate,
    recommend, optimize); the flags both kinds take are main's."""
    group.add_argument("--prompt-tokens", type=positive_int, default=512, metavar="P",
                       help="prompt tokens: llama-bench's pp P (default 512)")
    group.add_argument("--gen-tokens", type=positive_int, default=128, metavar="G",
                       help="generated tokens: llama-bench's tg G (default 128)")
    group.add_argument("--depth", type=depths, default=[0], metavar="D[,D...]",
                       help="tokens already in the KV cache (default 0), e.g. 0,2048")
    if command not in ("profile", "predict"):  # their --device is both kinds' (main)
        group.add_argument("--device", metavar="DEVICE",
                           help="the processor on the --target board (cpu, cuda, npu ...): "
                                "default the one the runtimes would use there (a Jetson's "
                                "cuda, an RK3588's npu for rkllm)" if command == "estimate"
                           else "the processor on the --target board (cpu or cuda): default "
                                "the one the runtimes would use there (a Jetson's cuda)")
    if command == "profile":
        group.add_argument("--repetitions", type=positive_int, default=5, metavar="N",
                           help="timed repetitions per test (default 5)")
    elif command == "predict":  # its --runtime-version is both kinds' (the build)
        pass
    elif command == "estimate":
        group.add_argument("--build", metavar="BUILD",
                           help="the runtime build to predict for, e.g. b9307 (default: the "
                                "one installed here, else the newest the calibration knows)")
    else:  # recommend, optimize
        group.add_argument("--context", type=positive_int, metavar="TOKENS",
                           help="context the KV cache must hold (default: depth + prompt + "
                                "generated tokens)")
        group.add_argument("--tokens-per-s", type=positive_float, metavar="TOK/S",
                           help="decode rate the target must reach")
        if command == "optimize":
            group.add_argument("--repetitions", type=positive_int, default=3, metavar="N",
                               help="timed repetitions per test of each shortlisted format, "
                                    "measured here (default 3)")
            group.add_argument("--shortlist", type=non_negative_int, default=3, metavar="N",
                               help="how many formats that fit and meet the budget to measure "
                                    "here, the choice first (default 3; 0: the choice alone, "
                                    "analytic, as recommend)")


# --------------------------------------------------------------------------- commands
def _device(args, board: bool = False) -> str | None:
    """``--device`` for a generative model: cpu or cuda for a run here (the runtimes name no
    CUDA index); ``board`` (estimate, predict: nothing runs here): with --target, any
    processor of the board (npu ...), which ``estimate_llm`` checks against the target and
    the runtimes."""
    if board and args.device is not None and ":" not in args.device \
            and getattr(args, "target", None) is not None:
        return args.device
    if args.device not in (None, "cpu", "cuda"):
        raise UserError(f"--device for a generative model is cpu or cuda, got '{args.device}'"
                        + ("; a board's other processor (npu ...) goes with --target BOARD"
                           if board else ""))
    return args.device


def _fleet(args):
    """The fleet a generative ``profile`` measures on: ``--fleet``, else $EDGEPROF_FLEET for
    a board target; None: measure here (as ``cli.fleet.profile_fleet`` for a tensor one)."""
    import os

    from edgeprof.profilers.measure.fleet import FLEET_ENV, FleetSpec

    if not args.fleet and (not os.environ.get(FLEET_ENV) or args.target in (None, "host")):
        return None
    return FleetSpec.from_options(args.fleet, tls_ca=args.tls_ca, tls_cert=args.tls_cert,
                                  tls_key=args.tls_key, insecure=args.insecure)


def add_calibrate_args(cal) -> None:
    """``calibrate``'s flags for a generative backend: where each preset runs."""
    add_isolation_flags(cal, "preset (generative backends)")


def print_llm_calibration(result, args) -> int:
    """``calibrate --backend llama_cpp`` (``api.calibrate``'s result): presets of three sizes
    measured (here, in a worker with --isolate/--timeout, or on a board of --target with
    --fleet), then an LLM calibration (effective bandwidth, per-layer overhead, prefill
    efficiency): the board's when a real board of the target measured them, else this
    host's."""
    from edgeprof.cli.render import _fmt

    cal, records = result.calibration, result.records
    fp = cal.get("fingerprint") or {}
    if args.json:
        print(json.dumps({"calibration": cal.get("name"), "path": cal.get("path"),
                          "fingerprint": fp or None, "calibration_data": cal,
                          "runs": [r.to_dict() for r in records]}, indent=2, default=str))
        return 0
    where = "this host"
    if fp.get("board"):
        where = (f"board {fp['board']}" + (f", EMULATING {fp.get('target')} on this host: "
                                           "this host's figures" if fp.get("emulating") else
                                           f" ({fp.get('target')})"))
    for r in records:
        print(f"{r.model:14s} {r.backend} {r.format}: pp{r.n_prompt} "
              f"{_fmt((r.prefill_tokens_per_s or {}).get('median'))} tok/s, tg{r.n_gen} "
              f"{_fmt((r.decode_tokens_per_s or {}).get('median'))} tok/s (measured on {where})")
    for key, e in (cal.get("entries") or {}).items():
        for runtime, fit in ((e.get("decode") or {}).get("runtimes") or {}).items():
            bw = fit.get("bandwidth_fraction") or 0.0
            print(f"{key} {runtime}: effective bandwidth {_fmt(bw)} x "
                  f"{_fmt((e.get('peak_bandwidth') or 0) / 1e9)} GB/s, per-layer overhead "
                  f"{_fmt(1e3 * (fit.get('per_layer_s') or 0.0))} ms (fitted)")
    print(f"calibration {cal.get('name')} saved to {cal.get('path')}")
    return 0


def print_llm_measurements_calibration(result, args) -> int:
    """``calibrate --target BOARD --backend llama_cpp --measurements FILE.csv``
    (``api.calibrate``'s result): the user's llama-bench tests on the board fitted as a
    fleet board's measurements are."""
    from edgeprof.cli.render import _fmt

    cal, summary = result.calibration, result.summary
    if args.json:
        print(json.dumps({"calibration": cal.get("name"), "path": cal.get("path"), **summary,
                          "calibration_data": cal}, indent=2, allow_nan=False, default=str))
        return 0
    st = summary["stages"]
    at = (f"at {', '.join(map(str, summary['threads']))} thread(s)" if summary["threads"]
          else "on the GPU (no host threads)")
    print(f"calibration {cal.get('name')}: {summary['rows']} test(s) ({st['prefill']} pp, "
          f"{st['decode']} tg) of {', '.join(summary['models'])} on {args.target}'s "
          f"{summary['device']} {at}; learned {summary['learned']}"
          + (f"; builds {', '.join(summary['builds'])}" if summary["builds"] else ""))
    for key, e in (cal.get("entries") or {}).items():
        for runtime, fit in ((e.get("decode") or {}).get("runtimes") or {}).items():
            pre = ((e.get("prefill") or {}).get("runtimes") or {}).get(runtime) or {}
            print(f"{key} {runtime}: decode at {_fmt(fit.get('bandwidth_fraction'))} of "
                  f"{_fmt((e.get('peak_bandwidth') or 0) / 1e9)} GB/s + "
                  f"{_fmt(1e3 * (fit.get('per_layer_s') or 0.0))} ms per layer"
                  + (f"; prefill at {_fmt(pre.get('efficiency'))} of the peak"
                     if pre.get("efficiency") else "; no pp test: prefill from the prior"))
    rows = [b for b in (summary["cv"].get("boards") or [])
            if b.get("board") != "all" and (b.get("n") or 0) >= 2]
    for b in rows:
        print(f"leave-one-out {b['stage']} ({b['n']} tests): median |error| "
              f"{100 * (b.get('median_abs_error') or 0):.0f} %, the interval held "
              f"{100 * (b.get('coverage') or 0):.0f} % of them, median width "
              f"{_fmt(b.get('median_width'))}x")
    if not rows:
        print("one test per stage: it moves the level only; the interval is the prior's "
              "(add tests of other models for a leave-one-out error)")
    print(f"saved to {cal.get('path')}")
    return 0


def cmd_profile_llm(args) -> int:
    from edgeprof.api import llm_exit_code, profile_llm

    progress = Progress(enabled=not args.json)
    fleet = _fleet(args)
    payload, unwritten = keeping_results(progress, lambda: profile_llm(
        args.model, backends=args.backend, precisions=args.precision,
        prompt_tokens=args.prompt_tokens, gen_tokens=args.gen_tokens, depths=args.depth,
        repetitions=args.repetitions, warmup=args.warmup, threads=args.threads,
        target=args.target, device=_device(args), out=args.out, plugins=args.plugins,
        targets_dir=args.targets_dir, progress=progress, isolate=bool(args.isolate),
        timeout_s=args.timeout, fleet=fleet, calibration=args.calibration))
    if args.json:
        print(json.dumps(payload, indent=2, allow_nan=False))
    else:
        render_llm(payload, make_console())
        if args.out and unwritten is None:
            make_console(stderr=True).print(f"artifacts written to {args.out}", markup=False)
    for r in payload.get("runs") or []:
        if r["status"] not in ("ok", "skipped"):
            print(f"edgeprof: {r['backend']} {r['format']}: {r['status']}: {r['reason']}; the "
                  "estimate is still shown", file=sys.stderr)
    if unwritten is not None:
        raise unwritten
    return llm_exit_code(payload)


def cmd_estimate_llm(args) -> int:
    from edgeprof.api import estimate_llm

    payload = estimate_llm(args.model, args.target, backends=args.backend,
                           precisions=args.precision, prompt_tokens=args.prompt_tokens,
                           gen_tokens=args.gen_tokens, depths=args.depth,
                           device=_device(args, board=True), plugins=args.plugins,
                           targets_dir=args.targets_dir,
                           threads=args.threads, build=args.build,
                           calibration=args.calibration)
    if args.json:
        print(json.dumps(payload, indent=2, allow_nan=False))
    else:
        render_llm(payload, make_console())
    return 0


def cmd_predict_llm(args) -> int:
    """``predict`` of a generative model: the board's prefill and decode tokens/s for the
    backend and format(s) asked (``estimate_llm`` with a target: nothing built or run)."""
    if args.target is None:
        raise UserError(f"predict {args.model} needs --target BOARD (e.g. raspberry_pi_5): a "
                        "prediction is for a board; 'edgeprof estimate' gives the analytic "
                        "figures without one")
    args.build = args.runtime_version  # predict's name for the build, both kinds'
    return cmd_estimate_llm(args)


def cmd_recommend_llm(args) -> int:
    from edgeprof.api import optimize_llm, recommend_llm

    context = args.context or (max(args.depth) + args.prompt_tokens + args.gen_tokens)
    choose = dict(device=_device(args), backends=args.backend, context_tokens=context,
                  tokens_per_s=args.tokens_per_s, prompt_tokens=args.prompt_tokens,
                  gen_tokens=args.gen_tokens, plugins=args.plugins,
                  targets_dir=args.targets_dir, precisions=args.precision)
    if args.command == "recommend":
        choose["threads"] = args.threads  # the board's (optimize's are this machine's)
        choose["calibration"] = args.calibration
    unwritten = None
    if args.command == "optimize":  # the choice, then the shortlist measured here
        progress = Progress(enabled=not args.json)
        doc, unwritten = keeping_results(progress, lambda: optimize_llm(
            args.model, args.target, repetitions=args.repetitions, shortlist=args.shortlist,
            threads=getattr(args, "threads", None), progress=progress, out=args.out,
            **choose))
    else:
        doc = recommend_llm(args.model, args.target, **choose).to_dict()
    # exit codes as for tensor models: 4 when a constraint (RAM, or the --tokens-per-s the
    # user set) cannot be met; the closest choice is still shown
    code = 4 if doc["verdict"] in ("does_not_fit", "budget_not_met") else 0
    if args.json:
        print(json.dumps(doc, indent=2, allow_nan=False, default=str))
    else:
        console = make_console()
        render_choice(doc, console)
        for r in doc.get("measured_here") or []:
            pp = (r.get("prefill_tokens_per_s") or {}).get("median")
            tg = (r.get("decode_tokens_per_s") or {}).get("median")
            console.print(f"measured here: {r['format']} on {r['backend']}: {r['status']}"
                          + (f", pp{r.get('n_prompt')} {pp:.3g} tok/s, tg{r.get('n_gen')} "
                             f"{tg:.3g} tok/s (this machine, not {doc['target']})"
                             if pp and tg else f" ({r.get('reason')})"), markup=False)
        if getattr(args, "out", None) and unwritten is None:
            make_console(stderr=True).print(f"artifacts written to {args.out}", markup=False)
    if unwritten is not None:  # measured, but --out could not be written: shown, then fail
        raise unwritten
    if code:
        reasons = doc.get("reasons") or [doc["verdict"]]
        print(f"edgeprof: error: {reasons[0]}", file=sys.stderr)
    return code


__all__ = ["add_generative_args", "cmd_estimate_llm", "cmd_profile_llm", "cmd_recommend_llm"]
