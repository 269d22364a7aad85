"""One parser for both kinds of model (issue 19 item 2): profile, estimate, recommend and
optimize branch on the model's kind, not on argv; a flag of the other kind is one line and
exit 2 naming the flag and the kind it applies to; defaults that differ by kind are filled
after parsing; and no import circle inside edgeprof/cli."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from edgeprof.cli.main import build_parser, cmd_estimate, cmd_profile, cmd_recommend, main
from edgeprof.cli.common import resolve_kind


def parsed(*argv: str):
    parser = build_parser()
    args = parser.parse_args(list(argv))
    resolve_kind(parser, args)
    return args


@pytest.mark.parametrize("argv, flag, kind", [
    (["profile", "llm:smollm2-135m", "--batch-size", "2"], "--batch-size", "tensor models"),
    (["profile", "llm:smollm2-135m", "--trace"], "--trace", "tensor models"),
    (["profile", "llm:smollm2-135m", "--runs", "3"], "--runs", "tensor models"),
    (["estimate", "llm:smollm2-135m", "--input-shape", "1x8"], "--input-shape",
     "tensor models"),
    (["recommend", "llm:smollm2-135m", "--target", "raspberry_pi_5", "--latency-budget-ms",
      "5"], "--latency-budget-ms", "tensor models"),
    (["optimize", "llm:smollm2-135m", "--target", "raspberry_pi_5", "--html", "x.html"],
     "--html", "tensor models"),  # its --out takes either kind (issue 29, finding 14)
    (["profile", "model.onnx", "--prompt-tokens", "64"], "--prompt-tokens",
     "generative models"),
    (["profile", "builtin:small_cnn", "--repetitions", "3"], "--repetitions",
     "generative models"),
    (["estimate", "builtin:small_cnn", "--build", "b9307"], "--build", "generative models"),
    (["estimate", "builtin:small_cnn", "--device", "cpu"], "--device", "generative models"),
    (["recommend", "builtin:small_cnn", "--tokens-per-s", "5"], "--tokens-per-s",
     "generative models"),
    (["recommend", "builtin:small_cnn", "--backend", "tflite"], "--backend",
     "generative models"),
    (["optimize", "builtin:small_cnn", "--precision", "int8"], "--precision",
     "generative models"),
])
def test_a_flag_of_the_other_kind_is_one_line_exit_2(tmp_path, capsys, argv, flag, kind):
    with pytest.raises(SystemExit) as e:
        main([*argv])
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert f"{flag} applies to {kind}" in err and argv[1] in err


def test_a_short_flag_is_named_by_its_long_name(capsys):
    with pytest.raises(SystemExit):
        main(["optimize", "builtin:small_cnn", "-p", "int8"])
    assert "--precision applies to generative models" in capsys.readouterr().err


def test_defaults_differ_by_kind():
    t = parsed("profile", "builtin:small_cnn")
    assert (t.kind, t.func) == ("tensor", cmd_profile)
    assert (t.backend, t.precision, t.target, t.warmup, t.max_layers, t.isolate) == \
        ("torch_eager", "fp32", "host", None, 40, False)
    g = parsed("profile", "llm:smollm2-135m")
    assert (g.kind, g.func) == ("generative", cmd_profile)  # one command function per verb
    assert (g.backend, g.precision, g.target, g.warmup) == ("llama_cpp", None, None, 1)
    assert (g.prompt_tokens, g.gen_tokens, g.depth, g.repetitions) == (512, 128, [0], 5)
    assert g.batch_size is None and g.max_layers is None  # the other kind's: left unset
    e = parsed("estimate", "builtin:small_cnn")
    assert (e.func, e.backend, e.precision) == (cmd_estimate, None, "fp32")
    e = parsed("estimate", "model.gguf")
    assert (e.func, e.backend, e.device) == (cmd_estimate, "llama_cpp", None)
    r = parsed("recommend", "llm:smollm2-135m", "--target", "raspberry_pi_5")
    assert (r.func, r.backend, r.context) == (cmd_recommend, None, None)
    o = parsed("optimize", "builtin:small_cnn")
    assert (o.max_accuracy_drop, o.train_seconds, o.finetune_steps) == (1.0, 8.0, 200)
    assert o.compression == "magnitude,channels,2:4,channels_last"


def test_the_flags_both_kinds_take_parse_the_same():
    for model in ("builtin:small_cnn", "llm:smollm2-135m"):
        a = parsed("profile", model, "-b", "x,y", "-p", "fp16", "-t", "raspberry_pi_5",
                   "--threads", "2", "--warmup", "3", "--device", "cpu", "--json")
        assert (a.backend, a.precision, a.target, a.threads, a.warmup, a.device, a.json) == \
            ("x,y", "fp16", "raspberry_pi_5", 2, 3, "cpu", True)


def test_a_generative_device_with_an_index_is_one_line_exit_2(capsys):
    assert main(["profile", "llm:smollm2-135m", "--device", "cuda:1"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--device" in err and "cpu or cuda" in err


# -------------------------------------------------------------- no import circle in cli
CLI = Path(__file__).resolve().parents[2] / "edgeprof" / "cli"


def _imports(path: Path) -> set[str]:
    """The edgeprof.cli modules ``path`` imports, at module level or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if name.startswith("edgeprof.cli.") and (CLI / f"{name.split('.')[2]}.py").is_file():
                found.add(name.split(".")[2])
    return found - {path.stem}


def test_no_import_circle_inside_the_cli():
    graph = {p.stem: _imports(p) for p in CLI.glob("*.py") if p.stem != "__init__"}
    circles = []

    def visit(node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in path:
                circles.append(" -> ".join(path[path.index(nxt):] + [nxt]))
            else:
                visit(nxt, path + [nxt])

    for start in sorted(graph):
        visit(start, [start])
    assert circles == [], "import circles in edgeprof/cli:\n" + "\n".join(sorted(set(circles)))
    assert "main" not in graph["llm"] | graph["fleet"] | graph["common"]


@pytest.mark.parametrize("command", ["predict", "recommend", "optimize", "batch"])
def test_max_layers_is_only_where_a_layer_table_is_printed(capsys, command):
    """--max-layers was accepted, and did nothing, by commands that print no layer table."""
    argv = [command, "builtin:small_cnn", "--max-layers", "5"]
    if command == "predict":
        argv += ["--backend", "tflite"]
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert "unrecognized arguments: --max-layers 5" in capsys.readouterr().err


@pytest.mark.parametrize("verb", ["profile", "estimate", "predict", "recommend", "optimize"])
def test_each_verb_is_one_command_function_for_both_kinds(verb):
    """Issue 31 item 3: one CLI function per verb over the API; only the view of the answer
    is looked up by the model's kind."""
    extra = ["--backend", "tflite"] if verb == "predict" else []
    tensor = parsed(verb, "builtin:small_cnn", "--target", "raspberry_pi_5", *extra)
    extra = ["--backend", "llama_cpp"] if verb == "predict" else []
    generative = parsed(verb, "llm:smollm2-135m", "--target", "raspberry_pi_5", *extra)
    assert tensor.func is generative.func
    assert (tensor.kind, generative.kind) == ("tensor", "generative")
