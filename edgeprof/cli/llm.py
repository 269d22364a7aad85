"""Generative models (``llm:NAME``, a ``.gguf`` file, a Hugging Face folder) on the command
line: their flags, an argument group of ``profile``, ``estimate``, ``predict``,
``recommend`` and ``optimize`` (:func:`add_generative_args`), and how those commands show a
generative model's answer (``show_profile``, ``show_estimate``, ``show_choice``: the views
``cli/commands.py`` looks up by the model's kind), and the printing of a generative
backend's ``calibrate``. The commands are ``cli/commands.py``'s, one per verb over the API;
errors and exit codes are main's (``_run``).
"""

from __future__ import annotations

import json

from edgeprof.cli.common import KindGroup, depths, non_negative_int, positive_float, positive_int
from edgeprof.cli.render_llm import render_choice, render_llm


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
    elif command == "estimate":
        group.add_argument("--build", metavar="BUILD",
                           help="the runtime build to predict for, e.g. b9307 (default: the "
                                "one installed here, else the newest the calibration knows)")
    elif command != "predict":  # recommend, optimize (predict's build: its --runtime-version)
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
def print_llm_calibration(result, args) -> int:
    """``calibrate --backend llama_cpp`` (``api.calibrate``'s result): presets of three sizes
    measured (here, in a worker with --isolate/--timeout, or on a board of --target with
    --fleet), then an LLM calibration (effective bandwidth, per-layer overhead, prefill
    efficiency): the board's when a real board of the target measured them, else this
    host's."""
    from edgeprof.cli.render import fmt_number

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
              f"{fmt_number((r.prefill_tokens_per_s or {}).get('median'))} tok/s, tg{r.n_gen} "
              f"{fmt_number((r.decode_tokens_per_s or {}).get('median'))} tok/s (measured on "
              f"{where})")
    for key, e in (cal.get("entries") or {}).items():
        for runtime, fit in ((e.get("decode") or {}).get("runtimes") or {}).items():
            bw = fit.get("bandwidth_fraction") or 0.0
            print(f"{key} {runtime}: effective bandwidth {fmt_number(bw)} x "
                  f"{fmt_number((e.get('peak_bandwidth') or 0) / 1e9)} GB/s, per-layer overhead "
                  f"{fmt_number(1e3 * (fit.get('per_layer_s') or 0.0))} ms (fitted)")
    print(f"calibration {cal.get('name')} saved to {cal.get('path')}")
    return 0


def print_llm_measurements_calibration(result, args) -> int:
    """``calibrate --target BOARD --backend llama_cpp --measurements FILE.csv``
    (``api.calibrate``'s result): the user's llama-bench tests on the board fitted as a
    fleet board's measurements are."""
    from edgeprof.cli.render import fmt_number

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
            print(f"{key} {runtime}: decode at {fmt_number(fit.get('bandwidth_fraction'))} of "
                  f"{fmt_number((e.get('peak_bandwidth') or 0) / 1e9)} GB/s + "
                  f"{fmt_number(1e3 * (fit.get('per_layer_s') or 0.0))} ms per layer"
                  + (f"; prefill at {fmt_number(pre.get('efficiency'))} of the peak"
                     if pre.get("efficiency") else "; no pp test: prefill from the prior"))
    rows = [b for b in (summary["cv"].get("boards") or [])
            if b.get("board") != "all" and (b.get("n") or 0) >= 2]
    for b in rows:
        print(f"leave-one-out {b['stage']} ({b['n']} tests): median |error| "
              f"{100 * (b.get('median_abs_error') or 0):.0f} %, the interval held "
              f"{100 * (b.get('coverage') or 0):.0f} % of them, median width "
              f"{fmt_number(b.get('median_width'))}x")
    if not rows:
        print("one test per stage: it moves the level only; the interval is the prior's "
              "(add tests of other models for a leave-one-out error)")
    print(f"saved to {cal.get('path')}")
    return 0


def show_profile(report, args, console) -> None:
    """``profile``'s tables of a generative report."""
    render_llm(report, console)


def print_problems(report, console) -> None:
    """The runs of a generative profile that produced no measurement."""
    for r in report.runs:
        if r.status not in ("ok", "skipped"):
            console.print(f"edgeprof: {r.backend} {r.format}: {r.status}: {r.reason}; the "
                          "estimate is still shown", markup=False, soft_wrap=True)


def show_estimate(report, args, console) -> None:
    """``predict``'s answer for a generative model: the estimate and the board's
    predictions, as JSON or tables."""
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, allow_nan=False))
    else:
        show_profile(report, args, console)


def show_choice(choice, console) -> None:
    """``recommend``'s and ``optimize``'s answer for a generative model: the choice, and the
    shortlisted formats optimize measured here."""
    doc = choice.to_dict()
    render_choice(doc, console)
    for r in doc.get("measured_here") or []:
        pp = (r.get("prefill_tokens_per_s") or {}).get("median")
        tg = (r.get("decode_tokens_per_s") or {}).get("median")
        console.print(f"measured here: {r['format']} on {r['backend']}: {r['status']}"
                      + (f", pp{r.get('n_prompt')} {pp:.3g} tok/s, tg{r.get('n_gen')} "
                         f"{tg:.3g} tok/s (this machine, not {doc['target']})"
                         if pp and tg else f" ({r.get('reason')})"), markup=False)


__all__ = ["add_generative_args", "print_problems", "show_choice", "show_estimate",
           "show_profile"]
