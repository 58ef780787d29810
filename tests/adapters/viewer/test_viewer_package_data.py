"""The viewer's page is package data: the adapters wheel ships it beside the server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rlctl.adapters.viewer.server import STATIC_FILES

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_the_adapters_wheel_holds_the_page(tmp_path):
    uv = os.environ.get("UV") or shutil.which("uv")
    command = [uv] if uv else [sys.executable, "-m", "uv"]
    proc = subprocess.run(
        [*command, "build", "--package", "rlctl-adapters", "--wheel", "-o", str(tmp_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (wheel,) = tmp_path.glob("rlctl_adapters-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in STATIC_FILES:
        assert f"rlctl/adapters/viewer/static/{name}" in names
    assert "rlctl/adapters/reports/static/report.js" in names  # inlined into every report
