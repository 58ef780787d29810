import json

import pytest

from rlctl.domain.errors import ConfigError
from rlctl.entrypoints.settings import (
    RESOLVED_CONFIG_NAME,
    AppSettings,
    DatasetSettings,
    environment_layer,
    resolve_config,
    write_resolved_config,
)


def test_environment_layer_reads_double_underscore_sections():
    env = {
        "RLCTL_DATASET__VIDEO_BACKEND": "pyav",
        "RLCTL_PROGRESS__X": "1",
        "HOME": "/root",
        "RLCTL_LOG_LEVEL": "debug",
    }
    assert environment_layer(env) == {"dataset": {"video_backend": "pyav"}, "progress": {"x": 1}}


def test_environment_for_other_sections_is_ignored():
    env = {"RLCTL_POLICY__TYPE": "act", "RLCTL_DATASET__VIDEO_BACKEND": "pyav"}
    assert resolve_config(AppSettings, environ=env).dataset.video_backend == "pyav"


def test_a_bad_choice_is_a_config_error():
    with pytest.raises(ConfigError, match="video_backend"):
        resolve_config(AppSettings, overrides=[("dataset.video_backend", "vlc")])


def test_json_config_file(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"dataset": {"store": "memory"}}))
    assert resolve_config(AppSettings, config_file=path, environ={}).dataset.store == "memory"


def test_missing_config_file_names_it(tmp_path):
    with pytest.raises(ConfigError) as info:
        resolve_config(AppSettings, config_file=tmp_path / "absent.yaml", environ={})
    assert "absent.yaml" in str(info.value)


def test_resolved_config_is_written_beside_outputs(tmp_path):
    settings = AppSettings(dataset=DatasetSettings(video_backend="pyav"))
    path = write_resolved_config(settings, tmp_path / "run")
    assert path.name == RESOLVED_CONFIG_NAME
    assert resolve_config(AppSettings, config_file=path, environ={}) == settings


def test_a_bad_value_is_named_as_the_user_gave_it(tmp_path):
    from rlctl.entrypoints.settings import given_as

    overrides = [("dataset.video_backend", "vlc")]
    with pytest.raises(ConfigError) as info:
        resolve_config(AppSettings, overrides=overrides, environ={})
    assert info.value.where == "--dataset.video_backend"
    env = {"RLCTL_DATASET__VIDEO_BACKEND": "vlc"}
    with pytest.raises(ConfigError) as info:
        resolve_config(AppSettings, environ=env)
    assert info.value.where == "RLCTL_DATASET__VIDEO_BACKEND"
    path = tmp_path / "c.yaml"
    path.write_text("dataset:\n  video_backend: vlc\n")
    with pytest.raises(ConfigError) as info:
        resolve_config(AppSettings, config_file=path, environ={})
    assert info.value.where == f"dataset.video_backend in {path}"
    # The highest layer that gives the value is the one named.
    with pytest.raises(ConfigError) as info:
        resolve_config(AppSettings, config_file=path, environ=env, overrides=overrides)
    assert info.value.where == "--dataset.video_backend"
    assert given_as("a.b.c", overrides=[("a.b", {})]) == "a.b.c (in --a.b)"
    assert given_as("a.b[2]", env={"a": {"b": [1]}}) == "a.b[2] (in RLCTL_A__B)"
    assert given_as("a.b", overrides=[("x", 1)]) == "a.b"
