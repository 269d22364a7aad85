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


def test_no_import_circles_between_modules():
    """No two modules import each other, directly or round a circle, even through imports
    inside functions (those run late, but a circle still means the two are one piece split
    in the wrong place). grimp is import-linter's own graph."""
    import grimp

    graph = grimp.build_graph("edgeprof", exclude_type_checking_imports=True)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    # Tarjan's strongly connected components, iteratively
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))
    assert circles == []


def test_no_module_imports_another_modules_private_names():
    """A name another module needs is public where it is defined (issue 31: 149 such imports
    once, split by file size rather than by concept); ``_name`` stays its module's own."""
    import ast

    found = []
    for path in sorted((ROOT / "edgeprof").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("edgeprof"):
                found += [f"{path.relative_to(ROOT)}: {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    assert found == []
