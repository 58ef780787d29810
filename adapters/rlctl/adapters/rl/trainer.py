"""The learner's torch side: `SACTrainer` (SAC on a Gaussian actor), its factory, the replay store.

A checkpoint is LeRobot 0.6.1's learner layout, file for file where LeRobot has the file:

    checkpoints/<step>/pretrained_model/   the policy, its config and processors (any tool reads it)
    checkpoints/<step>/algorithm/          config.json, model.safetensors: the critics, targets,
                                           temperature (`sac.SoftActorCritic`)
    checkpoints/<step>/training_state/
        actor/, critic/, temperature/, discrete_critic/   optimizer_state.safetensors and
                                           optimizer_param_groups.json, one optimiser each
        rng_state.safetensors              python, numpy and torch generators
        training_step.json                 {"step", "interaction_step"}
    checkpoints/<step>/replay/, replay_offline/            the buffers (safetensors; LeRobot
                                           writes them as datasets beside the checkpoints)
    checkpoints/last -> <step>

So rlctl resumes a LeRobot learner's checkpoint, and LeRobot's `load_training_state` (optimisers,
generators, step) and `SACAlgorithm.load_state_dict` read rlctl's. rlctl writes no
`train_config.json` (LeRobot's whole-pipeline config, env and dataset included): LeRobot's
`--resume` command line wants it. A checkpoint of an earlier rlctl (optimisers in `algorithm/`)
still resumes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import attrs
import numpy as np
import structlog
import torch
from safetensors import SafetensorError
from safetensors.numpy import load_file, save_file

from rlctl.adapters.policies.checkpoint import read_config, read_model, read_processors
from rlctl.adapters.policies.gaussian_actor import GaussianActorPolicy
from rlctl.adapters.policies.loaded_policy import LoadedPolicy, create_policy
from rlctl.adapters.rl.sac import OPTIMIZER_STATE, SoftActorCritic
from rlctl.adapters.training.state_files import (
    RNG_STATE,
    read_tensors,
    restore_rng,
    rng_tensors,
    save_tensors,
)
from rlctl.application.ports.reinforcement import ActorHello, LearnerDescription
from rlctl.domain.config import unstructure
from rlctl.domain.errors import ConfigError, InvalidInput
from rlctl.domain.features import FeatureKind, FeatureSpec, typed_feature
from rlctl.domain.policies import ACTION
from rlctl.domain.policies.gaussian_actor import GaussianActorConfig
from rlctl.domain.rl.replay import ReplayBuffer, TransitionBatch
from rlctl.domain.rl.sac import SACSettings

log = structlog.get_logger(__name__)

PRETRAINED = "pretrained_model"
ALGORITHM = "algorithm"
TRAINING_STATE = "training_state"
TRAINING_STEP = "training_step.json"
REPLAY_FILE = "transitions.safetensors"
REPLAY_META = "replay.json"
# The config's default `dataset_stats` (LeRobot's placeholders).
PLACEHOLDER_STATS: dict[str, dict[str, list[float]]] = cast(
    Any, attrs.fields(GaussianActorConfig).dataset_stats.default
).factory()


class TorchSACTrainer:
    def __init__(self, policy: LoadedPolicy, settings: SACSettings) -> None:
        model = policy.model
        if not isinstance(model, GaussianActorPolicy):
            raise ConfigError(
                f"rlctl rl learn trains a gaussian_actor policy, not {model.config.type_name!r}",
                where="--policy.type",
                hint="--policy.type=gaussian_actor",
            )
        self.policy = policy
        self.model = model
        self.settings = settings
        self.sac = SoftActorCritic(model, settings)
        self._action_normalizer = _action_normalizer(policy)
        stats = _pipeline_stats(policy)
        self._description = LearnerDescription(model.config, stats)

    @property
    def description(self) -> LearnerDescription:
        return self._description

    @property
    def optimization_step(self) -> int:
        return self.sac.optimization_step

    def update(self, batches: Iterator[TransitionBatch]) -> dict[str, float]:
        return self.sac.update(self._prepared(batch) for batch in batches)

    def weights(self) -> dict[str, np.ndarray]:
        return self.sac.weights()

    def save(self, folder: Path, interaction_step: int) -> None:
        self.policy.save(folder / PRETRAINED)
        self.sac.save(folder / ALGORITHM, unstructure(self.settings))
        state = folder / TRAINING_STATE
        state.mkdir(parents=True, exist_ok=True)
        self.sac.save_optimizers(state)
        save_tensors(rng_tensors(), state / RNG_STATE)
        (state / TRAINING_STEP).write_text(
            json.dumps({"step": self.optimization_step, "interaction_step": interaction_step})
            + "\n",
            encoding="utf-8",
        )

    def _prepared(self, batch: TransitionBatch) -> dict[str, Any]:
        """Tensors on the policy's device, observations normalised, and the executed actions in
        the actor's space (see `_actions`)."""
        device = self.model.device
        return {
            "state": self._observations(batch.state, device),
            "next_state": self._observations(batch.next_state, device),
            "action": torch.from_numpy(self._actions(batch.action)).to(device),
            "reward": torch.from_numpy(batch.reward).to(device),
            "done": torch.from_numpy(batch.done).to(device),
            "discrete_penalty": torch.from_numpy(batch.discrete_penalty).to(device),
        }

    def _actions(self, action: np.ndarray) -> np.ndarray:
        """The robot's executed actions where the actor's proposals live: the critics judge
        both (the stored actions in their loss, the actor's own in its targets and the actor's
        loss), and the actor's tanh output is unnormalised with the action statistics before it
        reaches the robot, so the stored continuous part is normalised with them here (a
        discrete gripper's index stays). LeRobot's trainer normalises observations only, which
        is the same where the statistics map [-1, 1] onto itself (its gym-hil recipe); with
        others (a [0, 2] gripper command as a continuous action) its critics judge the robot's
        values and its actor in another range. With such statistics this is left alone, so
        both tools compute the same bits."""
        if self._action_normalizer is None:
            return np.ascontiguousarray(action, dtype=np.float32)
        dim = self.model.config.action_dim
        continuous = self._action_normalizer.transform(
            np.asarray(action[:, :dim], dtype=np.float32), ACTION, FeatureKind.ACTION
        )
        joined = np.concatenate([np.asarray(continuous), action[:, dim:]], axis=1)
        return np.ascontiguousarray(joined, dtype=np.float32)

    def _observations(self, values: Mapping[str, np.ndarray], device: torch.device) -> Any:
        tensors = {k: torch.from_numpy(np.ascontiguousarray(v)).float() for k, v in values.items()}
        processed = self.policy.preprocessor.process_batch(tensors)
        return {
            k: v.to(device) for k, v in processed.items() if k in self.model.config.input_features
        }


