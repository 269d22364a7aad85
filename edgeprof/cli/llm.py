"""The command line for generative models (``llm:NAME``, a ``.gguf`` file, a Hugging Face
folder): ``profile``, ``estimate``, ``recommend`` and ``optimize`` with the LLM flags.
``edgeprof.cli.main.main`` hands a command line here when its model is a generative one
(:func:`is_llm_command`); errors and exit codes are main's (``_run``). Parsing and printing
only: the work is in ``edgeprof.api`` (``profile_llm``, ``estimate_llm``, ``recommend_llm``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

LLM_COMMANDS = ("profile", "estimate", "recommend", "optimize")
#: options whose value is a path (never the model)
_PATH_OPTIONS = {"--out", "-o", "--html", "--plugins", "--targets-dir", "--calibration-data",
                 "--data", "--fleet", "--workdir"}


def is_llm_command(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is one of :data:`LLM_COMMANDS` on a generative model (cheap: looks
    at the strings, and for a folder at whether it holds config.json)."""
    if not argv or argv[0] not in LLM_COMMANDS:
        return False
    from edgeprof.core.llm import is_llm_spec

    skip = False
    for tok in argv[1:]:
        if skip:
            skip = False
        elif tok in _PATH_OPTIONS:
            skip = True
        elif not tok.startswith("-") and is_llm_spec(tok):
            return True
    return False


# ----------------------------------------------------------------------------- parser
def _depths(text: str) -> list[int]:
    from edgeprof.cli.main import _non_negative_int

    parts = [p.strip() for p in text.split(",")]
    if not parts or any(not p for p in parts):
        raise argparse.ArgumentTypeError(f"give depths like 0,2048, got '{text}'")
    return [_non_negative_int(p) for p in parts]


def build_llm_parser() -> argparse.ArgumentParser:
    from edgeprof.cli.main import (_names, _non_negative_int, _Parser, _positive_float,
                                   _positive_int)

    common = _Parser(add_help=False)
    common.add_argument("--plugins", metavar="FILE",
                        help="a plugins.toml of your own (also $EDGEPROF_PLUGINS)")
    common.add_argument("--targets-dir", metavar="DIR",
                        help="a folder of your own target descriptors, searched first")
    common.add_argument("--json", action="store_true", help="print the JSON payload to stdout")
    common.add_argument("--debug", action="store_true",
                        help="show tracebacks, and the runtimes' own log output, which is "
                             "silenced otherwise")

    shape = _Parser(add_help=False)
    shape.add_argument("model", help="llm:NAME (a built-in architecture with random weights), "
                                     "a .gguf file, or a Hugging Face model folder")
    shape.add_argument("--prompt-tokens", type=_positive_int, default=512, metavar="P",
                       help="prompt tokens: llama-bench's pp P (default 512)")
    shape.add_argument("--gen-tokens", type=_positive_int, default=128, metavar="G",
                       help="generated tokens: llama-bench's tg G (default 128)")
    shape.add_argument("--depth", type=_depths, default=[0], metavar="D[,D...]",
                       help="tokens already in the KV cache (default 0), e.g. 0,2048")
    shape.add_argument("--device", choices=("cpu", "cuda"), default=None,
                       help="the processor: profile and estimate default to cpu (this "
                            "machine's, and the --target board's); recommend and optimize "
                            "default to the one the runtimes would use on the board (a "
                            "Jetson's cuda)")
    shape.add_argument("--backend", "-b", type=_names, metavar="NAME[,NAME...]",
                       help="generative backend(s): llama_cpp, onnxruntime_genai, "
                            "openvino_genai, transformers, or 'all'")
    shape.add_argument("--precision", "-p", type=_names, metavar="FORMAT[,FORMAT...]",
                       help="weight format(s): q2_k q4_0 q4_k_m q5_k_m q6_k q8_0 f16 (llama_cpp), "
                            "int4 int8 fp32 (onnxruntime_genai) ...; each runs on the backends "
                            "that make it")

    p = _Parser(prog="edgeprof", description="Generative models: prefill, decode, time to "
                                             "first token and memory.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    pr = sub.add_parser("profile", parents=[common, shape],
                        help="measure here (llama-bench's pp/tg) beside the estimate and the "
                             "target's prediction")
    pr.add_argument("--target", "-t", help="also predict this board (e.g. raspberry_pi_5)")
    pr.add_argument("--repetitions", type=_positive_int, default=5, metavar="N",
                    help="timed repetitions per test (default 5)")
    pr.add_argument("--warmup", type=_non_negative_int, default=1, metavar="N",
                    help="untimed warm-up repetitions (default 1): a repetition is one whole "
                         "pp/tg test, as --repetitions counts them (tensor models' --warmup "
                         "counts single inferences)")
    pr.add_argument("--threads", type=_positive_int,
                    help="threads here (default: physical cores) and on the --target board "
                         "(default there: all its big cores)")
    pr.add_argument("--out", "-o", metavar="DIR", help="write profile.json, llm_bench.csv, "
                                                       "estimate.csv, report.html here")
    pr.set_defaults(func=cmd_profile_llm, backend_default="llama_cpp")

    es = sub.add_parser("estimate", parents=[common, shape],
                        help="estimate and predict without building or running anything")
    es.add_argument("--target", "-t", help="predict this board, with the fit verdict")
    es.add_argument("--threads", type=_positive_int,
                    help="the board's threads (default: all its big cores)")
    es.add_argument("--build", metavar="BUILD",
                    help="the runtime build to predict for, e.g. b9307 (default: the one "
                         "installed here, else the newest the calibration knows)")
    es.set_defaults(func=cmd_estimate_llm, backend_default="llama_cpp")

    for name, what in (("recommend", "the format to use on a target (analytic)"),
                       ("optimize", "the format to use on a target (analytic, as recommend)")):
        sp = sub.add_parser(name, parents=[common, shape], help=what)
        sp.add_argument("--target", "-t", help="the board (e.g. raspberry_pi_5)")
        sp.add_argument("--context", type=_positive_int, metavar="TOKENS",
                        help="context the KV cache must hold (default: depth + prompt + "
                             "generated tokens)")
        sp.add_argument("--tokens-per-s", type=_positive_float, metavar="TOK/S",
                        help="decode rate the target must reach")
        sp.set_defaults(func=cmd_recommend_llm, backend_default=None)
    return p


