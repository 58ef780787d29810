"""Each policy's optimiser and schedule are LeRobot 0.6.1's presets; overrides change one value."""

from __future__ import annotations

import attrs
import pytest

from rlctl.domain.errors import ConfigError
from rlctl.domain.policies import ACTConfig, DiffusionConfig, MLPConfig, PolicyConfig
from rlctl.domain.train_presets import OptimizerSpec, SchedulerSpec, resolve_optimization
from rlctl.domain.train_settings import (
    OptimizerOverrides,
    SchedulerOverrides,
    TrainSettings,
)


def test_act_preset_is_adamw_without_schedule():
    optimizer, scheduler = resolve_optimization(TrainSettings(policy=ACTConfig()))
    assert optimizer == OptimizerSpec(type="adamw", lr=1e-5, weight_decay=1e-4)
    assert optimizer.betas == (0.9, 0.999) and optimizer.grad_clip_norm == 10.0
    assert scheduler is None


def test_diffusion_preset_is_adam_with_cosine_warmup():
    optimizer, scheduler = resolve_optimization(TrainSettings(policy=DiffusionConfig()))
    assert optimizer == OptimizerSpec(
        type="adam", lr=1e-4, betas=(0.95, 0.999), eps=1e-8, weight_decay=1e-6
    )
    assert scheduler == SchedulerSpec(type="diffuser", name="cosine", num_warmup_steps=500)


def test_mlp_preset_follows_its_config():
    optimizer, scheduler = resolve_optimization(TrainSettings(policy=MLPConfig(optimizer_lr=3e-3)))
    assert (optimizer.type, optimizer.lr, scheduler) == ("adamw", 3e-3, None)


def test_overrides_replace_single_values():
    settings = TrainSettings(
        policy=DiffusionConfig(),
        optimizer=OptimizerOverrides(lr=3e-4, betas=[0.9, 0.99]),
        scheduler=SchedulerOverrides(num_warmup_steps=10),
        grad_clip_norm=1.0,
    )
    optimizer, scheduler = resolve_optimization(settings)
    assert (optimizer.type, optimizer.lr, optimizer.betas) == ("adam", 3e-4, (0.9, 0.99))
    assert optimizer.weight_decay == 1e-6 and optimizer.grad_clip_norm == 1.0
    assert scheduler == SchedulerSpec(type="diffuser", name="cosine", num_warmup_steps=10)


def test_scheduler_can_be_turned_off_or_added():
    off = TrainSettings(policy=DiffusionConfig(), scheduler=SchedulerOverrides(type="none"))
    assert resolve_optimization(off)[1] is None
    added = TrainSettings(
        policy=ACTConfig(), scheduler=SchedulerOverrides(type="constant_with_warmup")
    )
    assert resolve_optimization(added)[1] == SchedulerSpec(type="constant_with_warmup")


def test_without_the_preset_lerobots_default_adam_is_used():
    optimizer, scheduler = resolve_optimization(
        TrainSettings(policy=ACTConfig(), use_policy_training_preset=False)
    )
    assert optimizer == OptimizerSpec() and scheduler is None


@attrs.frozen(kw_only=True)
class PluginConfig(PolicyConfig):
    """A policy type from another package (never registered here): its preset comes with it."""

    optimizer_lr: float = 5e-4

    def optimizer_preset(self) -> OptimizerSpec:
        return OptimizerSpec(type="sgd", lr=self.optimizer_lr, momentum=0.9)

    def scheduler_preset(self) -> SchedulerSpec:
        return SchedulerSpec(type="constant_with_warmup", num_warmup_steps=7)


def test_a_policy_type_brings_its_own_preset_with_its_config():
    optimizer, scheduler = resolve_optimization(TrainSettings(policy=PluginConfig()))
    assert optimizer == OptimizerSpec(type="sgd", lr=5e-4, momentum=0.9)
    assert scheduler == SchedulerSpec(type="constant_with_warmup", num_warmup_steps=7)
    overridden = TrainSettings(policy=PluginConfig(), optimizer=OptimizerOverrides(lr=1e-2))
    assert resolve_optimization(overridden)[0].lr == 1e-2


def test_a_policy_type_without_a_preset_trains_with_lerobots_default_adam():
    assert resolve_optimization(TrainSettings(policy=PolicyConfig())) == (OptimizerSpec(), None)


@pytest.mark.parametrize(
    "settings",
    [
        TrainSettings(optimizer=OptimizerOverrides(type="lion")),
        TrainSettings(optimizer=OptimizerOverrides(lr=0.0)),
        TrainSettings(scheduler=SchedulerOverrides(type="diffuser", name="exotic")),
    ],
)
def test_bad_overrides_are_config_errors(settings):
    with pytest.raises(ConfigError):
        resolve_optimization(settings)
