"""`--policy.compute_dtype` reaches the policy loader of every command that loads a policy to
act (eval, record, rollout, policy serve) and `rlctl.api.load_policy`; a bad value is refused
with the choices; training's policy config takes it and never writes it to config.json."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner
from dependency_injector import providers

from rlctl.domain.config import converter
from rlctl.domain.policies import PolicyConfig, lerobot_config_data
from rlctl.domain.policies.smolvla import SmolVLAConfig
from rlctl.entrypoints.cli.eval import EvalCommandSettings
from rlctl.entrypoints.cli.main import cli
from rlctl.entrypoints.cli.record import RecordCommandSettings
from rlctl.entrypoints.cli.rollout import RolloutCommandSettings
from rlctl.entrypoints.cli.serve_policy import ServeCommandSettings
from rlctl.entrypoints.container import build_container

COMMANDS: list[type[Any]] = [
    EvalCommandSettings,
    RecordCommandSettings,
    RolloutCommandSettings,
    ServeCommandSettings,
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("setting", ["auto", "keep", "float32"])
def test_every_acting_command_hands_its_setting_to_the_loader(
    command: type[Any], setting: str
) -> None:
    data: dict[str, Any] = {"policy": {"path": "somewhere", "compute_dtype": setting}}
    settings = converter.structure(data, command)
    assert settings.policy.compute_dtype == setting
    assert build_container(settings).policy_loader().compute_dtype == setting


def test_by_default_the_loader_decides_by_the_device() -> None:
    assert build_container().policy_loader().compute_dtype is None  # auto
    assert build_container(EvalCommandSettings()).policy_loader().compute_dtype == "auto"


def test_the_api_loader_takes_its_own_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    import rlctl.api
    from rlctl.adapters.policies import loaded_policy

    seen: list[str | None] = []
    monkeypatch.setattr(
        loaded_policy,
        "load_policy_folder",
        lambda location, **options: seen.append(options["compute_dtype"]),
    )
    container = build_container()
    container.resolve_policy.override(providers.Object(lambda location: location))
    rlctl.api.load_policy("folder", compute_dtype="keep", using=container)
    rlctl.api.load_policy("folder", using=container)
    assert seen == ["keep", None]


def test_a_bad_value_is_refused_with_the_choices() -> None:
    result = CliRunner().invoke(
        cli, ["policy", "serve", "--policy.path=nowhere", "--policy.compute_dtype=bf16"]
    )
    assert result.exit_code != 0
    assert "compute_dtype" in result.output and "auto, keep, float32" in result.output
    assert "Traceback" not in result.output


def test_training_takes_it_and_config_json_never_holds_it() -> None:
    config = converter.structure({"type": "smolvla", "compute_dtype": "keep"}, PolicyConfig)
    assert isinstance(config, SmolVLAConfig)
    assert config.compute_dtype == "keep"
    assert "compute_dtype" not in lerobot_config_data(config)
