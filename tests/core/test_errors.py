"""core/errors.py draws the whole error tree: every EdgeprofError subclass defined anywhere in
the package stands in its docstring's drawing, under its real base (issue 31: the drawing
left out the 7 subclasses defined outside errors.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import edgeprof
import edgeprof.core.errors as errors

PACKAGE = Path(edgeprof.__file__).parent


def _defined() -> dict[str, str]:
    """Every class in the package that derives from EdgeprofError (through any chain of
    bases, by name), mapped to its direct base."""
    classes: list[tuple[str, list[str]]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                classes.append((node.name, [b.attr if isinstance(b, ast.Attribute)
                                            else getattr(b, "id", "") for b in node.bases]))
    found = {"EdgeprofError": "Exception"}
    grew = True
    while grew:
        grew = False
        for name, parents in classes:
            base = next((p for p in parents if p in found), None)
            if name not in found and base is not None:
                found[name] = base
                grew = True
    twice = sorted({n for n, _ in classes if n in found
                    and sum(1 for m, _ in classes if m == n) > 1})
    assert not twice, f"error classes defined twice: {twice}"
    return found


def _drawn() -> dict[str, str]:
    """The docstring's drawing: each class mapped to the class drawn above it."""
    block = errors.__doc__.split("::", 1)[1].strip("\n").split("\n\n", 1)[0]
    parents: dict[str, str] = {}
    stack: list[str] = []
    for line in block.splitlines():
        m = re.match(r"^ {4}((?:[│ ] {3})*)(?:[├└]── )?(\w+)", line)
        assert m, f"not a line of the drawing: {line!r}"
        depth = len(m[1]) // 4 + (1 if "── " in line else 0)
        stack[depth:] = [m[2]]
        parents[m[2]] = stack[depth - 1] if depth else "Exception"
    return parents


def test_the_drawing_holds_every_subclass_under_its_base():
    defined, drawn = _defined(), _drawn()
    missing = sorted(set(defined) - set(drawn))
    assert not missing, f"errors.py's drawing leaves out {missing}"
    assert not set(drawn) - set(defined), "the drawing names classes the package lacks"
    wrong = {n: (drawn[n], defined[n]) for n in defined if drawn[n] != defined[n]}
    assert not wrong, f"drawn under the wrong base (drawn, real): {wrong}"
    assert len(defined) >= 21  # the 13 of errors.py and 8 defined beside their users
