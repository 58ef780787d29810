"""`pretrained_model/train_config.json`: the run in LeRobot 0.6.1's `TrainPipelineConfig` keys.

LeRobot saves it beside every checkpoint's policy (its Hub model cards and `--config_path` read
it). rlctl's own resolved settings are `rlctl_config.json` in the output dir; this file says the
same in LeRobot's vocabulary, with LeRobot's defaults for what rlctl has no setting for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlctl.domain.config import unstructure
from rlctl.domain.features import typed_feature_data
from rlctl.domain.optimization import VQBET
from rlctl.domain.run_layout import TRAIN_CONFIG_FILE
from rlctl.domain.train_presets import COSINE_DECAY, XVLA_ADAMW, OptimizerSpec, SchedulerSpec
from rlctl.domain.train_settings import TrainSettings

TRAIN_CONFIG_NAME = TRAIN_CONFIG_FILE


def _optimizer(spec: OptimizerSpec) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": spec.type,
        "lr": spec.lr,
        "weight_decay": spec.weight_decay,
        "grad_clip_norm": spec.grad_clip_norm,
    }
    if spec.type == "sgd":
        out.update(momentum=spec.momentum, dampening=0.0, nesterov=False)
    else:
        out.update(betas=list(spec.betas), eps=spec.eps)
    if spec.type == XVLA_ADAMW:
        out.update(
            soft_prompt_lr_scale=spec.soft_prompt_lr_scale,
            soft_prompt_warmup_lr_scale=spec.soft_prompt_warmup_lr_scale,
        )
    return out


def _scheduler(spec: SchedulerSpec | None) -> dict[str, Any] | None:
    if spec is None:
        return None
    out: dict[str, Any] = {"type": spec.type, "num_warmup_steps": spec.num_warmup_steps}
    if spec.type == "diffuser":
        out["name"] = spec.name
    if spec.type == COSINE_DECAY:
        out.update(
            num_decay_steps=spec.num_decay_steps, peak_lr=spec.peak_lr, decay_lr=spec.decay_lr
        )
    if spec.type == VQBET:
        out.update(num_vqvae_training_steps=spec.num_vqvae_training_steps, num_cycles=0.5)
    return out


def _env(env: Any | None) -> dict[str, Any] | None:
    """LeRobot's `env` section: the env config's fields under its `type`, with the features
    the env produces (LeRobot's env configs add the derived ones in `__post_init__`)."""
    if env is None:
        return None
    from rlctl.adapters.sim.config import lerobot_fields

    kept = lerobot_fields(env) | {"type"}
    data = {key: value for key, value in unstructure(env).items() if key in kept}
    data["features"] = {
        key: typed_feature_data(feature) for key, feature in env.env_features().items()
    }
    return data


def lerobot_train_config(
    settings: TrainSettings,
    *,
    policy: dict[str, Any],
    dataset_root: Path,
    optimizer: OptimizerSpec,
    scheduler: SchedulerSpec | None,
    video_backend: str | None,
    env: Any | None = None,
) -> dict[str, Any]:
    """`env` is the simulator evaluated in during training (an `EnvConfig` of
    `rlctl.adapters.sim.config`), if any."""
    source = settings.dataset
    evaluation = settings.eval
    return {
        "dataset": {
            "repo_id": source.repo_id or dataset_root.name,
            "repo_type": "dataset",
            # A streamed dataset has no local root (LeRobot then streams from the Hub too).
            "root": None if source.streaming else str(dataset_root),
            "episodes": source.episodes,
            "image_transforms": unstructure(source.image_transforms),
            "revision": source.revision,
            "use_imagenet_stats": source.use_imagenet_stats,
            "video_backend": video_backend or "pyav",
            "return_uint8": False,
            "depth_output_unit": "mm",
            "streaming": source.streaming,
            "eval_split": 0.0,
        },
        "env": _env(env),
        "policy": policy,
        "reward_model": None,
        "output_dir": settings.output_dir,
        "job_name": settings.job_name or settings.policy.type_name,
        "resume": settings.resume is not None,
        "seed": settings.seed,
        "cudnn_deterministic": False,
        "num_workers": settings.num_workers,
        "batch_size": settings.batch_size,
        "prefetch_factor": 2,
        "persistent_workers": True,
        "dataloader_multiprocessing_context": None,
        "steps": settings.steps,
        "env_eval_freq": settings.eval_freq,
        "log_freq": settings.log_freq,
        "eval_steps": 0,
        "max_eval_samples": 0,
        "tolerance_s": 0.0001,
        "save_checkpoint": settings.save_checkpoint,
        "save_freq": settings.save_freq,
        "use_policy_training_preset": settings.use_policy_training_preset,
        "optimizer": _optimizer(optimizer),
        "scheduler": _scheduler(scheduler),
        "eval": {
            "n_episodes": evaluation.n_episodes,
            # LeRobot has no "auto" batch size; 1 is what its CPU default comes to.
            "batch_size": evaluation.batch_size or 1,
            "use_async_envs": bool(evaluation.use_async_envs),
            "recording": False,
            "recording_repo_id": None,
            "recording_private": False,
        },
        "wandb": {
            "enable": False,
            "disable_artifact": False,
            "project": "lerobot",
            "entity": None,
            "notes": None,
            "run_id": None,
            "mode": None,
            "add_tags": True,
        },
        "peft": None,
        "save_checkpoint_to_hub": False,
        "sample_weighting": None,
        "rename_map": {},
        "checkpoint_path": None,
    }
