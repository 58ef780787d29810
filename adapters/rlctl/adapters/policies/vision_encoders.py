"""Pretrained image encoders by name, as LeRobot's SAC and reward classifier name them.

HIL-SERL's ResNet-10 (`lerobot/resnet10`, LeRobot's default) has code of its own on the Hub,
which LeRobot runs (`trust_remote_code=True`); rlctl builds it itself (`resnet10.py`). Any
other name is a Hugging Face image model loaded with transformers, never with code from the
Hub.
"""

from __future__ import annotations

from torch import nn

from rlctl.domain.errors import ConfigError


def load_vision_encoder(name: str, *, weights: bool, where: str) -> nn.Module:
    """The image model `name` holds (a Hub id or a local folder); its architecture alone when
    `weights` is False (a checkpoint's weights follow). `where`: the setting that named it."""
    from rlctl.adapters.policies.resnet10 import is_resnet10, load_resnet10

    if is_resnet10(name, weights=weights):
        return load_resnet10(name, weights=weights)
    try:
        from transformers import AutoConfig, AutoModel
    except ImportError as error:
        raise ConfigError(
            f"the vision encoder {name!r} needs transformers",
            where=where,
            hint="install it with: pip install 'rlctl[smolvla]' (or: uv sync --extra smolvla)",
        ) from error
    try:
        if weights:
            return AutoModel.from_pretrained(name, trust_remote_code=False)  # type: ignore[no-any-return]
        return AutoModel.from_config(AutoConfig.from_pretrained(name, trust_remote_code=False))  # type: ignore[no-any-return]
    except (OSError, ValueError, KeyError) as error:
        raise ConfigError(
            f"cannot load the vision encoder {name!r}: "
            f"{str(error).splitlines()[0] if str(error) else type(error).__name__}",
            where=where,
            hint="name lerobot/resnet10, a Hugging Face image model without code of its own "
            "(microsoft/resnet-18) or a local folder holding one (config.json + weights); "
            "offline, it must be in the Hugging Face cache",
        ) from error
