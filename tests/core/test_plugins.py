"""The plugin manager: default list, user files, entry points, clashes and typos; hooks are
called by pluggy (tryfirst overrides, wrappers observe)."""

from __future__ import annotations

import textwrap

import pytest

from edgeprof.core.errors import ConfigError, PluginError, UnknownNameError
from edgeprof.core.plugins import PluginManager, default_plugins_file, read_plugins_file


def write_plugin(tmp_path, name: str, body: str):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    return path


FAKE_BACKEND = """
    from edgeprof import Backend, Capabilities, hookimpl

    class MyBackend(Backend):
        name = "{name}"
        capabilities = Capabilities(precisions=("fp32",))

    @hookimpl
    def edgeprof_register_backends():
        return [MyBackend]
"""


def test_default_plugins_file_lists_builtins():
    modules = read_plugins_file(default_plugins_file())
    assert "edgeprof.backends.torch_eager" in modules
    assert "edgeprof.backends.tensorrt" in modules


def test_builtins_register_through_the_same_hooks():
    reg = PluginManager(use_env=False).build_registry()
    assert reg.backends["torch_eager"].plugin == "edgeprof.backends.torch_eager"
    assert reg.backends["tensorrt"].plugin == "edgeprof.backends.tensorrt"
    assert {"small_cnn", "mlp", "small_resnet", "small_mobilenet", "tiny_transformer"} <= set(reg.models)


def test_user_plugin_file_with_relative_py_module(tmp_path):
    write_plugin(tmp_path, "mine", FAKE_BACKEND.format(name="my_runtime"))
    toml = tmp_path / "plugins.toml"
    toml.write_text('[plugins]\nmodules = ["mine.py"]\n')
    reg = PluginManager(toml, use_env=False).build_registry()
    assert "my_runtime" in reg.backends
    assert "torch_eager" in reg.backends  # defaults still load
    assert reg.backends["my_runtime"].plugin == str(tmp_path / "mine.py")


def test_env_var_names_the_user_file(tmp_path, monkeypatch):
    write_plugin(tmp_path, "envplug", FAKE_BACKEND.format(name="env_runtime"))
    toml = tmp_path / "plugins.toml"
    toml.write_text('[plugins]\nmodules = ["envplug.py"]\n')
    monkeypatch.setenv("EDGEPROF_PLUGINS", str(toml))
    assert "env_runtime" in PluginManager().build_registry().backends


