"""The layering of the package, checked by import-linter (contracts in pyproject.toml)."""

import shutil
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_import_linter_contracts_hold():
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe, "import-linter is a dev dependency: reinstall with `make test`"
    done = subprocess.run([exe, "--config", str(ROOT / "pyproject.toml")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


#: top-level modules outside the layers on purpose: the package's entry points
OUTSIDE = {"__init__", "__main__", "_version"}


def test_every_part_of_the_package_is_in_the_layering_contract():
    """A new top-level package (as zoo once was) must take a place in the layers."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract = config["tool"]["importlinter"]["contracts"][0]
    layered = {name.strip().removeprefix("edgeprof.")
               for layer in contract["layers"] for name in layer.replace(":", "|").split("|")}
    pkg = ROOT / "edgeprof"
    parts = {p.stem for p in pkg.glob("*.py")} | {
        p.name for p in pkg.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert parts - OUTSIDE - layered == set()
    assert "zoo" in layered
