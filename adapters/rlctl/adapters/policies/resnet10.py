"""HIL-SERL's ResNet-10, the image encoder LeRobot's SAC and reward classifier name
(`lerobot/resnet10`, `helper2424/resnet10`), read without running code from the Hub.

LeRobot loads it with `AutoModel.from_pretrained(name, trust_remote_code=True)`: the model's
own Python file, downloaded, runs in the user's process. rlctl builds the same network here and
reads only the folder's `config.json` (`"model_type": "resnet10"`) and `model.safetensors`, under
the same parameter names, so a checkpoint trained by either tool loads in the other.

    image ─► conv 7x7/2 ─► group norm ─► act ─► max pool 3x3/2 ("SAME")
          ─► 4 basic blocks (3x3 convs, group norms, a 1x1 shortcut where the width changes;
             strides 1, 2, 2, 2) ─► last_hidden_state (N, 512, H/32, W/32)

The network was converted from JAX: its convolutions and pooling pad as JAX's "SAME" does
(more on the bottom and right when the total is odd), which PyTorch's symmetric `padding` cannot
express, hence the explicit pads.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, NamedTuple

from torch import Tensor, nn

from rlctl.domain.errors import ConfigError, RlctlError

MODEL_TYPE = "resnet10"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
# The names LeRobot's configs use for it; their architecture is the default one below, so a
# checkpoint naming them loads without the Hub (its own weights replace the encoder's).
KNOWN_NAMES = frozenset({"lerobot/resnet10", "helper2424/resnet10"})
ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU, "swish": nn.SiLU}


class ResNet10Settings(NamedTuple):
    num_channels: int = 3
    embedding_size: int = 64
    hidden_sizes: tuple[int, ...] = (64, 128, 256, 512)
    hidden_act: str = "relu"

    @classmethod
    def from_config(cls, data: dict[str, Any], where: str) -> ResNet10Settings:
        try:
            settings = cls(
                num_channels=int(data.get("num_channels", 3)),
                embedding_size=int(data.get("embedding_size", 64)),
                hidden_sizes=tuple(int(s) for s in data.get("hidden_sizes", (64, 128, 256, 512))),
                hidden_act=str(data.get("hidden_act", "relu")),
            )
        except (TypeError, ValueError) as err:
            raise ConfigError(f"the ResNet-10 config is malformed: {err}", where=where) from err
        if settings.hidden_act not in ACTIVATIONS:
            raise ConfigError(
                f"the ResNet-10 config's activation {settings.hidden_act!r} is not one of "
                f"{', '.join(sorted(ACTIVATIONS))}",
                where=where,
            )
        if not settings.hidden_sizes or min(settings.hidden_sizes) < 4:
            raise ConfigError("the ResNet-10 config needs hidden_sizes of 4 or more", where=where)
        return settings


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """JAX's "SAME" padding of one dimension: (before, after), the odd one after."""
    total = max(0, (math.ceil(size / stride) - 1) * stride + kernel - size)
    return total // 2, total - total // 2