def main_llm(argv: Sequence[str]) -> int:
    """Parse a generative command line and run it the way main runs every command."""
    from edgeprof.cli.main import _run
    from edgeprof.cli.signals import handling_signals

    args = build_llm_parser().parse_args(list(argv))
    with handling_signals():
        return _run(args)


# --------------------------------------------------------------------------- commands
def _backends(args) -> Any:
    return args.backend if args.backend is not None else args.backend_default


def cmd_profile_llm(args) -> int:
    from edgeprof.api import llm_exit_code, profile_llm
    from edgeprof.cli.main import Progress, _console, _keeping_results

    progress = Progress(enabled=not args.json)
    payload, unwritten = _keeping_results(progress, lambda: profile_llm(
        args.model, backends=_backends(args), precisions=args.precision,
        prompt_tokens=args.prompt_tokens, gen_tokens=args.gen_tokens, depths=args.depth,
        repetitions=args.repetitions, warmup=args.warmup, threads=args.threads,
        target=args.target, device=args.device or "cpu", out=args.out, plugins=args.plugins,
        targets_dir=args.targets_dir, progress=progress))
    if args.json:
        print(json.dumps(payload, indent=2, allow_nan=False))
    else:
        render_llm(payload, _console())
        if args.out and unwritten is None:
            _console(stderr=True).print(f"artifacts written to {args.out}", markup=False)
    for r in payload.get("runs") or []:
        if r["status"] not in ("ok", "skipped"):
            print(f"edgeprof: {r['backend']} {r['format']}: {r['status']}: {r['reason']}; the "
                  "estimate is still shown", file=sys.stderr)
    if unwritten is not None:
        raise unwritten
    return llm_exit_code(payload)


def cmd_estimate_llm(args) -> int:
    from edgeprof.api import estimate_llm
    from edgeprof.cli.main import _console

    payload = estimate_llm(args.model, args.target, backends=_backends(args),
                           precisions=args.precision, prompt_tokens=args.prompt_tokens,
                           gen_tokens=args.gen_tokens, depths=args.depth,
                           device=args.device or "cpu", plugins=args.plugins,
                           targets_dir=args.targets_dir,
                           threads=args.threads, build=args.build)
    if args.json:
        print(json.dumps(payload, indent=2, allow_nan=False))
    else:
        render_llm(payload, _console())
    return 0


