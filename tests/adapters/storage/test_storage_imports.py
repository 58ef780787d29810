"""The LeRobot format packages depend one way: v2.1 builds on v3's file helpers, v3 never imports
v2.1 (directly or through another module); what both share lives in `episode_source`."""

from __future__ import annotations

import grimp

V3 = "rlctl.adapters.storage.lerobot_v3"
V21 = "rlctl.adapters.storage.lerobot_v21"
NEUTRAL = "rlctl.adapters.storage.episode_source"


def test_v3_never_imports_v21_and_the_shared_types_import_neither():
    graph = grimp.build_graph("rlctl", cache_dir=None)
    assert not graph.chain_exists(importer=V3, imported=V21, as_packages=True)
    assert not graph.chain_exists(importer=NEUTRAL, imported=V3, as_packages=True)
    assert not graph.chain_exists(importer=NEUTRAL, imported=V21, as_packages=True)
    # The v2.1 reader does build on v3 (the direction that is allowed).
    assert graph.chain_exists(importer=V21, imported=V3, as_packages=True)