def test_plugins_toml_in_cwd_is_not_picked_up(tmp_path, monkeypatch):
    write_plugin(tmp_path, "cwdplug", FAKE_BACKEND.format(name="cwd_runtime"))
    (tmp_path / "plugins.toml").write_text('[plugins]\nmodules = ["cwdplug.py"]\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EDGEPROF_PLUGINS", raising=False)
    assert "cwd_runtime" not in PluginManager().build_registry().backends


def test_two_plugins_registering_one_name_is_an_error_naming_both(tmp_path):
    write_plugin(tmp_path, "clash", FAKE_BACKEND.format(name="torch_eager"))
    toml = tmp_path / "plugins.toml"
    toml.write_text('[plugins]\nmodules = ["clash.py"]\n')
    with pytest.raises(PluginError) as e:
        PluginManager(toml, use_env=False).build_registry()
    assert "edgeprof.backends.torch_eager" in str(e.value) and "clash" in str(e.value)
    assert "tryfirst" in str(e.value)  # says how to override on purpose


def test_two_tryfirst_registrations_of_one_name_are_an_error_too(tmp_path):
    for name in ("first_a", "first_b"):
        write_plugin(tmp_path, name, FAKE_BACKEND.format(name="twin").replace(
            "@hookimpl", "@hookimpl(tryfirst=True)"))
    toml = tmp_path / "plugins.toml"
    toml.write_text('[plugins]\nmodules = ["first_a.py", "first_b.py"]\n')
    with pytest.raises(PluginError, match="backend 'twin' is registered by two plugins") as e:
        PluginManager(toml, use_env=False).build_registry()
    assert "first_a" in str(e.value) and "first_b" in str(e.value)


def test_a_builtin_model_name_registered_twice_names_both(tmp_path):
    write_plugin(tmp_path, "models_clash", """
        from edgeprof import hookimpl

        @hookimpl
        def edgeprof_register_models():
            return {"small_cnn": "somewhere:make"}
    """)
    toml = tmp_path / "plugins.toml"
    toml.write_text('[plugins]\nmodules = ["models_clash.py"]\n')
    with pytest.raises(PluginError, match="model 'builtin:small_cnn'") as e:
        PluginManager(toml, use_env=False).build_registry()
    assert "edgeprof.zoo" in str(e.value) and "models_clash" in str(e.value)


OVERRIDE = """
    from edgeprof import Backend, Capabilities, PreparedModel, hookimpl

    class MyEager(Backend):
        name = "torch_eager"
        description = "torch_eager, as my plugin runs it"
        capabilities = Capabilities(precisions=("fp32",), model_formats=("torch",))

        def prepare(self, model, config, inputs):
            return PreparedModel(run=lambda xs: xs, inputs=inputs, runtime="my_override",
                                 runtime_version="1.0", executed_precision=config.precision)

    @hookimpl({marker})
    def edgeprof_register_backends():
        return [MyEager]
"""


@pytest.mark.parametrize("marker, wins", [("tryfirst=True", True), ("trylast=True", False)])
def test_a_tryfirst_plugin_overrides_a_builtin_backend(tmp_path, marker, wins):
    path = write_plugin(tmp_path, "override", OVERRIDE.format(marker=marker))
    toml = tmp_path / "plugins.toml"
    toml.write_text('[plugins]\nmodules = ["override.py"]\n')
    reg = PluginManager(toml, use_env=False, entry_points=False).build_registry()
    entry = reg.backends["torch_eager"]
    builtin = "edgeprof.backends.torch_eager"
    if wins:
        assert entry.cls.__name__ == "MyEager" and entry.plugin == str(path)
        assert reg.overrides == [("backend", "torch_eager", str(path), builtin)]
    else:  # a trylast registration is a default that the built-in (plain) outranks
        assert entry.plugin == builtin
        assert reg.overrides == [("backend", "torch_eager", builtin, str(path))]
    assert list(reg.backends)[0] == "torch_eager"  # the listing keeps plugins.toml's order


def test_profile_runs_the_overriding_backend_class(tmp_path, monkeypatch):
    import edgeprof

    monkeypatch.delenv("EDGEPROF_PLUGINS", raising=False)
    write_plugin(tmp_path, "override", OVERRIDE.format(marker="tryfirst=True"))
    toml = tmp_path / "plugins.toml"
    toml.write_text('[plugins]\nmodules = ["override.py"]\n')
    report = edgeprof.profile("builtin:small_cnn", target="raspberry_pi_4",
                              backends=["torch_eager"], precisions=["fp32"], plugins=toml,
                              run_options={"runs": 20, "min_time_s": 0.01, "max_time_s": 0.5})
    (run,) = report.runs
    assert run.status == "ok", run.benchmark.reason
    assert run.benchmark.runtime == "my_override"


def test_hook_wrappers_observe_registration_and_loader_calls(tmp_path):
    write_plugin(tmp_path, "observer", """
        from edgeprof import Backend, hookimpl

        SEEN = []

        class Extra(Backend):
            name = "extra"

        @hookimpl(wrapper=True)
        def edgeprof_register_backends():
            lists = yield
            SEEN.append(("backends", sorted(c.name for classes in lists for c in classes)))
            return [[c for c in classes if c.name != "tensorrt"] for classes in lists] + [[Extra]]

        @hookimpl(wrapper=True)
        def edgeprof_load_model(spec):
            handle = yield
            SEEN.append(("load", spec, handle.format if handle is not None else None))
            return handle
    """)
    toml = tmp_path / "plugins.toml"
    toml.write_text('[plugins]\nmodules = ["observer.py"]\n')
    pm = PluginManager(toml, use_env=False, entry_points=False)
    seen = pm.pm.get_plugin(str(tmp_path / "observer.py")).SEEN
    reg = pm.build_registry()
    assert seen[0][0] == "backends" and {"torch_eager", "tensorrt"} <= set(seen[0][1])
    assert "tensorrt" not in reg.backends  # the wrapper's answer is the registry's
    # the wrapper rebuilt every list; each class is still told by the plugin that returned it
    assert reg.backends["onnxruntime"].plugin == "edgeprof.backends.onnxruntime"
    assert reg.backends["extra"].plugin == f"a hook wrapper ({tmp_path / 'observer.py'})"
    assert reg.hook is reg.pm.hook is pm.hook

    from edgeprof.core.models import resolve_model

    model = tmp_path / "tiny.onnx"
    _tiny_onnx(model)
    handle = resolve_model(str(model), registry=reg)
    assert seen[-1] == ("load", str(model), "onnx") and handle.input_specs[0].shape == (1, 4)


def _tiny_onnx(path) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "tiny",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph), str(path))


