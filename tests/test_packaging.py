"""`uv build --all-packages` builds one wheel per layer, each holding only its layer."""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
EXPECTED = {
    "rlctl_domain": {"rlctl/domain"},
    "rlctl_application": {"rlctl/application"},
    "rlctl_adapters": {"rlctl/adapters"},
    # `rlctl/__main__.py`: `python -m rlctl`, as torchrun launches the command.
    "rlctl": {"rlctl/entrypoints", "rlctl/api", "rlctl/__main__.py"},
}


def _uv() -> list[str]:
    found = os.environ.get("UV") or shutil.which("uv")
    return [found] if found else [sys.executable, "-m", "uv"]


@pytest.mark.slow
def test_each_wheel_holds_only_its_layer(tmp_path):
    proc = subprocess.run(
        [*_uv(), "build", "--all-packages", "--wheel", "-o", str(tmp_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    wheels = {w.name.split("-")[0]: w for w in tmp_path.glob("*.whl")}
    assert set(wheels) == set(EXPECTED)
    for name, wheel in wheels.items():
        with zipfile.ZipFile(wheel) as archive:
            tops = {
                "/".join(n.split("/")[:2]) for n in archive.namelist() if ".dist-info/" not in n
            }
        assert tops == EXPECTED[name], name
        assert "rlctl/__init__.py" not in tops
