"""Issue 31's measures of "one house": where the code tests the kind of model (tensor or
generative) instead of asking a registered workload, per part of the package; private names
imported across modules; CLI commands bound to a second function for the other kind; lines of
code. Prints a table; reads the source only.

    .venv/bin/python benchmarks/house_measures.py [--list]

A *branch site* is a line of code (not a comment, docstring or ``def``) that decides on the
kind: a call of ``is_generative`` / ``is_llm_spec`` / ``backend_workload`` / ``model_kind`` /
``document_workload``, a comparison of a workload or kind with a literal (``workload ==
"generate"``) or with the kinds' names (``kind == GENERATIVE``), or an ``isinstance`` test of
a kind's own type (``GenerativeRunRecord``, ``BenchmarkResult``, ``LLMModel``, ``LLMSpec``,
``GenJob``, ``GenerativeComparison``). The front door whose job is that decision is counted
apart: ``core/kinds.py`` (``model_kind``, a model's kind), ``api/kinds.py`` (the verbs that
route on it) and ``profilers/report/family.py`` (``document_workload``, a profile.json's).
"""

from __future__ import annotations

import argparse
import ast
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "edgeprof"
KIND_TYPES = ("GenerativeRunRecord", "BenchmarkResult", "LLMModel", "LLMSpec", "GenJob",
              "GenerativeComparison")
CALLS = re.compile(r"\b(is_generative|is_llm_spec|backend_workload|model_kind|"
                   r"document_workload)\(")
COMPARE = re.compile(r"""(workload|kind)\w*\s*[!=]=\s*(["'](generate|tensor|generative)["']"""
                     r"|GENERATIVE\b|TENSOR\b)")
FRONT = ("core/kinds.py", "api/kinds.py", "profilers/report/family.py")
ISINSTANCE = re.compile(r"isinstance\([^)]*\b(" + "|".join(KIND_TYPES) + r")\b")


def code_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of lines that are code: docstrings and comments left out."""
    text = path.read_text(encoding="utf-8")
    skip: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant) \
                and isinstance(node.value.value, str):
            skip.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        s = line.split("#", 1)[0].strip()
        if i in skip or not s or s.startswith(("def ", "class ", "from ", "import ")):
            continue
        out.append((i, s))
    return out


def area(path: Path) -> str:
    rel = path.relative_to(PKG)
    if rel.as_posix() in FRONT:
        return "front door (" + ", ".join(FRONT) + ")"
    if rel.parts[0] == "profilers":
        return "/".join(rel.parts[:2])
    if rel.parts[0] == "optimize" and rel.name.startswith("sweep"):
        return "optimize/sweep*"
    return rel.parts[0] if len(rel.parts) > 1 else rel.name


def branch_sites() -> list[tuple[str, str, int, str]]:
    sites = []
    for path in sorted(PKG.rglob("*.py")):
        for i, s in code_lines(path):
            if CALLS.search(s) or COMPARE.search(s) or ISINSTANCE.search(s):
                sites.append((area(path), path.relative_to(ROOT).as_posix(), i, s))
    return sites


def private_imports() -> Counter:
    """``from edgeprof.X import _name`` across modules, per imported module."""
    found: Counter = Counter()
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("edgeprof"):
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        found[node.module] += 1
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true", help="print every branch site")
    args = ap.parse_args()
    sites = branch_sites()
    per = Counter(a for a, *_ in sites)
    print("| part of edgeprof/ | branch sites on the kind |")
    print("|---|---:|")
    for a, n in sorted(per.items()):
        print(f"| {a} | {n} |")
    front = sum(n for a, n in per.items() if a.startswith("front door"))
    print(f"| **all, outside the front door** | **{len(sites) - front}** |")
    if args.list:
        for a, f, i, s in sites:
            print(f"{f}:{i}: {s}")
    paired = len(re.findall(r"\bfunc_\w+\s*=", (PKG / "cli" / "parser.py").read_text()))
    print(f"\nCLI commands with a second function for the other kind (func_<kind>=): {paired}")
    priv = private_imports()
    print(f"\nprivate names imported across modules: {sum(priv.values())} "
          f"(top: {', '.join(f'{m} {n}' for m, n in priv.most_common(4))})")
    py = sum(len(p.read_text(encoding='utf-8').splitlines()) for p in PKG.rglob("*.py"))
    print(f"lines of Python in edgeprof/: {py}")


if __name__ == "__main__":
    main()