def cmd_recommend_llm(args) -> int:
    from edgeprof.api import recommend_llm
    from edgeprof.cli.main import _console

    context = args.context or (max(args.depth) + args.prompt_tokens + args.gen_tokens)
    choice = recommend_llm(args.model, args.target, device=args.device,
                           backends=_backends(args), context_tokens=context,
                           tokens_per_s=args.tokens_per_s, prompt_tokens=args.prompt_tokens,
                           gen_tokens=args.gen_tokens, plugins=args.plugins,
                           targets_dir=args.targets_dir, precisions=args.precision)
    doc = choice.to_dict()
    # exit codes as for tensor models: 4 when a constraint (RAM, or the --tokens-per-s the
    # user set) cannot be met; the closest choice is still shown
    code = 4 if choice.verdict in ("does_not_fit", "budget_not_met") else 0
    if args.json:
        print(json.dumps(doc, indent=2, allow_nan=False, default=str))
    else:
        console = _console()
        if args.command == "optimize":
            console.print("optimize for a generative model chooses the format analytically, "
                          "as recommend does; measure the choice here with 'edgeprof profile'",
                          markup=False)
        render_choice(doc, console)
    if code:
        print(f"edgeprof: error: {choice.reasons[0] if choice.reasons else choice.verdict}",
              file=sys.stderr)
    return code


def render_choice(doc: dict[str, Any], console) -> None:
    """The router's choice, its reasons and the candidates it weighed."""
    from rich.table import Table

    from edgeprof.cli.render import _si

    budget = f", at least {doc['tokens_per_s']:g} tok/s" if doc.get("tokens_per_s") else ""
    console.print(f"[bold]{doc['model']}[/bold] on {doc['target']} ({doc['device']}), context "
                  f"{doc['context_tokens']} tokens{budget}: "
                  + (f"[bold]{doc['format']} on {doc['backend']}[/bold]" if doc.get("format")
                     else "[red]no format fits[/red]"))
    if doc.get("verdict") and doc["verdict"] != "ok":
        console.print(f"verdict: {doc['verdict']}", markup=False)
    for reason in doc.get("reasons") or []:
        console.print(f"  - {reason}", markup=False)
    table = Table("backend", "format", "bits/weight", "weights + KV + runtime", "fits",
                  "longest context", "decode tok/s (target)", "status", title="candidates",
                  title_justify="left")
    for c in doc.get("candidates") or []:
        rate = c.get("decode_tokens_per_s") or {}
        table.add_row(c["backend"], c["format"], _num(c.get("bits_per_weight")),
                      _si(c.get("total_bytes"), "B"),
                      "-" if c.get("fits") is None else "yes" if c["fits"] else "no",
                      _num(c.get("max_context_tokens")),
                      f"{_cell(rate)} {rate.get('provenance', '')}".strip() if rate else "-",
                      c.get("status", "") + (f": {c['why']}" if c.get("why")
                                             and c["why"] != c.get("status") else ""))
    console.print(table)
    for n in doc.get("notes") or []:
        console.print(f"note: {n}", markup=False)


# ---------------------------------------------------------------------------- render
def _num(v: Any, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.{digits}g}"
    return str(v)


def _cell(f: dict[str, Any] | None, key: str = "value") -> str:
    """A figure as ``value`` or ``value [low–high]``."""
    if not f or f.get(key) is None:
        return "-"
    text = _num(f[key])
    if f.get("low") is not None and f.get("high") is not None:
        text += f" [{_num(f['low'])}–{_num(f['high'])}]"
    return text


def _stat(d: dict[str, Any] | None, spread: bool = True) -> str:
    if not d or d.get("median") is None:
        return "-"
    text = _num(d["median"])
    if spread and d.get("stddev"):
        text += f" ± {_num(d['stddev'], 2)}"
    return text


