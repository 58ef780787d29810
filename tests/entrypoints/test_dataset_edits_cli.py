"""`rlctl dataset remove-feature | add-feature | modify-tasks | convert-images-to-video |
reencode-videos` as a user types them, on a small dataset written by rlctl (a video camera, a
camera stored as images, language annotations): items before and after, and `check` passing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer, WriterOptions
from rlctl.entrypoints.cli.main import cli

STATE, ACTION = "observation.state", "action"
FRONT, WRIST = "observation.images.front", "observation.images.wrist"
HWC = ["height", "width", "channels"]
FEATURES = {
    STATE: {"dtype": "float32", "shape": [2], "names": ["a", "b"]},
    ACTION: {"dtype": "float32", "shape": [2], "names": ["a", "b"]},
    FRONT: {"dtype": "video", "shape": [16, 24, 3], "names": HWC},
    WRIST: {"dtype": "image", "shape": [12, 16, 3], "names": HWC},
    "language_persistent": {"dtype": "language", "shape": [1], "names": None},
    "language_events": {"dtype": "language", "shape": [1], "names": None},
}
LENGTHS = (4, 3, 5)
TASKS = ("pick", "place", "pick")
# Cameras after a lossy encode stay this close (of 255) to the frames that went in.
TOLERANCE = 0.08


def picture(shape: tuple[int, ...], ep: int, t: int, salt: int) -> np.ndarray:
    h, w, _ = shape
    yy, xx = np.mgrid[0:h, 0:w]
    r = (xx * 2 + 29 * t + 17 * ep + salt) % 256
    g = (yy * 2 + 37 * t + 31 * ep) % 256
    b = (xx + yy + 41 * t + salt) % 256
    return np.stack([r, g, b], axis=-1).astype(np.uint8)


def annotation(ep: int, t: int) -> list[dict]:
    return [{"role": "user", "content": f"note {ep}-{t}", "style": "vqa", "camera": FRONT}]


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "ds"
    options = WriterOptions(encode_in_subprocess=False, durable=False)
    with LeRobotV3Writer(options=options).create(root, fps=10, features=FEATURES) as session:
        for ep, length in enumerate(LENGTHS):
            for t in range(length):
                session.add_frame(
                    {
                        STATE: np.array([ep, t], np.float32),
                        ACTION: np.array([t, -ep], np.float32),
                        FRONT: picture((16, 24, 3), ep, t, 90),
                        WRIST: picture((12, 16, 3), ep, t, 50),
                        "language_persistent": [
                            {
                                "role": "assistant",
                                "content": f"plan {ep}",
                                "style": "plan",
                                "timestamp": 0.0,
                            }
                        ],
                        "language_events": annotation(ep, t) if t == 1 else [],
                        "task": TASKS[ep],
                    }
                )
            session.save_episode()
    return root


def run(*args: object, code: int = 0):
    result = CliRunner().invoke(cli, ["dataset", *map(str, args)])
    assert result.exit_code == code, (result.output, result.exception)
    return result


def items(root: Path) -> list[dict]:
    reader = LeRobotDatasetReader(root)
    return [reader[i] for i in range(len(reader))]


def info(root: Path) -> dict:
    return json.loads((root / "meta/info.json").read_text())


def stats(root: Path) -> dict:
    return json.loads((root / "meta/stats.json").read_text())


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def same(a, b) -> bool:
    if hasattr(a, "numpy"):
        return np.array_equal(a.numpy(), b.numpy())
    return a == b


def assert_kept(before: list[dict], after: list[dict], keys) -> None:
    assert len(before) == len(after)
    for old, new in zip(before, after, strict=True):
        for key in keys:
            assert same(old[key], new[key]), key


def assert_check_passes(root: Path) -> None:
    out = run("check", root).output
    assert "ok, 0 warnings" in out, out


UNCHANGED = (STATE, ACTION, "episode_index", "frame_index", "index", "timestamp", "task")
LANGUAGE = ("language_persistent", "language_events")


def test_remove_feature_drops_the_columns_videos_and_statistics(dataset, tmp_path):
    before = items(dataset)
    out = tmp_path / "out"
    result = run("remove-feature", dataset, "--feature", f"{FRONT},{ACTION}", "-o", out)
    assert "3 episodes, 12 frames, 2 tasks" in result.output
    assert set(info(out)["features"]) == set(info(dataset)["features"]) - {FRONT, ACTION}
    assert info(out)["video_path"] is None  # no video camera left, as LeRobot writes it
    assert not (out / "videos").exists()
    assert FRONT not in stats(out) and ACTION not in stats(out)
    assert stats(out)[STATE] == stats(dataset)[STATE]
    after = items(out)
    assert_kept(before, after, [k for k in UNCHANGED if k != ACTION] + [WRIST, *LANGUAGE])
    assert FRONT not in after[0] and ACTION not in after[0]
    assert_check_passes(out)

    # In place, the camera stored as images.
    run("remove-feature", dataset, "--feature", WRIST)
    assert WRIST not in info(dataset)["features"]
    assert_kept(before, items(dataset), [*UNCHANGED, FRONT, *LANGUAGE])
    assert_check_passes(dataset)


def test_remove_feature_refuses_what_lerobot_refuses_and_changes_nothing(dataset):
    before = files(dataset)
    out = run("remove-feature", dataset, "--feature", "observation.nope", code=1).output
    assert "the dataset has no feature 'observation.nope'" in out and "hint:" in out
    out = run("remove-feature", dataset, "--feature", "index", code=1).output
    assert "'index' cannot be removed" in out
    assert files(dataset) == before


def test_add_feature_from_a_npy_file(dataset, tmp_path):
    before = items(dataset)
    values = np.arange(12, dtype=np.float32).reshape(12, 1) / 4
    path = tmp_path / "reward.npy"
    np.save(path, values)
    run("add-feature", dataset, "--feature", "next.reward", "--values", path)
    after = items(dataset)
    assert_kept(before, after, [*UNCHANGED, WRIST, *LANGUAGE])
    for index, item in enumerate(after):
        assert item["next.reward"].item() == index / 4
    feature = info(dataset)["features"]["next.reward"]
    assert feature == {"dtype": "float32", "shape": [1], "names": None}
    assert stats(dataset)["next.reward"]["mean"] == pytest.approx([values.mean()])
    assert stats(dataset)["next.reward"]["max"] == pytest.approx([11 / 4])
    assert_check_passes(dataset)

    snapshot = files(dataset)
    out = run("add-feature", dataset, "--feature", "next.reward", "--values", path, code=1).output
    assert "already exists" in out
    np.save(path, values[:5])
    out = run("add-feature", dataset, "--feature", "next.done", "--values", path, code=1).output
    assert "the dataset has 12 frames" in out
    assert files(dataset) == snapshot


def test_add_features_through_the_api(dataset, tmp_path):
    import rlctl.api

    extra = np.stack([np.arange(12), -np.arange(12)], axis=1).astype(np.float64)
    result = rlctl.api.add_features(
        dataset,
        {"observation.extra": (extra, {"dtype": "float64", "shape": [2], "names": ["x", "y"]})},
        output=tmp_path / "out",
    )
    assert (result.episodes, result.frames) == (3, 12)
    after = items(tmp_path / "out")
    assert after[7]["observation.extra"].numpy().tolist() == [7.0, -7.0]
    assert info(tmp_path / "out")["features"]["observation.extra"]["names"] == ["x", "y"]
    assert_check_passes(tmp_path / "out")


def test_modify_tasks_with_a_default_and_per_episode_tasks(dataset):
    before = items(dataset)
    out = run(
        "modify-tasks", dataset, "--new-task", "tidy up", "--episode-tasks", '{"1": "wipe"}'
    ).output
    assert "3 episodes, 12 frames, 2 tasks" in out
    after = items(dataset)
    assert [item["task"] for item in after] == ["tidy up"] * 4 + ["wipe"] * 3 + ["tidy up"] * 5
    assert_kept(before, after, [STATE, ACTION, "index", WRIST, *LANGUAGE])
    assert info(dataset)["total_tasks"] == 2
    assert_check_passes(dataset)

    run("modify-tasks", dataset, "--task-replacements", '{"wipe": "wipe the table"}')
    tasks = [item["task"] for item in items(dataset)]
    assert tasks[4:9] == ["wipe the table"] * 3 + ["tidy up"] * 2


def test_modify_tasks_refuses_bad_input_and_changes_nothing(dataset):
    before = files(dataset)
    assert "no task change given" in run("modify-tasks", dataset, code=1).output
    out = run("modify-tasks", dataset, "--episode-tasks", '{"9": "x"}', code=1).output
    assert "episode(s) 9 do not exist" in out
    out = run("modify-tasks", dataset, "--task-replacements", '{"fly": "x"}', code=1).output
    assert "the dataset has no task 'fly'" in out
    out = run("modify-tasks", dataset, "--episode-tasks", "[1]", code=1).output
    assert "a JSON object is needed" in out
    assert files(dataset) == before


def test_convert_images_to_video(dataset, tmp_path):
    before = items(dataset)
    out = tmp_path / "video"
    run("convert-images-to-video", dataset, "-o", out, "--vcodec", "h264", "--crf", "18")
    feature = info(out)["features"][WRIST]
    assert feature["dtype"] == "video"
    assert feature["info"]["video.codec"] == "h264"
    assert feature["info"]["video.crf"] == 18 and feature["info"]["video.g"] == 2
    after = items(out)
    assert_kept(before, after, [*UNCHANGED, FRONT, *LANGUAGE])
    for old, new in zip(before, after, strict=True):
        assert np.abs(old[WRIST].numpy() - new[WRIST].numpy()).mean() < TOLERANCE
    for name, value in stats(dataset)[WRIST].items():  # the camera's statistics are kept
        np.testing.assert_allclose(stats(out)[WRIST][name], value, rtol=1e-12)
    assert_check_passes(out)

    result = run("convert-images-to-video", out, code=1).output
    assert "no camera stored as images" in result


def test_reencode_videos(dataset, tmp_path):
    before = items(dataset)
    run("reencode-videos", dataset, "--vcodec", "h264", "--g", "4", "--crf", "23")
    feature = info(dataset)["features"][FRONT]["info"]
    assert (feature["video.codec"], feature["video.g"], feature["video.crf"]) == ("h264", 4, 23)
    after = items(dataset)
    assert_kept(before, after, [*UNCHANGED, WRIST, *LANGUAGE])
    for old, new in zip(before, after, strict=True):
        assert np.abs(old[FRONT].numpy() - new[FRONT].numpy()).mean() < TOLERANCE
    assert_check_passes(dataset)

    snapshot = files(dataset)
    out = run("reencode-videos", dataset, "--vcodec", "h264", "--g", "4", "--crf", "23").output
    assert "nothing to do" in out
    assert files(dataset) == snapshot
    out = run("reencode-videos", dataset, "--vcodec", "vp9", code=1).output
    assert "unsupported video codec 'vp9'" in out
    assert files(dataset) == snapshot


def test_a_failed_encode_leaves_the_dataset_as_it_was(dataset):
    before = files(dataset)
    out = run("reencode-videos", dataset, "--vcodec", "h264", "--pix_fmt", "bogus", code=1).output
    assert "not a pixel format: 'bogus'" in out
    assert files(dataset) == before
    assert not list(dataset.parent.glob(".ds.rlctl-edit-*"))  # the half-built copy is gone


def test_depth_images_become_12_bit_depth_video(tmp_path):
    depth = "observation.images.depth"
    features = {
        STATE: FEATURES[STATE],
        depth: {
            "dtype": "image",
            "shape": [16, 32, 1],
            "names": HWC,
            "info": {"is_depth_map": True},
        },
    }
    root = tmp_path / "depth"
    options = WriterOptions(encode_in_subprocess=False, durable=False)
    yy, xx = np.mgrid[0:16, 0:32]
    with LeRobotV3Writer(options=options).create(root, fps=10, features=features) as session:
        for ep in range(2):
            for t in range(4):
                millimetres = 300 + 150 * xx + 40 * yy + 80 * t + 500 * ep
                session.add_frame(
                    {
                        STATE: np.zeros(2, np.float32),
                        depth: millimetres.astype(np.uint16)[..., None],
                        "task": "look",
                    }
                )
            session.save_episode()
    run("convert-images-to-video", root, "-o", tmp_path / "video", "--depth-max", "8")
    feature = info(tmp_path / "video")["features"][depth]
    assert feature["dtype"] == "video"
    assert feature["info"]["is_depth_map"] and feature["info"]["depth_unit"] == "mm"
    assert (feature["info"]["video.codec"], feature["info"]["video.pix_fmt"]) == (
        "hevc",
        "gray12le",
    )
    assert feature["info"]["video.depth_max"] == 8
    for old, new in zip(items(root), items(tmp_path / "video"), strict=True):
        # 12-bit log quantization between 0.01 and 8 m: a few millimetres at these depths.
        assert float((old[depth] - new[depth]).abs().max()) <= 3.0
    assert_check_passes(tmp_path / "video")
