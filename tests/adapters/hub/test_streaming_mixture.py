"""Several datasets streamed from the fake Hub as one (`StreamingMixture`, `rlctl train
--dataset.repo_id=[a, b] --dataset.streaming=true`): the local mixture's items, every reader its
own share of each stream, weights honoured, a seeded order."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from rlctl.adapters.hub.huggingface import HuggingFaceHub
from rlctl.adapters.hub.layout import LeRobotLayout
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.streaming.mixture import StreamingMixture
from rlctl.adapters.storage.torch_dataset import MultiLeRobotTorchDataset
from rlctl.application.use_cases.push_dataset import PushDataset, PushDatasetRequest
from rlctl.domain.errors import InvalidInput
from rlctl.domain.feature_stats import stats_to_json

pytestmark = pytest.mark.timeout(120)

RED, BLUE, NARROW = "alice/red", "alice/blue", "alice/narrow"
STATE, ACTION, IMAGE = "observation.state", "action", "observation.images.wrist"
DELTAS = {STATE: [-0.1, 0.0], ACTION: [0.0, 0.1, 0.2]}


def _writer_support():
    path = Path(__file__).parents[1] / "storage" / "writer_support.py"
    spec = importlib.util.spec_from_file_location("writer_support", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ws = _writer_support()


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """red: 8 episodes with a camera the others lack; blue: 6 episodes; narrow: a 2-joint arm
    (an action of another shape). A few episodes per data file."""
    base = tmp_path_factory.mktemp("mixture")
    plans = {
        RED: ws.DatasetPlan(fps=10, state_dim=3, episodes=_episodes(8, 5), image=True),
        BLUE: ws.DatasetPlan(fps=10, state_dim=3, episodes=_episodes(6, 3), seed=1),
        NARROW: ws.DatasetPlan(fps=10, state_dim=2, episodes=_episodes(4, 4), seed=2),
    }
    roots = {}
    for repo, plan in plans.items():
        roots[repo] = base / repo.replace("/", "_")
        ws.write(roots[repo], plan, data_files_size_in_mb=0.004)
    return roots


def _episodes(count: int, shortest: int) -> tuple[tuple[str, ...], ...]:
    return tuple(("pick" if e % 2 else "place",) * (shortest + e) for e in range(count))


@pytest.fixture
def pushed(fake_hub, hub_env, written) -> dict[str, Path]:
    push = PushDataset(HuggingFaceHub(), LeRobotMetaReader(), LeRobotLayout())
    for repo, root in written.items():
        push(PushDatasetRequest(str(root), repo))
    return written


def frames_of(items) -> list[tuple[int, int]]:
    return [(int(item["dataset_index"]), int(item["index"])) for item in items]


def every_frame(mixture: StreamingMixture) -> Counter[tuple[int, int]]:
    return Counter(
        (number, index)
        for number, dataset in enumerate(mixture.datasets)
        for index in range(dataset.num_frames)
    )


def test_items_are_the_local_mixtures_items(pushed):
    streamed = StreamingMixture([RED, BLUE], delta_timestamps=DELTAS, shuffle=False)
    local = MultiLeRobotTorchDataset([pushed[RED], pushed[BLUE]], delta_timestamps=DELTAS)
    first_of = [0, local.locate_start(1)]

    items = list(streamed)

    assert Counter(frames_of(items)) == every_frame(streamed)
    assert streamed.num_frames == len(local) and streamed.num_episodes == 14
    assert streamed.disabled_features == local.disabled_features == {IMAGE}
    assert sorted(streamed.features) == sorted(local.features)
    for item in items:
        want = local[first_of[int(item["dataset_index"])] + int(item["index"])]
        assert item.keys() == want.keys() and IMAGE not in item
        for key, value in want.items():
            if isinstance(value, torch.Tensor):
                assert torch.equal(item[key], value), key
            else:
                assert item[key] == value, key
    assert streamed.stats is not None and local.stats is not None
    assert stats_to_json(streamed.stats) == stats_to_json(local.stats)  # aggregated alike


@pytest.mark.parametrize("epoch", [0, 3])
def test_two_ranks_by_two_workers_read_disjoint_shares_that_cover_every_frame_once(pushed, epoch):
    seen: list[tuple[int, int]] = []
    for rank in (0, 1):
        streamed = StreamingMixture([RED, BLUE], rank=rank, world_size=2, buffer_size=8, seed=5)
        streamed.set_epoch(epoch)
        loader = DataLoader(streamed, batch_size=None, num_workers=2)
        mine = frames_of(loader)
        assert {number for number, _ in mine} == {0, 1}, f"rank {rank} read one dataset only"
        seen += mine

    assert Counter(seen) == every_frame(streamed)


def test_weights_are_honoured_and_a_stream_asked_for_more_starts_over(pushed):
    streamed = StreamingMixture([RED, BLUE], weights=[1, 3], buffer_size=8, seed=2)
    red_frames, blue_frames = (d.num_frames for d in streamed.datasets)
    passes = []
    for epoch in range(3):
        streamed.set_epoch(epoch)
        passes.append(frames_of(streamed))

    total = red_frames + blue_frames
    for found in passes:
        assert len(found) == total  # a pass is as long as the datasets together
        share = Counter(number for number, _ in found)
        assert abs(share[1] / total - 0.75) < 1 / total
        # blue is asked for more frames than it holds: it starts over each time it runs out,
        # so every frame comes as often as the others, or once more.
        blue = Counter(index for number, index in found if number == 1)
        assert set(blue) == set(range(blue_frames))
        runs = share[1] // blue_frames
        assert runs >= 2 and set(blue.values()) <= {runs, runs + 1}
    assert passes[0] != passes[1]  # each pass its own order


def test_measured_frequencies_match_the_weights_across_workers(pushed):
    streamed = StreamingMixture([RED, BLUE], weights=[2, 1], buffer_size=4, seed=9)
    loader = DataLoader(streamed, batch_size=None, num_workers=2)

    share = Counter(int(item["dataset_index"]) for item in loader)

    assert abs(share[0] / sum(share.values()) - 2 / 3) < 0.02


def test_a_reader_holding_nothing_of_a_dataset_gives_its_weight_to_the_others(pushed):
    # 8 readers, blue's 6 episodes: the last readers hold none of it.
    streamed = StreamingMixture([RED, BLUE], weights=[1, 1], rank=7, world_size=8, seed=1)
    assert streamed.pass_counts()[1] == 0

    found = frames_of(streamed)

    assert found and {number for number, _ in found} == {0}
    assert len(found) == streamed.datasets[0].shard_frames()


def test_the_same_seed_gives_the_same_stream(pushed):
    def read(seed: int, epoch: int = 0) -> list[tuple[int, int]]:
        streamed = StreamingMixture([RED, BLUE], weights=[1, 1], buffer_size=8, seed=seed)
        streamed.set_epoch(epoch)
        return frames_of(streamed)

    first = read(4)
    assert first == read(4)
    assert first != read(5) and first != read(4, epoch=1)


def test_a_mixture_of_one_reads_what_the_dataset_alone_reads(pushed):
    from rlctl.adapters.storage.streaming.dataset import StreamingLeRobotDataset

    alone = StreamingLeRobotDataset(BLUE, buffer_size=8, seed=3)
    mixed = StreamingMixture([BLUE], buffer_size=8, seed=3)

    assert frames_of(mixed) == [(0, int(item["index"])) for item in alone]


def test_bad_arguments_are_refused(pushed):
    with pytest.raises(InvalidInput, match="2 datasets"):
        StreamingMixture([RED, BLUE], weights=[1])
    with pytest.raises(InvalidInput, match="positive"):
        StreamingMixture([RED, BLUE], weights=[1, -1])
    with pytest.raises(InvalidInput, match="list of repo ids"):
        StreamingMixture(RED)


def _train(out: Path, *extra: str):
    from click.testing import CliRunner

    from rlctl.entrypoints.cli.main import cli

    args = [
        "train",
        "--dataset.streaming=true",
        "--policy.type=mlp",
        "--policy.chunk_size=3",
        "--policy.n_action_steps=3",
        "--policy.hidden_dims=[16]",
        "--batch_size=4",
        "--num_workers=0",
        "--log_freq=1",
        f"--output_dir={out}",
        *extra,
    ]
    return CliRunner().invoke(cli, args)


@pytest.mark.slow
def test_rlctl_train_trains_on_a_streamed_mixture_and_resumes(fake_hub, pushed, tmp_path):
    from rlctl.adapters.policies.loaded_policy import load_policy_folder

    out = tmp_path / "run"
    mix = [f"--dataset.repo_id=[{RED}, {BLUE}]", "--dataset.weights=[1, 3]"]

    first = _train(out, *mix, "--steps=2", "--save_freq=2")
    assert first.exit_code == 0, first.output
    assert "trained steps 0..2 of 2" in first.output
    resumed = _train(out, f"--resume={out}", "--steps=4", "--save_freq=2")
    assert resumed.exit_code == 0, resumed.output
    assert "trained steps 2..4 of 4" in resumed.output

    policy = load_policy_folder(out / "checkpoints" / "last" / "pretrained_model")
    assert policy.predict_chunk({STATE: torch.zeros(1, 3)}).actions.shape == (1, 3, 3)
    fetched = {r.path.split("/resolve/")[0] for r in fake_hub.file_gets(".parquet")}
    assert any(RED in path for path in fetched) and any(BLUE in path for path in fetched)
    # The normaliser's statistics are those of both datasets together.
    both = MultiLeRobotTorchDataset([pushed[RED], pushed[BLUE]]).stats
    assert both is not None
    normalizer = policy.preprocessor[-1]
    assert normalizer.stats[STATE]["mean"].tolist() == pytest.approx(
        both[STATE].mean.tolist(), rel=1e-5
    )


def test_a_streamed_mixture_that_cannot_be_mixed_is_one_error(fake_hub, pushed, tmp_path):
    result = _train(tmp_path / "run", f"--dataset.repo_id=[{RED}, {NARROW}]", "--steps=1")

    assert result.exit_code == 1, result.output
    assert "share no `action` feature of one shape" in result.output
    assert "differs in dtype or shape" in result.output  # the hint says which
    # Refused from the metadata alone: no data file was read.
    assert all("/meta/" in r.path for r in fake_hub.file_gets(".parquet"))


def test_open_dataset_streams_a_list_of_repo_ids_by_weight(pushed):
    import rlctl.api

    streamed = rlctl.api.open_dataset([RED, BLUE], streaming=True, weights=[1, 1], seed=7)

    assert isinstance(streamed, StreamingMixture)
    assert (streamed.weights, streamed.seed) == ([1.0, 1.0], 7)
    share = Counter(number for number, _ in frames_of(streamed))
    assert sorted(share.values()) == [50, 51] and streamed.num_frames == 101
    with pytest.raises(InvalidInput, match="repo id"):
        rlctl.api.open_dataset([RED, str(pushed[BLUE])], streaming=True)
    with pytest.raises(InvalidInput, match="not of several"):
        rlctl.api.open_dataset([RED, BLUE], streaming=True, episodes=[0])
    with pytest.raises(InvalidInput, match="weights interleave"):
        rlctl.api.open_dataset([pushed[RED], pushed[BLUE]], weights=[1, 2])


@pytest.mark.slow
@pytest.mark.ranks
@pytest.mark.timeout(900)
def test_two_gloo_ranks_read_disjoint_shares_and_train_on_a_streamed_mixture(
    fake_hub, pushed, tmp_path
):
    import json
    import os
    import subprocess
    import sys

    fake_hub.max_requests = 20000  # two ranks of two workers, reading and training
    out = tmp_path / "ranks"
    out.mkdir()
    run = tmp_path / "run"
    spec = {
        "repos": [RED, BLUE],
        "out": str(out),
        "train": [
            "train",
            f"--dataset.repo_id=[{RED}, {BLUE}]",
            "--dataset.weights=[1, 3]",
            "--dataset.streaming=true",
            "--policy.type=mlp",
            "--policy.chunk_size=3",
            "--policy.n_action_steps=3",
            "--policy.hidden_dims=[16]",
            "--steps=3",
            "--batch_size=4",
            "--num_workers=2",
            "--save_freq=3",
            f"--output_dir={run}",
        ],
    }
    worker = Path(__file__).with_name("streamed_mixture_worker.py")
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
        str(worker), json.dumps(spec),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=840)
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]

    mixture = StreamingMixture([RED, BLUE])
    for epoch in ("0", "1"):
        seen = [tuple(frame) for report in ranks for frame in report["frames"][epoch]]
        assert Counter(seen) == every_frame(mixture), epoch
    assert [(r["rank"], r["world"]) for r in ranks] == [(0, 2), (1, 2)]
    assert [r["code"] for r in ranks] == [0, 0], done.stdout[-4000:]
    assert (run / "checkpoints" / "000003" / "pretrained_model" / "model.safetensors").is_file()
