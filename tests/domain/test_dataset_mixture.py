"""A mixture of datasets trained on as one: what they share, and the settings that name it."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

from rlctl.domain.config import structure
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.dataset_mixture import mixture_meta
from rlctl.domain.errors import ConfigError, DatasetError
from rlctl.domain.features import FeatureSpec
from rlctl.domain.train_settings import DatasetSource


def stats(mean: float, count: int, dim: int) -> dict:
    return {
        "mean": [mean] * dim,
        "std": [1.0] * dim,
        "min": [mean - 1] * dim,
        "max": [mean + 1] * dim,
        "count": [count],
    }


def meta(
    fps: int = 10, frames: int = 10, action: int = 2, extra: bool = False, **kw
) -> DatasetMeta:
    features = {
        "action": FeatureSpec("action", "float32", (action,)),
        "observation.state": FeatureSpec("observation.state", "float32", (3,)),
    }
    if extra:
        features["observation.images.top"] = FeatureSpec(
            "observation.images.top", "video", (8, 8, 3)
        )
    return DatasetMeta(
        codebase_version="v3.0",
        fps=fps,
        features=features,
        total_episodes=1,
        total_frames=frames,
        tasks=(kw.pop("task", "pick"),),
        episodes=(),
        stats={"action": stats(kw.pop("mean", 0.0), frames, action),
               "observation.state": stats(0.0, frames, 3)},
    )  # fmt: skip


def test_a_mixture_shares_features_sums_frames_and_aggregates_statistics():
    mixed, reasons = mixture_meta(
        [
            ("a", meta(frames=10, mean=0.0, extra=True)),
            ("b", meta(frames=30, mean=4.0, task="place")),
        ]
    )
    assert set(mixed.features) == {"action", "observation.state"}
    assert any("observation.images.top" in r for r in reasons)
    assert mixed.total_frames == 40 and mixed.total_episodes == 2
    assert mixed.tasks == ("pick", "place")
    assert mixed.stats is not None
    assert np.allclose(mixed.stats["action"]["mean"], [3.0, 3.0])  # count-weighted
    assert mixed.stats["action"]["min"] == [-1.0, -1.0] and mixed.stats["action"]["max"] == [
        5.0,
        5.0,
    ]


def test_a_mixture_of_rates_or_without_a_shared_action_is_refused():
    with pytest.raises(DatasetError, match="share one frame rate"):
        mixture_meta([("a", meta(fps=10)), ("b", meta(fps=30))])
    with pytest.raises(DatasetError, match="share no `action`"):
        mixture_meta([("a", meta(action=2)), ("b", meta(action=6))])


def test_a_mixture_without_statistics_has_none():
    bare = attrs.evolve(meta(), stats=None)
    assert mixture_meta([("a", meta()), ("b", bare)])[0].stats is None


def test_the_settings_name_several_datasets_and_their_weights():
    source = structure({"repo_id": ["u/a", "u/b"], "weights": [3, 1]}, DatasetSource)
    assert source.mixed and source.locations_given == ["u/a", "u/b"]
    with pytest.raises(ConfigError, match="several are given"):
        _ = source.location
    assert structure({"root": "/data/x"}, DatasetSource).locations_given == ["/data/x"]
    typed = structure({"repo_id": "[u/a, 'u/b']"}, DatasetSource)  # as a command line gives it
    assert typed.locations_given == ["u/a", "u/b"]
    streamed = structure(
        {"repo_id": ["u/a", "u/b"], "streaming": True, "weights": [1, 2]}, DatasetSource
    )
    assert streamed.mixed and streamed.streaming  # interleaved as they stream
    for data, message in [
        ({"repo_id": ["u/a", "u/b"], "weights": [1]}, "1 weights for 2 dataset"),
        ({"repo_id": ["u/a", "u/b"], "weights": [1, 0]}, "must be positive"),
        ({"repo_id": ["u/a", "u/b"], "weights": [1e308, 1e308]}, "add up to a finite number"),
        ({"root": ["/a", "/b"], "streaming": True}, "streaming reads a dataset from the Hub"),
        ({"repo_id": ["u/a", "u/b"], "streaming": True, "episodes": [0]}, "not of a mixture"),
        ({"repo_id": ["u/a", "u/b"], "episodes": [0]}, "not of a mixture"),
        ({"repo_id": [1, 2]}, "a list of them"),
    ]:
        with pytest.raises(ConfigError, match=message):
            structure(data, DatasetSource)


@pytest.mark.parametrize(
    "root,repo_id", [("/data/a", ["x/a", "x/b"]), (["/data/a", "/data/b"], "x/a")]
)
def test_folders_and_repo_ids_that_do_not_pair_are_refused(root, repo_id):
    with pytest.raises(ConfigError, match=r"--dataset.root names \d folder\(s\) and"):
        DatasetSource(root=root, repo_id=repo_id, weights=[1.0, 2.0])


def test_one_folder_for_one_repo_id_is_that_datasets_local_copy():
    source = DatasetSource(root="/data/pusht", repo_id="lerobot/pusht")
    assert source.locations_given == ["/data/pusht"]