def _action_normalizer(policy: LoadedPolicy) -> Any | None:
    """The pre-processor's normaliser where it moves the action; None where it maps the actor's
    range onto itself (min -1 and max 1, or mean 0 and std 1) or has no action statistics."""
    for step in policy.preprocessor:
        if type(step).__name__ != "Normalizer":
            continue
        stats = getattr(step, "stats", {}).get(ACTION)
        norm_map = getattr(step.config, "norm_map", {})
        mode = str(norm_map.get(FeatureKind.ACTION, "IDENTITY"))
        if stats is None or mode == "IDENTITY":
            return None
        unchanged = {"MIN_MAX": {"min": -1.0, "max": 1.0}, "MEAN_STD": {"mean": 0.0, "std": 1.0}}
        fixed = unchanged.get(mode)
        if fixed is not None and all(
            name in stats and np.all(np.asarray(stats[name]) == value)
            for name, value in fixed.items()
        ):
            return None
        return step
    return None


def _pipeline_stats(policy: LoadedPolicy) -> dict[str, dict[str, np.ndarray]]:
    for step in policy.preprocessor:
        state = getattr(step, "state_dict", None)
        if state is None or type(step).__name__ != "Normalizer":
            continue
        out: dict[str, dict[str, np.ndarray]] = {}
        for flat, value in state().items():
            key, _, name = flat.rpartition(".")
            out.setdefault(key, {})[name] = np.asarray(value, dtype=np.float32)
        return out
    return {}


@attrs.frozen(kw_only=True)
class TrainerSettings:
    policy: GaussianActorConfig
    algorithm: SACSettings
    # A checkpoint to start from (its config and weights; the settings' features ignored).
    policy_path: str | None = None
    device: str | None = None
    # Statistics of the demonstrations, when there are: they fill what the config lacks.
    dataset_stats: Mapping[str, Mapping[str, Any]] | None = None
    dataset_features: Mapping[str, FeatureSpec] | None = None


