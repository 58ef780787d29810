"""PushPolicy: publish a trained policy's checkpoint on the Hub, as LeRobot's `push_model_to_hub`.

The policy of the work:
- The folder is a `pretrained_model` checkpoint (config.json plus weights); the step folder
  above it (`checkpoints/005000`, `checkpoints/last`) is accepted too.
- Only what a loader reads is pushed: LeRobot's allow-list (`*.safetensors`, `*.json`,
  `*.yaml`, `*.md`), never optimizer state or logs.
- The model card comes from the checkpoint: the policy type and its features (config.json),
  the training run and its dataset (train_config.json), and the evaluation figures
  (eval_info.json, when one is given or lies beside the weights).
- One commit holds weights, configs and card.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import structlog

from rlctl.application.hub_cards import model_card
from rlctl.application.ports.hub import Hub, PushRequest, PushResult, RepoRef, check_repo_id
from rlctl.application.use_cases.push_dataset import refuse_offline
from rlctl.domain.errors import InvalidInput
from rlctl.domain.run_layout import (
    EVAL_INFO_FILE,
    POLICY_CONFIG_FILE,
    TRAIN_CONFIG_FILE,
    policy_folder_candidates,
)

log = structlog.get_logger(__name__)

CONFIG_NAME = POLICY_CONFIG_FILE
TRAIN_CONFIG_NAME = TRAIN_CONFIG_FILE
EVAL_INFO_NAME = EVAL_INFO_FILE
POLICY_FILES = ("*.safetensors", "*.json", "*.yaml", "*.md")
POLICY_IGNORE = ("*.tmp", "*.log", ".cache/")
CHECKPOINT_HINT = (
    "give the pretrained_model folder that `lerobot-train` or `rlctl train` saved "
    "(it holds config.json and model.safetensors)"
)


@attrs.frozen
class PushPolicyRequest:
    directory: str
    repo_id: str
    private: bool | None = None
    branch: str | None = None
    tags: tuple[str, ...] = ()
    # None: the license in config.json, else apache-2.0 (LeRobot's default).
    license: str | None = None
    # None: eval_info.json beside the weights, if there is one.
    eval_info: str | None = None


def checkpoint_dir(directory: str | Path) -> Path:
    """The folder holding config.json: `directory` itself, its `pretrained_model/`, or a run's
    last checkpoint's."""
    path = Path(directory).expanduser()
    for candidate in policy_folder_candidates(path):
        if (candidate / CONFIG_NAME).is_file():
            return candidate
    raise InvalidInput(
        "no config.json here: this is not a policy checkpoint",
        where=str(path),
        hint=CHECKPOINT_HINT,
    )


def read_policy_json(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise InvalidInput(f"cannot read the {what} ({err.strerror})", where=str(path)) from err
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InvalidInput(
            f"the {what} is not valid JSON ({err})",
            where=str(path),
            hint="restore it from the training run's output folder",
        ) from err
    if not isinstance(data, dict):
        raise InvalidInput(f"the {what} must hold a JSON object", where=str(path))
    return data


class PushPolicy:
    def __init__(self, hub: Hub) -> None:
        self._hub = hub

    def __call__(self, request: PushPolicyRequest) -> PushResult:
        check_repo_id(request.repo_id)
        refuse_offline(self._hub, f"policy {request.repo_id}")
        folder = checkpoint_dir(request.directory)
        if not any(folder.glob("*.safetensors")):
            raise InvalidInput(
                "the checkpoint has no weights (*.safetensors)",
                where=str(folder),
                hint=CHECKPOINT_HINT,
            )
        config = read_policy_json(folder / CONFIG_NAME, "policy config")
        train_path = folder / TRAIN_CONFIG_NAME
        train_config = (
            read_policy_json(train_path, "training config") if train_path.is_file() else None
        )
        eval_info = self._eval_info(folder, request.eval_info)
        card = model_card(
            config,
            request.repo_id,
            train_config=train_config,
            eval_info=eval_info,
            tags=request.tags,
            license=request.license,
        )
        result = self._hub.push(
            PushRequest(
                repo=RepoRef(request.repo_id, "model", request.branch),
                folder=folder,
                card=card,
                commit_message=f"Upload {config.get('type', 'policy')} policy weights, "
                "configs and card (rlctl)",
                allow=POLICY_FILES,
                ignore=POLICY_IGNORE,
                private=request.private,
            )
        )
        log.info("policy pushed", repo_id=result.repo_id, commit=result.commit, url=result.url)
        return result

    @staticmethod
    def _eval_info(folder: Path, given: str | None) -> dict[str, Any] | None:
        if given is not None:
            return read_policy_json(Path(given).expanduser(), "evaluation results")
        beside = folder / EVAL_INFO_NAME
        return read_policy_json(beside, "evaluation results") if beside.is_file() else None
