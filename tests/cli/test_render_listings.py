"""The listings' tables (``edgeprof backends``): every precision, device, format and option
is shown whole, wrapped in its cell rather than cut with an ellipsis (issue 29, finding 16:
precision lists were truncated even at COLUMNS=250)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from edgeprof.api import list_backends
from edgeprof.cli.common import make_console
from edgeprof.cli.render_listings import render_backends


def _words(text: str) -> set[str]:
    return set(re.findall(r"[\w.:-]+", text))


@pytest.mark.parametrize("width", [100, 160, 250])
def test_backends_wraps_its_cells_and_cuts_nothing(width):
    from rich.console import Console

    rows = list_backends()
    buf = io.StringIO()
    render_backends(rows, Console(file=buf, width=width, highlight=False))
    text = buf.getvalue()
    assert "…" not in text
    shown = _words(text)
    for r in rows:
        for value in (*r["precisions"], *r["devices"], *r["model_formats"]):
            assert value in shown, (r["name"], value, width)


def test_an_explicit_columns_sets_the_width_of_piped_output(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    assert make_console().width == 250
    monkeypatch.delenv("COLUMNS")
    assert make_console().width == 160  # a pipe without COLUMNS: wide enough for the tables


def test_backends_at_columns_250_shows_every_precision(tmp_path):
    env = {**os.environ, "COLUMNS": "250"}
    done = subprocess.run([sys.executable, "-m", "edgeprof", "backends"], capture_output=True,
                          text=True, env=env, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout and max(map(len, done.stdout.splitlines())) <= 250


def test_option_types_are_text_not_markup():
    """onnxruntime's providers type read 'list[str|]|None': rich took '[str, dict]' for
    markup."""
    from rich.console import Console

    row = {"name": "x", "available": True, "reason": "", "hint": "", "precisions": ["fp32"],
           "devices": ["cpu"], "model_formats": ["onnx"],
           "options": [{"name": "providers", "default": None,
                        "type": "list[str|[str, dict]]|None"}]}
    buf = io.StringIO()
    render_backends([row], Console(file=buf, width=250))
    assert "(list[str|[str, dict]]|None)" in buf.getvalue()