@pytest.mark.parametrize("hook", ["edgeprof_register_backend", "edgeprof_load_models",
                                  "edgeprof_read_graphs"])
def test_misspelled_hook_is_caught(tmp_path, hook):
    write_plugin(tmp_path, "typo", f"""
        from edgeprof import hookimpl

        @hookimpl(tryfirst=True)
        def {hook}():
            return []
    """)
    toml = tmp_path / "plugins.toml"
    toml.write_text('[plugins]\nmodules = ["typo.py"]\n')
    with pytest.raises(PluginError, match=hook):
        PluginManager(toml, use_env=False)


@pytest.mark.parametrize("text, field", [
    ('[plugins]\nmodules = ["a"]\nextra = 1\n', "plugins.extra"),
    ('[plugin]\nmodules = []\n', "plugin"),
    ('[plugins]\nmodules = "a"\n', "plugins.modules"),
])
def test_bad_plugins_toml_names_file_and_field(tmp_path, text, field):
    toml = tmp_path / "plugins.toml"
    toml.write_text(text)
    with pytest.raises(ConfigError) as e:
        read_plugins_file(toml)
    assert str(toml) in str(e.value) and field in str(e.value)


def test_malformed_toml_names_the_file(tmp_path):
    toml = tmp_path / "plugins.toml"
    toml.write_text("[plugins\nmodules = [")
    with pytest.raises(ConfigError, match="malformed TOML") as e:
        read_plugins_file(toml)
    assert str(toml) in str(e.value)


def test_plugin_that_fails_to_import_says_which(tmp_path):
    toml = tmp_path / "plugins.toml"
    toml.write_text('[plugins]\nmodules = ["no_such_module_xyz"]\n')
    with pytest.raises(PluginError, match="no_such_module_xyz"):
        PluginManager(toml, use_env=False)


def test_an_installed_entry_point_plugin_loads(monkeypatch, tmp_path):
    """A real distribution on sys.path (a .dist-info with entry_points.txt), found and loaded
    through importlib.metadata exactly as an installed package is."""
    import sys

    site = tmp_path / "site"
    site.mkdir()
    write_plugin(site, "ep_demo_plugin", FAKE_BACKEND.format(name="ep_runtime"))
    info = site / "edgeprof_ep_demo-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: edgeprof-ep-demo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[edgeprof]\nep_demo = ep_demo_plugin\n")
    monkeypatch.syspath_prepend(str(site))
    try:
        pm = PluginManager(use_env=False)
        reg = pm.build_registry()
    finally:
        sys.modules.pop("ep_demo_plugin", None)
    assert reg.backends["ep_runtime"].plugin == "ep_demo"
    assert dict(reg.plugins)["ep_demo"] == "entry point ep_demo_plugin (edgeprof-ep-demo 0.1)"
    assert "torch_eager" in reg.backends


def test_a_broken_entry_point_names_itself(monkeypatch, tmp_path):
    info = tmp_path / "edgeprof_broken-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: edgeprof-broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[edgeprof]\nbroken = no_such_module_for_ep\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError, match="'broken' from entry point 'no_such_module_for_ep'"):
        PluginManager(use_env=False)


def test_unknown_backend_suggests_the_closest():
    reg = PluginManager(use_env=False).build_registry()
    with pytest.raises(UnknownNameError) as e:
        reg.backend("torch_eagr")
    assert e.value.closest == "torch_eager"
    assert "torch_eager" in str(e.value)


def test_every_hookspec_is_documented():
    import inspect

    from edgeprof.core import hookspecs

    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction):
        if name.startswith("edgeprof_"):
            assert fn.__doc__ and len(fn.__doc__.strip()) > 40, f"{name} is undocumented"
