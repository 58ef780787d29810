"""Every browser script rlctl ships is type-checked: listed in tools/js/tsconfig.json (which
.ci/run checks with tsc) and marked `// @ts-check` for editors."""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
TOOLS = REPO_ROOT / "tools" / "js"


def test_every_shipped_script_is_in_the_type_check():
    text = (TOOLS / "tsconfig.json").read_text(encoding="utf-8")
    config = json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.MULTILINE))
    checked = {(TOOLS / name).resolve() for name in config["files"] if name.endswith(".js")}
    shipped = {
        path.resolve()
        for layer in ("adapters", "entrypoints")
        for path in (REPO_ROOT / layer).rglob("*.js")
    }
    assert shipped and shipped == checked
    assert config["compilerOptions"]["strict"] and config["compilerOptions"]["checkJs"]
    for path in shipped:
        assert path.read_text(encoding="utf-8").startswith("// @ts-check\n"), path


def test_the_typescript_that_checks_them_is_pinned_and_locked():
    package = json.loads((TOOLS / "package.json").read_text(encoding="utf-8"))
    version = package["devDependencies"]["typescript"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), version
    lock = json.loads((TOOLS / "package-lock.json").read_text(encoding="utf-8"))
    assert lock["packages"]["node_modules/typescript"]["version"] == version
