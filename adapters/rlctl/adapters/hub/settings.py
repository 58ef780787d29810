"""Where the Hub is and where its files are cached, read from the environment when asked.

huggingface_hub reads `HF_ENDPOINT`, `HF_HOME`, `HF_HUB_CACHE` and `HF_HUB_OFFLINE` once, when it
is imported; reading them here when an adapter is built instead lets a test or an embedding
service point one adapter at another server or cache without restarting the process. Paths
follow the same rules as huggingface_hub and LeRobot 0.6.1, so both tools find the same files:

- datasets: `HF_LEROBOT_HOME` (default `$HF_HOME/lerobot`) — `<repo_id>/` for datasets recorded
  or copied there, `hub/` for pulled snapshots (LeRobot's revision-safe cache);
- models: `HF_HUB_CACHE` (default `$HF_HOME/hub`), where LeRobot's `from_pretrained` looks.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import attrs

_TRUE = {"1", "ON", "YES", "TRUE"}


def _flag(value: str | None) -> bool:
    return value is not None and value.strip().upper() in _TRUE


def _path(value: str) -> Path:
    return Path(os.path.expandvars(value)).expanduser()


@attrs.frozen
class HubSettings:
    # None: huggingface_hub's own default (https://huggingface.co).
    endpoint: str | None
    hf_home: Path
    lerobot_home: Path
    models_cache: Path
    offline: bool = False
    # Parallel file downloads; the Hub is fast, small machines are not.
    max_workers: int = 8

    @property
    def datasets_cache(self) -> Path:
        return self.lerobot_home / "hub"

    def cache_for(self, kind: str) -> Path:
        return self.datasets_cache if kind == "dataset" else self.models_cache

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> HubSettings:
        env = os.environ if environ is None else environ
        xdg = env.get("XDG_CACHE_HOME") or str(Path("~", ".cache"))
        hf_home = _path(env.get("HF_HOME") or str(Path(xdg, "huggingface")))
        lerobot_home = _path(env.get("HF_LEROBOT_HOME") or str(hf_home / "lerobot"))
        models_cache = _path(
            env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE") or str(hf_home / "hub")
        )
        endpoint = (env.get("HF_ENDPOINT") or "").rstrip("/") or None
        return cls(
            endpoint=endpoint,
            hf_home=hf_home,
            lerobot_home=lerobot_home,
            models_cache=models_cache,
            offline=_flag(env.get("HF_HUB_OFFLINE")) or _flag(env.get("TRANSFORMERS_OFFLINE")),
        )