class TorchSACTrainerFactory:
    def __init__(self, settings: TrainerSettings) -> None:
        self._settings = settings

    def create(self, hello: ActorHello | None) -> TorchSACTrainer:
        s = self._settings
        if s.policy_path is not None:
            return TorchSACTrainer(_read_policy(Path(s.policy_path), s.device), s.algorithm)
        config = s.policy
        if not config.input_features:
            features = s.dataset_features or (hello.features if hello is not None else None)
            if features is None:
                raise ConfigError(
                    "the policy's features are unknown",
                    where="--policy.input_features",
                    hint="start an actor (its robot's features are used), or give --dataset",
                )
            inputs, outputs = policy_features(features, config.num_discrete_actions)
            config = attrs.evolve(config, input_features=inputs, output_features=outputs)
        stats = _stats(config, s.dataset_stats, hello)
        log.info("learner policy", inputs=sorted(config.input_features), stats=sorted(stats))
        return TorchSACTrainer(create_policy(config, stats, device=s.device), s.algorithm)

    def resume(self, folder: Path) -> tuple[TorchSACTrainer, int]:
        policy = _read_policy(folder / PRETRAINED, self._settings.device)
        trainer = TorchSACTrainer(policy, self._settings.algorithm)
        trainer.sac.load(folder / ALGORITHM)
        state_dir = folder / TRAINING_STATE
        try:
            state = json.loads((state_dir / TRAINING_STEP).read_text("utf-8"))
            step = int(state["step"])
            interaction = int(state.get("interaction_step", 0))
            if step < 0 or interaction < 0:
                raise ValueError(
                    f"step {step} and interaction_step {interaction} must not be negative"
                )
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise InvalidInput(
                f"cannot read the training state: {err}",
                where=str(state_dir / TRAINING_STEP),
                hint="the checkpoint is incomplete; start a new run",
            ) from err
        if (folder / ALGORITHM / OPTIMIZER_STATE).is_file() and not (
            state_dir / "actor" / OPTIMIZER_STATE
        ).is_file():
            step = trainer.sac.load_legacy_optimizers(folder / ALGORITHM)
        else:
            trainer.sac.load_optimizers(state_dir)
        trainer.sac.optimization_step = step
        if (state_dir / RNG_STATE).is_file():
            # As LeRobot's learner resumes: the actor's sampling and the critics' subsampling
            # go on from where they were.
            restore_rng(read_tensors(state_dir / RNG_STATE))
        return trainer, interaction


def _read_policy(folder: Path, device: str | None) -> LoadedPolicy:
    config = read_config(folder)
    model = read_model(folder, config, device=device or "cpu")
    pre, post = read_processors(folder, device=device)
    return LoadedPolicy(model.train(), pre, post)


def policy_features(
    features: Mapping[str, FeatureSpec], num_discrete_actions: int | None = None
) -> tuple[dict[str, FeatureSpec], dict[str, FeatureSpec]]:
    """A robot's (or dataset's) features as the policy's: the state, the environment state and
    cameras `(C, H, W)` in, the action out (its last dimension the gripper's index when there is
    a discrete gripper)."""
    inputs: dict[str, FeatureSpec] = {}
    outputs: dict[str, FeatureSpec] = {}
    for key, spec in features.items():
        kind = spec.kind
        if key == ACTION or kind is FeatureKind.ACTION:
            dim = int(spec.shape[0]) - (1 if num_discrete_actions is not None else 0)
            outputs[ACTION] = typed_feature(FeatureKind.ACTION, (dim,), ACTION)
        elif spec.is_visual:
            height, width, channels = spec.hwc
            inputs[key] = typed_feature(FeatureKind.VISUAL, (channels, height, width), key)
        elif kind in (FeatureKind.STATE, FeatureKind.ENV):
            inputs[key] = typed_feature(kind, tuple(spec.shape), key)
    return inputs, outputs


