"""The names in a training run's folder, a policy checkpoint and an evaluation's folder.

One place for them, as `lerobot-train` and `lerobot-eval` lay them out:

    <output_dir>/rlctl_config.json                        the run's resolved settings
    <output_dir>/metrics.jsonl                            one JSON line per logged step
    <output_dir>/checkpoints/<step, 6+ digits>/pretrained_model/   LeRobot's policy folder:
                                                 config.json, model.safetensors,
                                                 train_config.json, the processors' files
                                              training_state/      optimiser, RNG, step
    <output_dir>/checkpoints/last -> <step>               relative symlink
    <eval output_dir>/eval_info.json, videos/

Names only, no I/O: the adapters that read and write these folders import them.
"""

from __future__ import annotations

from pathlib import PurePath

RUN_CONFIG_FILE = "rlctl_config.json"
METRICS_FILE = "metrics.jsonl"
CHECKPOINTS_DIR = "checkpoints"
LAST_CHECKPOINT = "last"
PRETRAINED_DIR = "pretrained_model"
TRAINING_STATE_DIR = "training_state"
POLICY_CONFIG_FILE = "config.json"
MODEL_FILE = "model.safetensors"
TRAIN_CONFIG_FILE = "train_config.json"
EVAL_INFO_FILE = "eval_info.json"


def step_name(step: int, total_steps: int) -> str:
    """A checkpoint's folder name: the step, zero-padded to six digits or the run's length."""
    return f"{step:0{max(6, len(str(total_steps)))}d}"


def last_pretrained_model[P: PurePath](run: P) -> P:
    """The policy folder of a run's last checkpoint."""
    return run / CHECKPOINTS_DIR / LAST_CHECKPOINT / PRETRAINED_DIR


def policy_folder_candidates[P: PurePath](location: P) -> tuple[P, P, P]:
    """Where the policy a user names by a folder is, first match wins: the folder itself, its
    `pretrained_model/` (a checkpoint), or its last checkpoint's (a training run)."""
    return location, location / PRETRAINED_DIR, last_pretrained_model(location)
