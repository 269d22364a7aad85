"""Workloads are registered objects: the built-in two come through the plugin hook, a third
is one plugin file that ``measure()`` runs on the same runners with the same statuses, and
the code that runs requests never tests the kind."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from edgeprof.core.errors import PluginError, UserError
from edgeprof.core.plugins import PluginManager
from edgeprof.core.requests import MeasureRequest
from edgeprof.core.results import BenchmarkResult, GenerativeRunRecord
from edgeprof.core.workload import Workload, workload_of

ECHO = '''
    from dataclasses import asdict, dataclass, field

    from edgeprof import Backend, Capabilities, hookimpl
    from edgeprof.core.workload import Workload


    @dataclass
    class EchoRecord:
        backend: str
        model: str
        status: str = "failed"
        reason: str | None = None
        value: int | None = None
        notes: list = field(default_factory=list)

        @property
        def ok(self):
            return self.status == "ok"

        def fail(self, status, reason):
            self.status, self.reason, self.value = status, reason, None
            return self

        def to_dict(self):
            return asdict(self)

        @classmethod
        def from_dict(cls, d):
            return cls(**d)


    class EchoWorkload(Workload):
        name = "echo"
        describe = "strings to count"
        record_type = EchoRecord

        def blank_record(self, request, backend_cls=None):
            return EchoRecord(request.backend, request.model_name)

        def unavailable_record(self, request, backend_cls, availability):
            return self.blank_record(request).fail("unavailable", availability.reason)

        def run_here(self, request, backend_cls, *, registry=None, process="inline",
                     progress=None):
            return EchoRecord(request.backend, request.model_name, "ok",
                              value=backend_cls.count(request.model), notes=[process])

        def default_timeout_s(self, request):
            return 60.0


    class EchoBackend(Backend):
        name = "echo_rt"
        workload = "echo"
        capabilities = Capabilities(precisions=("fp32",))

        @classmethod
        def count(cls, text):
            if text == "boom":
                raise RuntimeError("the runtime exploded")
            return len(text)


    @hookimpl
    def edgeprof_register_workloads():
        return [EchoWorkload]


    @hookimpl
    def edgeprof_register_backends():
        return [EchoBackend]
'''


def _plugins(tmp_path: Path, body: str = ECHO, name: str = "echo") -> Path:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))
    toml = tmp_path / "plugins.toml"
    toml.write_text(f'[plugins]\nmodules = ["{name}.py"]\n')
    return toml


def test_the_builtin_workloads_are_registered_through_the_hook():
    reg = PluginManager(use_env=False, entry_points=False).build_registry()
    assert set(reg.workloads) >= {"tensor", "generate"}
    assert reg.workloads["tensor"].record_type is BenchmarkResult
    assert reg.workloads["generate"].record_type is GenerativeRunRecord
    for name, w in reg.workloads.items():
        assert isinstance(w, Workload) and w.name == name and w.describe
    llama = reg.backends["llama_cpp"].cls
    assert workload_of(llama, reg) is reg.workloads["generate"]
    assert workload_of(reg.backends["onnxruntime"].cls, reg) is reg.workloads["tensor"]


def test_a_third_workload_is_one_plugin_file_measured_like_the_others(tmp_path):
    from edgeprof.profilers.measure.measure import measure

    toml = _plugins(tmp_path)
    reg = PluginManager(toml, use_env=False, entry_points=False).build_registry()
    ok = measure(MeasureRequest(backend="echo_rt", model="hello", plugins_file=str(toml)),
                 registry=reg)
    assert type(ok).__name__ == "EchoRecord" and ok.ok and ok.value == 5
    # the backend's own failure becomes the status by the one rule, on the blank record
    bad = measure(MeasureRequest(backend="echo_rt", model="boom", plugins_file=str(toml)),
                  registry=reg)
    assert bad.status == "failed" and "the runtime exploded" in bad.reason
    assert bad.value is None


def test_a_third_workload_runs_in_the_isolated_worker_too(tmp_path):
    from edgeprof.core.backend import RunConfig
    from edgeprof.profilers.measure.measure import measure

    toml = _plugins(tmp_path)
    reg = PluginManager(toml, use_env=False, entry_points=False).build_registry()
    record = measure(MeasureRequest(backend="echo_rt", model="four", plugins_file=str(toml),
                                    config=RunConfig(isolate=True)), registry=reg)
    assert type(record).__name__ == "EchoRecord", record
    assert record.ok and record.value == 4
    assert record.notes[0] == "isolated"  # run_here in the worker, its record sent back


def test_a_request_of_another_workload_than_its_backends_is_one_line(tmp_path):
    from edgeprof.profilers.measure.measure import measure

    toml = _plugins(tmp_path)
    reg = PluginManager(toml, use_env=False, entry_points=False).build_registry()
    with pytest.raises(UserError, match="runs strings to count, not a tensor request"):
        measure(MeasureRequest(backend="echo_rt", model="x", workload="tensor",
                               plugins_file=str(toml)), registry=reg)


def test_a_backend_naming_an_unregistered_workload_says_what_to_add(tmp_path):
    from edgeprof.profilers.measure.measure import measure

    body = ECHO.replace("return [EchoWorkload]", "return []")
    toml = _plugins(tmp_path, body, "echo_alone")
    reg = PluginManager(toml, use_env=False, entry_points=False).build_registry()
    with pytest.raises(PluginError, match="no plugin registers the workload 'echo'.*plugins.toml"):
        measure(MeasureRequest(backend="echo_rt", model="x", plugins_file=str(toml)),
                registry=reg)


def test_two_plugins_registering_one_workload_name_is_an_error_naming_both(tmp_path):
    (tmp_path / "a.py").write_text(textwrap.dedent(ECHO))
    (tmp_path / "b.py").write_text(textwrap.dedent(ECHO).replace('name = "echo_rt"',
                                                                 'name = "echo_rt2"'))
    toml = tmp_path / "plugins.toml"
    toml.write_text('[plugins]\nmodules = ["a.py", "b.py"]\n')
    with pytest.raises(PluginError, match="workload 'echo' is registered by two plugins"):
        PluginManager(toml, use_env=False, entry_points=False).build_registry()


def test_the_measure_package_never_tests_the_kind():
    """measure(), the runners, the fleet and the workloads themselves ask the workload;
    no module of the measure package tests the kind."""
    root = Path(__file__).resolve().parents[2] / "edgeprof" / "profilers" / "measure"
    kind_test = re.compile(r'workload\s*[!=]=\s*"|is_generative|isinstance\([^)]*'
                           r'(GenerativeRunRecord|BenchmarkResult)\)')
    modules = sorted(root.glob("*.py"))
    assert {"measure.py", "runners.py", "fleet.py", "worker.py", "generate.py"} <= {
        p.name for p in modules}
    for path in modules:
        hits = [line for line in path.read_text().splitlines() if kind_test.search(line)]
        assert not hits, (path.name, hits)