def _stats(
    config: GaussianActorConfig,
    dataset_stats: Mapping[str, Mapping[str, Any]] | None,
    hello: ActorHello | None,
) -> dict[str, dict[str, np.ndarray]]:
    """The demonstrations' statistics where they fit the features, else the config's
    `dataset_stats`, else the robot's bounds (its action bounds; the ranges it knows of its
    observations, as a simulated arm's joint ranges); what fits none is left unnormalised.

    The config's own default statistics (LeRobot's placeholders, min 0 and max 1, which a
    `--policy.dataset_stats` override merges into rather than replaces) never stand in for a
    robot's bounds: the actor's tanh output is unnormalised with them, and [0, 1] where the
    robot takes [-1, 1] leaves the policy unable to move one way; a state in [0, 1] is no
    joint's range."""
    features = {**config.input_features, **config.output_features}
    bounds = _robot_bounds(config, hello)
    observed = _observation_bounds(hello)
    configured = dict(config.dataset_stats or {})
    for key in list(configured):
        known = bounds is not None if key == ACTION else key in observed
        if known and _is_placeholder(configured[key], key):
            del configured[key]
            log.info("the robot's bounds replace the config's placeholder statistics", feature=key)
    robot: dict[str, Mapping[str, Any]] = {
        key: {"min": low, "max": high} for key, (low, high) in observed.items()
    }
    if bounds is not None:
        robot[ACTION] = {"min": bounds[0], "max": bounds[1]}
    out: dict[str, dict[str, np.ndarray]] = {}
    sources = [("dataset", dataset_stats or {}), ("config", configured), ("robot", robot)]
    for key, feature in features.items():
        for name, source in sources:
            found = source.get(key)
            if found is not None and _fits(found, feature):
                out[key] = {n: np.asarray(v, dtype=np.float32) for n, v in found.items()}
                if name == "robot" and key != ACTION:
                    log.info("normalised with the robot's range", feature=key)
                break
    for key in features:
        if key not in out:
            log.warning("no statistics fit this feature: it is not normalised", feature=key)
    return out


def _robot_bounds(
    config: GaussianActorConfig, hello: ActorHello | None
) -> tuple[np.ndarray, np.ndarray] | None:
    """The robot's bounds on the policy's continuous actions (a discrete gripper's left out)."""
    if hello is None or hello.action_low is None or hello.action_high is None:
        return None
    dim = config.action_dim
    low = np.asarray(hello.action_low, dtype=np.float32).reshape(-1)[:dim]
    high = np.asarray(hello.action_high, dtype=np.float32).reshape(-1)[:dim]
    if low.shape != (dim,) or high.shape != (dim,):
        return None
    if not (np.isfinite(low).all() and np.isfinite(high).all()):
        return None
    return low, high


def _observation_bounds(hello: ActorHello | None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The ranges the robot knows of its observations, where finite."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for key, (low, high) in (hello.observation_bounds if hello is not None else {}).items():
        low32, high32 = np.asarray(low, np.float32), np.asarray(high, np.float32)
        if np.isfinite(low32).all() and np.isfinite(high32).all():
            out[key] = (low32, high32)
    return out


def _is_placeholder(stats: Mapping[str, Any] | None, key: str = ACTION) -> bool:
    """Whether `stats` are the config's default statistics of `key` (LeRobot's placeholder)."""
    if stats is None or key not in PLACEHOLDER_STATS:
        return False
    default = PLACEHOLDER_STATS[key]
    if set(stats) != set(default):
        return False
    return all(
        np.asarray(stats[name], dtype=np.float64).shape == np.asarray(values).shape
        and np.allclose(np.asarray(stats[name], dtype=np.float64), values)
        for name, values in default.items()
    )


def _fits(stats: Mapping[str, Any], feature: FeatureSpec) -> bool:
    for value in stats.values():
        array = np.asarray(value, dtype=np.float64)
        if array.size not in (int(feature.shape[0]), 1) and array.shape != tuple(feature.shape):
            return False
    return True


class SafetensorsReplayStore:
    """The replay in one safetensors file per buffer (data only), with its capacity beside."""

    def save(self, folder: Path, buffer: ReplayBuffer) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        arrays = {k: np.ascontiguousarray(v) for k, v in buffer.arrays().items()}
        temporary = folder / f".{REPLAY_FILE}.tmp"
        save_file(arrays, str(temporary))
        temporary.replace(folder / REPLAY_FILE)
        (folder / REPLAY_META).write_text(
            json.dumps({"capacity": buffer.capacity, "size": len(buffer)}) + "\n", "utf-8"
        )

    def load(self, folder: Path, capacity: int) -> ReplayBuffer | None:
        path = folder / REPLAY_FILE
        if not path.is_file():
            return None
        try:
            arrays = load_file(str(path))
        except (SafetensorError, OSError) as err:
            raise InvalidInput(
                f"cannot read the saved replay: {err}",
                where=str(path),
                hint="the checkpoint is damaged; resume from an earlier one",
            ) from err
        return ReplayBuffer.from_arrays(capacity, arrays)
