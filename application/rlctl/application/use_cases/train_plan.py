"""PlanTraining: what a run trains with, decided once before any model is built.

The policy of the work, as `lerobot-train` does it:
- the dataset is the folder given, or a Hub repo id pulled into the cache (only `meta/` when
  streaming); under several processes the main one pulls while the others wait, then they find
  it in the cache; several (a mixture) are each resolved so, and the policy is built from what
  they share (`mixture_meta`);
- a resumed run trains the checkpoint's policy config as `TrainPolicy` read it (its statistics
  are authoritative): nothing of the policy is decided again;
- a new run's policy takes its input and output features from the dataset, without cameras for
  a policy that never looks at them (so they are never decoded);
- `policy.pretrained_path` (fine-tuning) is resolved once, like the dataset: the run trains the
  same kind of policy on features of the same shapes (`fine_tuning`);
- `policy.use_relative_actions` takes the dataset's action names, checked against its state,
  and the `action` statistics of `action - state` over every action window (computed by the
  main process, shared with the others);
- the optimiser and schedule are the policy's preset under `--optimizer.*` / `--scheduler.*`.

The result is a `TrainingPlan` whose locations are local: the backend pulls nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import structlog

from rlctl.application.fine_tuning import check_pretrained, fine_tuned_config
from rlctl.application.ports.dataset import DatasetMetaReader, StreamedDatasets
from rlctl.application.ports.dataset_tools import DatasetStatsAccess
from rlctl.application.ports.policy import PolicyLoader
from rlctl.application.ports.training import CheckpointRef, TrainingPlan, TrainingProcesses
from rlctl.application.relative_actions import (
    relative_action_statistics,
    with_relative_action_names,
)
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.dataset_mixture import mixture_meta
from rlctl.domain.errors import DatasetError, NotSupported
from rlctl.domain.features import FeatureKind
from rlctl.domain.policies import ACTION, OBS_STATE, PolicyConfig, dataset_policy_features
from rlctl.domain.run_layout import POLICY_CONFIG_FILE
from rlctl.domain.train_presets import resolve_optimization
from rlctl.domain.train_settings import DatasetSource, TrainSettings

log = structlog.get_logger(__name__)

# `ResolveDataset` and `ResolvePolicy` (a folder stays a folder; a repo id becomes its local
# copy), as the composition root binds them.
ResolveDatasetFn = Callable[..., Path]
ResolvePolicyFn = Callable[..., Path]


class PlanTraining:
    def __init__(
        self,
        *,
        resolve_dataset: ResolveDatasetFn,
        streams: StreamedDatasets,
        meta_reader: DatasetMetaReader,
        resolve_policy: ResolvePolicyFn,
        policies: PolicyLoader,
        columns: DatasetStatsAccess,
    ) -> None:
        self._resolve_dataset = resolve_dataset
        self._streams = streams
        self._meta_reader = meta_reader
        self._resolve_policy = resolve_policy
        self._policies = policies
        self._columns = columns

    def __call__(
        self,
        settings: TrainSettings,
        resume: CheckpointRef | None,
        processes: TrainingProcesses,
    ) -> TrainingPlan:
        source = settings.dataset
        local = bool(source.root)
        roots = tuple(
            _once(processes, partial(self._dataset_root, source, at), local=local)
            for at in source.locations_given or [source.location]
        )
        root = roots[0]
        if len(roots) > 1:
            meta, left_out = mixture_meta(
                [(str(r), self._meta_reader.read_meta(str(r))) for r in roots]
            )
            log.info("dataset mixture", datasets=len(roots), weights=source.weights,
                     left_out="; ".join(left_out) or None)  # fmt: skip
        else:
            meta = self._meta_reader.read_meta(str(root))
        pretrained: Path | None = None
        action_stats: Mapping[str, Any] | None = None
        if resume is None:
            config = settings.policy
            if config.pretrained_path:
                pretrained = _once(processes, lambda: self._pretrained_folder(config))
                pretrained_config = self._policies.read_config(pretrained)
                config = fine_tuned_config(pretrained_config, config)
                check_pretrained(
                    pretrained_config,
                    config,
                    meta.features,
                    where=str(pretrained / POLICY_CONFIG_FILE),
                )
            config = with_dataset_features(config, meta)
            config = with_relative_action_names(config, meta.features)
            config = attrs.evolve(config, device=processes.device_type)
            settings = attrs.evolve(settings, policy=config)
            if config.use_relative_actions and len(roots) > 1:
                raise NotSupported(
                    "relative action statistics are computed over one dataset, not a mixture",
                    where="policy.use_relative_actions",
                    hint="train a mixture with policy.use_relative_actions=false, or merge the "
                    "datasets first (`rlctl dataset merge`)",
                )
            if config.use_relative_actions:
                mine = self._relative_action_stats(settings, root) if processes.is_main else None
                action_stats = processes.share(mine)
        optimizer, scheduler = resolve_optimization(settings)
        return TrainingPlan(
            settings=settings,
            dataset_root=root,
            dataset=meta,
            dataset_roots=roots if len(roots) > 1 else (),
            resume=resume,
            pretrained=pretrained,
            action_stats=action_stats,
            optimizer=optimizer,
            scheduler=scheduler,
        )

    def _dataset_root(self, source: DatasetSource, location: str) -> Path:
        if source.root:
            return Path(location).expanduser()
        if source.streaming:
            return self._streams.metadata_root(location, source.revision)
        episodes = tuple(source.episodes) if source.episodes is not None else None
        return self._resolve_dataset(location, revision=source.revision, episodes=episodes)

    def _pretrained_folder(self, config: PolicyConfig) -> Path:
        assert config.pretrained_path
        return self._resolve_policy(config.pretrained_path, revision=config.pretrained_revision)

    def _relative_action_stats(self, settings: TrainSettings, root: Path) -> dict[str, Any]:
        config = settings.policy
        actions, states, episodes = self._action_and_state_columns(settings.dataset, root)
        stats = relative_action_statistics(config, actions, states, episodes)
        log.info(
            "relative actions",
            excluded=list(config.relative_exclude_joints),
            names=list(config.action_feature_names or []),
        )
        return stats

    def _action_and_state_columns(
        self, source: DatasetSource, root: Path
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The `action` and `observation.state` rows of the episodes trained on, in episode
        order, with each row's episode index."""
        if source.streaming:
            raise NotSupported(
                "relative action statistics are computed over the whole dataset, which "
                "streaming does not read ahead",
                where="dataset.streaming",
                hint="pull the dataset (`rlctl dataset pull REPO_ID`) and train without "
                "streaming, or train with policy.use_relative_actions=false",
            )
        wanted = None if source.episodes is None else set(source.episodes)
        actions, states, episodes = [], [], []
        for episode, columns in self._columns.numeric_columns(str(root), [ACTION, OBS_STATE]):
            if wanted is not None and episode not in wanted:
                continue
            actions.append(columns[ACTION])
            states.append(columns[OBS_STATE])
            episodes.append(np.full(len(columns[ACTION]), episode))
        if not actions:
            raise DatasetError(
                "no episode to compute relative action statistics from", where=str(root)
            )
        return np.concatenate(actions), np.concatenate(states), np.concatenate(episodes)


def with_dataset_features(config: PolicyConfig, meta: DatasetMeta) -> PolicyConfig:
    """LeRobot's `make_policy`: features the config leaves empty come from the dataset —
    without cameras for a policy that never looks at them (so they are not even decoded)."""
    inputs, outputs = dataset_policy_features(meta.features)
    if not type(config).reads_images:
        inputs = {k: f for k, f in inputs.items() if f.kind is not FeatureKind.VISUAL}
    return config.with_features(config.input_features or inputs, config.output_features or outputs)


def _once[T](processes: TrainingProcesses, resolve: Callable[[], T], *, local: bool = False) -> T:
    """`resolve()` in every process, the main one first when several train: what it pulls from
    the Hub, the others then find in the cache."""
    if local or not processes.distributed:
        return resolve()
    mine = resolve() if processes.is_main else None
    processes.barrier()
    return mine if mine is not None else resolve()