def render_llm(payload: dict[str, Any], console) -> None:
    """The rich tables of a generative profile or estimate."""
    from rich.table import Table

    from edgeprof.cli.render import _si
    from edgeprof.profilers.report.llm_outputs import find_figure, figure_value

    model = payload["model"]
    spec = model["spec"]
    target = payload.get("target") or {}
    params = (model.get("parameters") or {}).get("value")
    config = payload.get("config") or {}
    console.print(f"[bold]edgeprof[/bold] {spec['name']} ({spec['family']}, "
                  f"{_si(params, '') if params else '?'} parameters, from {model['source_kind']})"
                  + (f" → {target.get('id')}" if target else "")
                  + f"; pp{config.get('prompt_tokens')} tg{config.get('gen_tokens')}, "
                    f"device {payload.get('device')}")
    if model.get("random_weights"):
        console.print(model.get("note") or "random weights", markup=False)
    runs = {(r["backend"], r["format"], r["n_depth"]): r for r in payload.get("runs") or []}
    measured = bool(runs)
    table = Table(title="tokens/s per backend and format (measured: this host; estimated / "
                        "predicted: the target named; \\[low–high] intervals)",
                  title_justify="left")
    for col in ("backend", "format", "depth", "provenance (where)", "pp tok/s", "tg tok/s",
                "TTFT ms", "TPOT p50/p90 ms", "load s", "peak RSS", "model size", "fit"):
        if measured or col not in ("load s", "peak RSS"):
            table.add_column(col, no_wrap=col in ("backend", "format", "provenance (where)"))

    def add_row(*cells: str) -> None:
        cells_ = list(cells)
        if not measured:
            del cells_[8:10]
        table.add_row(*cells_)

    preds = {(p["backend"], p["format"], p.get("depth", 0)): p
             for p in payload.get("predictions") or []}
    for e in payload.get("estimates") or []:
        key = tuple(map(str, (e["backend"], e["format"], e.get("depth", 0))))
        r = runs.get((e["backend"], e["format"], e.get("depth", 0)))
        if r is not None and r["status"] == "ok":
            tpot = r.get("tpot_ms") or {}
            add_row(*key, "measured (this host)", _stat(r["prefill_tokens_per_s"]),
                    _stat(r["decode_tokens_per_s"]), _stat(r["ttft_ms"], False),
                    f"{_num(tpot.get('p50'))} / {_num(tpot.get('p90'))}", _num(r.get("load_s")),
                    _si(r.get("peak_rss_bytes"), "B"), _si(r.get("model_size"), "B"), "")
        elif r is not None:
            colour = "yellow" if r["status"] == "skipped" else "red"
            add_row(*key, f"[{colour}]{r['status']}[/{colour}] (this host)", *(["-"] * 7), "")
        fit = e.get("fit") or {}
        prov = _prov(e, "decode_tokens_per_s", "analytic")
        add_row(*key, f"{prov} ({target['id']})" if target else prov,
                _cell(find_figure(e, "prefill_tokens_per_s")),
                _cell(find_figure(e, "decode_tokens_per_s")), _cell(find_figure(e, "ttft_ms")),
                _cell(find_figure(e, "tpot_ms")), "-", "-",
                _si(figure_value(e, "weight_bytes"), "B"),
                ("fits" if fit.get("fits") else "[red]does not fit[/red]") if fit else "")
        p = preds.get((e["backend"], e["format"], e.get("depth", 0)))
        if p is not None:
            add_row(*key, f"{_prov(p, 'decode_tokens_per_s', 'predicted')} ({p.get('target')})",
                    _cell(find_figure(p, "prefill_tokens_per_s")),
                    _cell(find_figure(p, "decode_tokens_per_s")),
                    _cell(find_figure(p, "ttft_ms")), _cell(find_figure(p, "tpot_ms")),
                    "-", "-", "-", "")
    console.print(table)
    deepest: dict[tuple[str, str], dict[str, Any]] = {}  # the binding fit: the deepest cache
    for e in payload.get("estimates") or []:
        k = (e["backend"], e["format"])
        if e.get("fit") and (k not in deepest or e.get("depth", 0) > deepest[k].get("depth", 0)):
            deepest[k] = e
    for e in deepest.values():
        fit = e["fit"]
        if fit:
            mct = fit.get("max_context_tokens")
            console.print(f"{e['backend']} {e['format']} on {target.get('id')}: "
                          f"{fit.get('verdict')} (context {fit.get('context_tokens')} tokens"
                          + (f"; longest context that fits: {mct} tokens" if mct is not None
                             else "") + ")", markup=False)
    for r in payload.get("runs") or []:
        if r["status"] != "ok":
            console.print(f"{r['backend']} {r['format']} d{r['n_depth']}: {r['status']}: "
                          f"{r['reason']}", markup=False)
    for n in payload.get("notes") or []:
        if n != model.get("note"):
            console.print(f"note: {n}", markup=False)


def _prov(d: dict[str, Any], name: str, default: str) -> str:
    from edgeprof.profilers.report.llm_outputs import find_figure

    f = find_figure(d, name)
    return (f or {}).get("provenance") or default


__all__ = ["LLM_COMMANDS", "build_llm_parser", "cmd_estimate_llm", "cmd_profile_llm",
           "cmd_recommend_llm", "is_llm_command", "main_llm", "render_choice", "render_llm"]
