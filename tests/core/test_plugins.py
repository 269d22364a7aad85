"""The plugin manager: default list, user files, entry points, clashes and typos."""

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


def test_misspelled_hook_is_caught(tmp_path):
    write_plugin(tmp_path, "typo", """
        from edgeprof import hookimpl

        @hookimpl
        def edgeprof_register_backend():
            return []
    """)
    toml = tmp_path / "plugins.toml"
    toml.write_text('[plugins]\nmodules = ["typo.py"]\n')
    with pytest.raises(PluginError, match="edgeprof_register_backend"):
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


def test_entry_point_plugins_load(monkeypatch, tmp_path):
    import importlib.metadata as md
    import sys

    write_plugin(tmp_path, "ep_plugin", FAKE_BACKEND.format(name="ep_runtime"))
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = md.EntryPoint(name="ep_plugin", value="ep_plugin", group="edgeprof")
    real = md.entry_points

    def fake_entry_points(**kw):
        if kw.get("group") == "edgeprof":
            return md.EntryPoints([ep])
        return real(**kw)

    monkeypatch.setattr(md, "entry_points", fake_entry_points)
    reg = PluginManager(use_env=False).build_registry()
    assert reg.backends["ep_runtime"].plugin == "ep_plugin"
    sys.modules.pop("ep_plugin", None)


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
