"""The run folder: finding what to resume, atomic checkpoints, the `last` link."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlctl.adapters.policies.errors import CheckpointError
from rlctl.adapters.training.checkpoints import (
    LAST,
    confined,
    find_checkpoint,
    write_checkpoint,
)
from rlctl.domain.run_layout import CHECKPOINTS_DIR, step_name


def fill_with_step(step: int):
    def fill(staging: Path) -> None:
        (staging / "pretrained_model").mkdir()
        (staging / "training_state").mkdir()
        (staging / "training_state" / "training_step.json").write_text(json.dumps({"step": step}))

    return fill


def test_step_names_are_zero_padded_like_lerobots():
    assert step_name(5, 100) == "000005"
    assert step_name(5, 12_345_678) == "00000005"


def test_last_points_at_the_newest_and_every_spelling_finds_it(tmp_path):
    write_checkpoint(tmp_path, "000002", fill_with_step(2))
    written = write_checkpoint(tmp_path, "000004", fill_with_step(4))
    link = tmp_path / CHECKPOINTS_DIR / LAST
    assert link.is_symlink() and link.readlink() == Path("000004")
    for location in (tmp_path, written, written / "pretrained_model", link):
        ref = find_checkpoint(location)
        assert ref is not None and ref.step == 4
    assert find_checkpoint(tmp_path / CHECKPOINTS_DIR / "000002").step == 2


def test_a_broken_last_falls_back_to_the_highest_complete_checkpoint(tmp_path):
    write_checkpoint(tmp_path, "000002", fill_with_step(2))
    write_checkpoint(tmp_path, "000004", fill_with_step(4))
    folder = tmp_path / CHECKPOINTS_DIR
    (folder / "000004" / "training_state" / "training_step.json").unlink()  # killed mid-copy
    (folder / LAST).unlink()
    (folder / LAST).symlink_to("000009")
    assert find_checkpoint(tmp_path).step == 2


def test_a_failed_save_leaves_the_previous_checkpoint_and_nothing_half_written(tmp_path):
    write_checkpoint(tmp_path, "000002", fill_with_step(2))

    def broken(staging: Path) -> None:
        fill_with_step(3)(staging)
        raise OSError("disk full")

    with pytest.raises(OSError):
        write_checkpoint(tmp_path, "000003", broken)
    folder = tmp_path / CHECKPOINTS_DIR
    assert sorted(p.name for p in folder.iterdir()) == ["000002", LAST]
    assert find_checkpoint(tmp_path).step == 2


def test_a_killed_save_is_ignored_then_cleaned_up(tmp_path):
    write_checkpoint(tmp_path, "000002", fill_with_step(2))
    leftover = tmp_path / CHECKPOINTS_DIR / ".000003.partial-999"
    leftover.mkdir()
    fill_with_step(3)(leftover)
    assert find_checkpoint(tmp_path).step == 2
    write_checkpoint(tmp_path, "000004", fill_with_step(4))
    assert not leftover.exists()


def test_saving_a_step_again_replaces_it(tmp_path):
    write_checkpoint(tmp_path, "000002", fill_with_step(2))
    write_checkpoint(tmp_path, "000002", fill_with_step(2))
    assert find_checkpoint(tmp_path).step == 2


def test_nothing_to_find(tmp_path):
    assert find_checkpoint(tmp_path) is None
    assert find_checkpoint(tmp_path / "absent") is None


def test_a_last_link_out_of_the_run_is_refused(tmp_path):
    other = tmp_path / "other"
    write_checkpoint(other, "000008", fill_with_step(8))
    run = tmp_path / "run"
    write_checkpoint(run, "000002", fill_with_step(2))
    link = run / CHECKPOINTS_DIR / LAST
    link.unlink()
    link.symlink_to(other / CHECKPOINTS_DIR / "000008")
    with pytest.raises(CheckpointError, match="not at a checkpoint of this run") as caught:
        find_checkpoint(run)
    assert caught.value.where == str(link)


def test_a_checkpoint_with_a_file_linked_out_of_it_is_refused(tmp_path):
    written = write_checkpoint(tmp_path, "000002", fill_with_step(2))
    confined(written)  # as written: fine
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"step": 2}))
    state = written / "training_state" / "training_step.json"
    state.unlink()
    state.symlink_to(secret)
    with pytest.raises(CheckpointError, match="outside the checkpoint folder") as caught:
        confined(written)
    assert caught.value.where == str(state)
    inner = written / "training_state" / "linked.json"
    inner.symlink_to("training_step.json")  # a link inside the checkpoint stays fine
    state.unlink()
    state.write_text(json.dumps({"step": 2}))
    confined(written)