class SameConv2d(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int, stride: int = 1) -> None:
        super().__init__()
        self.kernel, self.stride = kernel, stride
        self.conv = nn.Conv2d(in_channels, out_channels, kernel, stride=stride, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        top, bottom = same_padding(x.shape[-2], self.kernel, self.stride)
        left, right = same_padding(x.shape[-1], self.kernel, self.stride)
        return self.conv(nn.functional.pad(x, (left, right, top, bottom)))  # type: ignore[no-any-return]


class SameMaxPool2d(nn.Module):
    def __init__(self, kernel: int = 3, stride: int = 2) -> None:
        super().__init__()
        self.kernel, self.stride = kernel, stride

    def forward(self, x: Tensor) -> Tensor:
        top, bottom = same_padding(x.shape[-2], self.kernel, self.stride)
        left, right = same_padding(x.shape[-1], self.kernel, self.stride)
        padded = nn.functional.pad(x, (left, right, top, bottom), value=-math.inf)
        return nn.functional.max_pool2d(padded, self.kernel, self.stride)


class GroupNorm(nn.Module):
    """Four groups; wrapped as the original is, so the parameters are `<name>.group_norm.*`."""

    def __init__(self, channels: int, groups: int = 4) -> None:
        super().__init__()
        self.group_norm = nn.GroupNorm(groups, channels, eps=1e-5)

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() == 3:  # one unbatched image
            return self.group_norm(x.unsqueeze(0)).squeeze(0)  # type: ignore[no-any-return]
        return self.group_norm(x)  # type: ignore[no-any-return]


class BasicBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, act: str, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = SameConv2d(in_channels, out_channels, 3, stride)
        self.norm1 = GroupNorm(out_channels)
        self.act1 = ACTIVATIONS[act]()
        self.conv2 = SameConv2d(out_channels, out_channels, 3)
        self.norm2 = GroupNorm(out_channels)
        self.act2 = ACTIVATIONS[act]()
        # Only where the width changes, as the original (a stride alone keeps the identity).
        self.shortcut = (
            nn.Sequential(SameConv2d(in_channels, out_channels, 1, stride), GroupNorm(out_channels))
            if in_channels != out_channels
            else None
        )

    def forward(self, x: Tensor) -> Tensor:
        out = self.norm2(self.conv2(self.act1(self.norm1(self.conv1(x)))))
        identity = x if self.shortcut is None else self.shortcut(x)
        return self.act2(out + identity)  # type: ignore[no-any-return]


class Encoder(nn.Module):
    def __init__(self, settings: ResNet10Settings) -> None:
        super().__init__()
        widths = (settings.embedding_size, *settings.hidden_sizes)
        self.stages = nn.ModuleList(
            BasicBlock(widths[i], widths[i + 1], settings.hidden_act, stride=1 if i == 0 else 2)
            for i in range(len(settings.hidden_sizes))
        )

    def forward(self, x: Tensor) -> Tensor:
        for stage in self.stages:
            x = stage(x)
        return x


class ResNet10Output(NamedTuple):
    last_hidden_state: Tensor


class ResNet10Config(NamedTuple):
    """What callers read of a transformers config (`hidden_sizes`), and the model type."""

    hidden_sizes: list[int]
    model_type: str = MODEL_TYPE


class ResNet10(nn.Module):
    def __init__(self, settings: ResNet10Settings | None = None) -> None:
        super().__init__()
        settings = settings or ResNet10Settings()
        self.settings = settings
        self.config = ResNet10Config(hidden_sizes=list(settings.hidden_sizes))
        self.embedder = nn.Sequential(
            nn.Conv2d(
                settings.num_channels, settings.embedding_size, 7, stride=2, padding=3, bias=False
            ),
            GroupNorm(settings.embedding_size),
            ACTIVATIONS[settings.hidden_act](),
            SameMaxPool2d(3, 2),
        )
        self.encoder = Encoder(settings)

    def forward(self, x: Tensor) -> ResNet10Output:
        return ResNet10Output(self.encoder(self.embedder(x)))


def resnet10_folder(name: str, *, weights: bool) -> Path | None:
    """The folder of `name` (a local folder or a Hub repo id, fetched into the Hub cache) when
    it holds a ResNet-10; None when it holds another model (or the Hub does not have it)."""
    path = Path(name).expanduser()
    if path.is_dir():
        folder = path
    else:
        from rlctl.application.ports.hub import is_repo_id

        if not is_repo_id(name):
            return None
        from rlctl.adapters.hub.huggingface import HuggingFaceHub
        from rlctl.application.ports.hub import RepoRef

        files = [CONFIG_FILE, WEIGHTS_FILE] if weights else [CONFIG_FILE]
        try:
            folder = HuggingFaceHub().download(RepoRef(name, "model", None), allow=files).root
        except RlctlError:
            if name in KNOWN_NAMES and not weights:
                return None
            raise
    config = folder / CONFIG_FILE
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return folder if isinstance(data, dict) and data.get("model_type") == MODEL_TYPE else None


def is_resnet10(name: str, *, weights: bool) -> bool:
    """Whether `name` is HIL-SERL's ResNet-10 (by its config, or by a name LeRobot uses)."""
    if not weights and name in KNOWN_NAMES:
        return True
    return resnet10_folder(name, weights=weights) is not None


def load_resnet10(name: str, *, weights: bool) -> ResNet10:
    """The ResNet-10 `name` holds; its weights from `model.safetensors` when `weights` (else a
    checkpoint's follow). Never its Python files, and never a pickle."""
    folder = resnet10_folder(name, weights=weights)
    if folder is None:
        if not weights and name in KNOWN_NAMES:
            return ResNet10()
        raise ConfigError(
            f"{name!r} is not a ResNet-10 folder (no config.json of model_type resnet10)",
            where="policy.vision_encoder_name",
        )
    where = str(folder / CONFIG_FILE)
    data = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    model = ResNet10(ResNet10Settings.from_config(data, where))
    if not weights:
        return model
    file = folder / WEIGHTS_FILE
    if not file.is_file():
        raise ConfigError(
            f"the ResNet-10 {name!r} has no {WEIGHTS_FILE}",
            where=str(folder),
            hint="rlctl reads safetensors weights only (a pickled pytorch_model.bin can run "
            "code when read): convert it, or train from the checkpoint that holds the encoder",
        )
    from safetensors.torch import load_file

    state = load_file(str(file))
    state = {k.removeprefix("model."): v for k, v in state.items()}
    result = model.load_state_dict(state, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise ConfigError(
            f"{file} does not hold a ResNet-10 of its config: "
            + "; ".join(
                part
                for part in (
                    f"missing {', '.join(result.missing_keys[:4])}" if result.missing_keys else "",
                    f"unknown {', '.join(result.unexpected_keys[:4])}"
                    if result.unexpected_keys
                    else "",
                )
                if part
            ),
            where=str(file),
        )
    return model
