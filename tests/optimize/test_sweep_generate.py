"""Generative sweeps (issue 19 item 4): a ``[generate]`` table in SWEEP.toml runs
llama-bench-shaped jobs (model x target x backend x format x threads x prompt x gen x depth)
through the same ``measure()`` as ``profile llm:X``, stored row by row and resumable, with
llama-bench's columns in results.csv, the fastest decode in best.csv and a section in
report.html. Kept small: smollm2-135m (random weights, its GGUF built once into the session's
cache), prompt 16, gen 4, two repetitions."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from edgeprof.cli.main import main
from edgeprof.optimize.sweep import BEST_COLUMNS, COLUMNS, GEN_COLUMNS, load_sweep


def _llama_cpp() -> bool:
    from edgeprof.core.plugins import get_registry

    entry = get_registry().backends.get("llama_cpp")
    return entry is not None and entry.cls.availability().available


needs_llama = pytest.mark.skipif(not _llama_cpp(), reason="llama-cpp-python is not installed")

GENERATE = """
[generate]
models = ["llm:smollm2-135m"]
backends = ["llama_cpp"]
formats = ["q4_0"]
threads = [1, 2]
prompt_tokens = 16
gen_tokens = 4
depths = [0]
repetitions = 2
"""

TENSOR = """
models = ["builtin:small_cnn"]
backends = ["onnxruntime"]
precisions = ["fp32"]
[run]
runs = 5
max_time = 0.3
"""


def write(tmp_path: Path, text: str, name: str = "sweep.toml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text), encoding="utf-8")
    return p


def run_json(args, capsys) -> tuple[int, dict, str]:
    code = main(["sweep", *map(str, args), "--json"])
    captured = capsys.readouterr()
    doc = json.loads(captured.out) if captured.out.strip() else {}
    return code, doc, captured.err


# ------------------------------------------------------------------------ the file
def test_the_generate_table_becomes_one_job_per_coordinate(tmp_path):
    spec = load_sweep(write(tmp_path, 'targets = ["host", "raspberry_pi_5"]\n' + GENERATE))
    jobs = spec.jobs()
    assert len(jobs) == 2 * 2  # targets x threads (one model, pair, length and depth)
    keys = {j.key for j in jobs}
    assert "llm:smollm2-135m|host|llama_cpp|q4_0|t1|pp16|tg4|d0" in keys
    assert len(keys) == len(jobs)
    assert spec.settings()["generate"] == {"repetitions": 2, "warmup": 1}
    assert spec.models == []  # a purely generative sweep needs no tensor grid


@pytest.mark.parametrize("table, field", [
    ('modles = ["llm:smollm2-135m"]', "generate.modles"),
    ('formats = ["fp32"]', "generate.formats"),
    ('backends = ["onnxruntime"]', "generate.backends"),
    ('prompt_tokens = 0', "generate.prompt_tokens"),
    ('depths = [-1]', "generate.depths"),
    ('repetitions = "two"', "generate.repetitions"),
    ('models = ["llm:no-such-model"]', "generate.models"),
    ('targets = ["no_such_board"]', "generate.targets"),
])
def test_a_bad_key_or_value_in_generate_is_exit_2_naming_it(tmp_path, capsys, table, field):
    base = {"models": 'models = ["llm:smollm2-135m"]', "backends": 'backends = ["llama_cpp"]',
            "formats": 'formats = ["q4_0"]'}
    key = table.split(" ", 1)[0]
    base[key] = table
    body = "\n".join(base.values())
    path = write(tmp_path, f'targets = ["host"]\n[generate]\n{body}\n')
    code = main(["sweep", str(path)])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and field in err and "sweep.toml" in err, err
    assert not (tmp_path / "sweep.sqlite").exists()


def test_a_generative_model_in_the_tensor_grid_is_exit_2(tmp_path, capsys):
    path = write(tmp_path, 'models = ["llm:smollm2-135m"]\ntargets = ["host"]\n'
                           'backends = ["onnxruntime"]\nprecisions = ["fp32"]\n')
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    assert "[generate]" in err and "models" in err


# ------------------------------------------------------------- one job type, old keys
#: the keys a sweep wrote before tensor and generative jobs were one Job type: a store
#: written then must resume now
OLD_KEYS = ["builtin:small_cnn|host|onnxruntime|fp32|b1",
            "builtin:small_cnn|host|onnxruntime|fp32|b4",
            "llm:smollm2-135m|host|llama_cpp|q4_0|tauto|pp16|tg4|d0",
            "llm:smollm2-135m|host|llama_cpp|q4_0|tauto|pp16|tg4|d8"]
MIXED = """targets = ["host"]
models = ["builtin:small_cnn"]
backends = ["onnxruntime"]
precisions = ["fp32"]
batch_sizes = [1, 4]
[generate]
models = ["llm:smollm2-135m"]
backends = ["llama_cpp"]
formats = ["q4_0"]
prompt_tokens = 16
gen_tokens = 4
depths = [0, 8]
"""


def test_one_job_type_keeps_the_old_keys(tmp_path):
    from edgeprof.optimize.sweep import Job

    jobs = load_sweep(write(tmp_path, MIXED)).jobs()
    assert [j.key for j in jobs] == OLD_KEYS
    assert [j.workload for j in jobs] == ["tensor"] * 2 + ["generate"] * 2
    assert jobs[1].batch_size == 4 and jobs[2].batch_size is None
    assert jobs[3].opts == {"threads": None, "prompt_tokens": 16, "gen_tokens": 4, "depth": 8}
    assert Job("m.onnx", "pi", "onnxruntime", "fp32").key == "m.onnx|pi|onnxruntime|fp32|bmodel"
    assert Job("m", "pi", "llama_cpp", "q4_0", "generate", {
        "threads": 2, "prompt_tokens": 512, "gen_tokens": 128, "depth": 0}).key == \
        "m|pi|llama_cpp|q4_0|t2|pp512|tg128|d0"
    with pytest.raises(ValueError):
        Job("m.onnx", "pi", "onnxruntime", "fp32", "tensor", {"threads": 2})


def test_a_store_written_with_the_old_keys_resumes_skipping_them(tmp_path):
    from types import SimpleNamespace

    from edgeprof.core.results import BenchmarkResult, GenerativeRunRecord
    from edgeprof.optimize.sweep import SweepStore, run_sweep

    path = write(tmp_path, MIXED)
    store = SweepStore(tmp_path / "sweep.sqlite")
    for key in OLD_KEYS:  # as the old code stored them: its key strings, its columns
        model, target, backend, precision, *rest = key.split("|")
        if rest[0].startswith("b"):
            bs = int(rest[0][1:])
            rec = BenchmarkResult(backend=backend, model=model, requested_precision=precision,
                                  executed_precision=None, status="failed", reason="old",
                                  batch_size=bs)
        else:
            bs, rec = None, GenerativeRunRecord(backend=backend, model="smollm2-135m",
                                                format=precision, status="failed",
                                                reason="old")
        job = SimpleNamespace(key=key, model=model, target=target, backend=backend,
                              precision=precision, batch_size=bs)
        assert store.append(job, rec, board="local", attempts=1)
    store.close()
    report = run_sweep(path, resume=True)
    assert (report.total, report.skipped, report.ran) == (4, 4, 0)  # nothing measured again
    assert list(report.frame["job_key"]) == OLD_KEYS
    assert list(report.frame["workload"]) == ["tensor"] * 2 + ["generate"] * 2
    assert list(report.frame["n_depth"][2:]) == [0, 8]  # read back from the old keys


# --------------------------------------------------------------------------- running
@needs_llama
def test_a_generative_sweep_runs_writes_its_tables_and_resumes(tmp_path, capsys):
    path = write(tmp_path, 'targets = ["host"]\n' + GENERATE)
    code, doc, err = run_json([path], capsys)
    assert code == 0, err
    assert doc["total"] == 2 and doc["ran"] == 2 and doc["skipped"] == 0
    out = tmp_path / "sweep_out"
    results = pd.read_csv(out / "results.csv")
    assert list(results.columns) == COLUMNS and set(GEN_COLUMNS) <= set(results.columns)
    assert list(results["status"]) == ["ok", "ok"], results[["status", "reason"]]
    assert set(results["workload"]) == {"generate"}
    assert sorted(results["n_threads"]) == [1, 2]
    assert set(results["n_prompt"]) == {16} and set(results["n_gen"]) == {4}
    assert set(results["n_depth"]) == {0} and set(results["repetitions"]) == {2}
    for c in ("pp_median_ts", "tg_median_ts", "ttft_ms", "tpot_ms"):
        assert (results[c] > 0).all(), c
    assert results["pp_stddev_ts"].notna().all() and results["tg_stddev_ts"].notna().all()
    assert results["measured_on"].str.contains("local").all()
    assert results["batch_size"].isna().all() and results["median_ms"].isna().all()

    best = pd.read_csv(out / "best.csv")
    assert list(best.columns) == BEST_COLUMNS and len(best) == 1
    b = best.iloc[0]
    assert b["workload"] == "generate" and b["ok_jobs"] == 2
    assert b["tg_median_ts"] == results["tg_median_ts"].max()
    assert b["best_prefill_pp_median_ts"] == results["pp_median_ts"].max()
    assert b["runner_up"].startswith("llama_cpp q4_0 t")

    html = (out / "report.html").read_text(encoding="utf-8")
    assert 'id="generative-table"' in html and 'data-rows="2"' in html
    assert 'id="generative-best-table"' in html and "smollm2-135m" in html

    # without --resume a store that holds results is refused; with it nothing is measured
    assert main(["sweep", str(path)]) == 2
    assert "--resume" in capsys.readouterr().err
    code, doc, err = run_json([path, "--resume"], capsys)
    assert code == 0, err
    assert doc["ran"] == 0 and doc["skipped"] == 2
    assert len(doc["results"]) == 2
    again = pd.read_csv(out / "results.csv")
    assert list(again["job_key"]) == list(results["job_key"])
    assert list(again["tg_median_ts"]) == list(results["tg_median_ts"])


@needs_llama
def test_a_resumed_sweep_runs_only_the_new_jobs(tmp_path, capsys):
    path = write(tmp_path, 'targets = ["host"]\n' + GENERATE.replace("threads = [1, 2]",
                                                                     "threads = [1]"))
    code, doc, err = run_json([path], capsys)
    assert code == 0 and doc["ran"] == 1, err
    path.write_text(path.read_text().replace("threads = [1]", "threads = [1, 2]"))
    code, doc, err = run_json([path, "--resume"], capsys)
    assert code == 0, err
    assert doc["skipped"] == 1 and doc["ran"] == 1 and len(doc["results"]) == 2
    # a resumed sweep must measure the same way
    path.write_text(path.read_text().replace("repetitions = 2", "repetitions = 3"))
    assert main(["sweep", str(path), "--resume"]) == 2
    assert "run settings" in capsys.readouterr().err


@needs_llama
def test_a_mixed_sweep_runs_tensor_and_generative_jobs(tmp_path, capsys):
    path = write(tmp_path, 'targets = ["host"]\n' + TENSOR + GENERATE.replace(
        "threads = [1, 2]", "threads = [2]"))
    code, doc, err = run_json([path], capsys)
    assert code == 0, err
    assert doc["total"] == 2 and doc["ran"] == 2
    results = pd.read_csv(tmp_path / "sweep_out" / "results.csv")
    by = {w: r for w, r in zip(results["workload"], results.to_dict(orient="records"))}
    assert set(by) == {"tensor", "generate"}
    assert by["tensor"]["status"] == "ok" and by["tensor"]["median_ms"] > 0
    assert by["tensor"]["batch_size"] == 1 and pd.isna(by["tensor"]["n_prompt"])
    assert by["generate"]["status"] == "ok" and by["generate"]["tg_median_ts"] > 0
    best = pd.read_csv(tmp_path / "sweep_out" / "best.csv")
    assert sorted(best["workload"]) == ["generate", "tensor"]
    html = (tmp_path / "sweep_out" / "report.html").read_text(encoding="utf-8")
    assert 'data-chart="heatmap"' in html and 'id="generative-table"' in html
    # the human rendering has both best tables
    assert main(["sweep", str(path), "--resume"]) == 0
    out = capsys.readouterr().out
    assert "best configuration per model and target" in out
    assert "fastest decode per generative model" in out
