"""X-VLA's action spaces (LeRobot 0.6.1's `action_hub`): the layout of the model's actions.

An action space says the model's action size, what it does to the state and noisy actions before
the transformer (zeroing gripper channels: their values are logits, not positions), what it does
to the predicted chunk (a sigmoid on gripper logits, cutting padding away) and the training loss,
in named parts that are summed:

    ee6d            20: per arm xyz (x500 MSE), 6D rotation (x10 MSE), gripper logit (BCE)
    joint           14: per arm 6 joints (MSE), gripper logit (BCE x0.1)
    agibot_ee6d     20: ee6d's layout, every part MSE (gripper x10), nothing zeroed
    franka_joint7   20, of which 7 joints are real (MSE on those); the chunk keeps 7
    so101_bimanual  20, of which 12 are real (two arms of 5 joints and a gripper)
    auto            max_action_dim, of which the dataset's action size is real (MSE on those)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor

from rlctl.domain.errors import ConfigError


def _mse(pred: Tensor, target: Tensor, index: tuple[int, ...] | slice) -> Tensor:
    columns = list(index) if isinstance(index, tuple) else index
    return F.mse_loss(pred[:, :, columns], target[:, :, columns])


def _zeroed(x: Tensor, index: tuple[int, ...]) -> Tensor:
    if x.shape[-1] <= max(index):
        return x
    out = x.clone()
    out[..., list(index)] = 0.0
    return out


def _with_sigmoid(x: Tensor, index: tuple[int, ...]) -> Tensor:
    if x.shape[-1] <= max(index):
        return x
    out = x.clone()
    out[..., list(index)] = torch.sigmoid(x[..., list(index)])
    return out


class ActionSpace:
    """The `auto` space (and the base of the others): `real_dim` of `dim_action` values are
    real, the rest padding; MSE on the real ones; the chunk is cut to them."""

    name = "auto"

    def __init__(self, dim_action: int, real_dim: int) -> None:
        self.dim_action, self.real_dim = dim_action, real_dim

    def pad(self, x: Tensor) -> Tensor:
        """Real-size (or model-size) vectors at the model's size, zero-padded."""
        size = x.shape[-1]
        if size == self.dim_action:
            return x
        if size != self.real_dim:
            x = (
                x[..., : self.real_dim]
                if size > self.real_dim
                else F.pad(x, (0, self.real_dim - size))
            )
        return F.pad(x, (0, self.dim_action - self.real_dim))

    def preprocess(self, proprio: Tensor, action: Tensor) -> tuple[Tensor, Tensor]:
        return proprio, self.pad(action)

    def postprocess(self, action: Tensor) -> Tensor:
        return action[..., : self.real_dim]

    def loss(self, pred: Tensor, target: Tensor) -> dict[str, Tensor]:
        pred, target = self.pad(pred), self.pad(target)
        return {"joints_loss": _mse(pred, target, slice(0, self.real_dim))}


class FixedSpace(ActionSpace):
    """A space of a fixed layout, whose real size must be given exactly."""

    def pad(self, x: Tensor) -> Tensor:
        size = x.shape[-1]
        if size not in (self.real_dim, self.dim_action):
            raise ConfigError(
                f"the {self.name} action space takes {self.real_dim} or {self.dim_action} "
                f"values, got {size}",
                where="policy.action_mode",
                hint="choose the action space of your robot, or action_mode=auto",
            )
        return super().pad(x)


class EE6DSpace(ActionSpace):
    name = "ee6d"
    gripper = (9, 19)
    positions = ((0, 1, 2), (10, 11, 12))
    rotations = ((3, 4, 5, 6, 7, 8), (13, 14, 15, 16, 17, 18))

    def __init__(self) -> None:
        super().__init__(20, 20)

    def preprocess(self, proprio: Tensor, action: Tensor) -> tuple[Tensor, Tensor]:
        return _zeroed(proprio, self.gripper), _zeroed(action, self.gripper)

    def postprocess(self, action: Tensor) -> Tensor:
        return _with_sigmoid(action, self.gripper)

    def gripper_loss(self, pred: Tensor, target: Tensor) -> Tensor:
        parts = [
            F.binary_cross_entropy_with_logits(pred[:, :, i], target[:, :, i]) for i in self.gripper
        ]
        return torch.stack(parts).sum() / len(self.gripper)

    def loss(self, pred: Tensor, target: Tensor) -> dict[str, Tensor]:
        self._check(pred, target)
        position = sum(_mse(pred, target, i) for i in self.positions)
        rotation = sum(_mse(pred, target, i) for i in self.rotations)
        return {
            "position_loss": position * 500.0,
            "rotate6D_loss": rotation * 10.0,
            "gripper_loss": self.gripper_loss(pred, target),
        }

    def _check(self, pred: Tensor, target: Tensor) -> None:
        if pred.shape != target.shape or pred.shape[-1] <= max(self.gripper):
            raise ConfigError(
                f"the {self.name} action space reads {self.dim_action} values per action, "
                f"got predictions {tuple(pred.shape)} and targets {tuple(target.shape)}",
                where="policy.action_mode",
            )


class AgibotEE6DSpace(EE6DSpace):
    name = "agibot_ee6d"

    def preprocess(self, proprio: Tensor, action: Tensor) -> tuple[Tensor, Tensor]:
        return proprio, action

    def postprocess(self, action: Tensor) -> Tensor:
        return action

    def gripper_loss(self, pred: Tensor, target: Tensor) -> Tensor:
        return _mse(pred, target, self.gripper) * 10.0


class JointSpace(EE6DSpace):
    name = "joint"
    gripper = (6, 13)

    def __init__(self) -> None:
        ActionSpace.__init__(self, 14, 14)

    def loss(self, pred: Tensor, target: Tensor) -> dict[str, Tensor]:
        self._check(pred, target)
        joints = tuple(i for i in range(pred.shape[-1]) if i not in self.gripper)
        return {
            "joints_loss": _mse(pred, target, joints),
            "gripper_loss": self.gripper_loss(pred, target) * 0.1,
        }


class FrankaJoint7Space(FixedSpace):
    name = "franka_joint7"

    def __init__(self) -> None:
        super().__init__(20, 7)


class BimanualSO101Space(FixedSpace):
    name = "so101_bimanual"
    gripper = (5, 11)

    def __init__(self) -> None:
        super().__init__(20, 12)

    def preprocess(self, proprio: Tensor, action: Tensor) -> tuple[Tensor, Tensor]:
        return _zeroed(self.pad(proprio), self.gripper), _zeroed(self.pad(action), self.gripper)

    def postprocess(self, action: Tensor) -> Tensor:
        return _with_sigmoid(action, self.gripper)[..., : self.real_dim]

    def loss(self, pred: Tensor, target: Tensor) -> dict[str, Tensor]:
        pred, target = self.pad(pred), self.pad(target)
        return {
            "joints_loss": _mse(pred, target, slice(0, 12)),
            "gripper_loss": _mse(pred, target, self.gripper),
            "left_arm_loss": _mse(pred, target, slice(0, 6)),
            "right_arm_loss": _mse(pred, target, slice(6, 12)),
        }


def action_space(mode: str, *, real_dim: int, max_dim: int) -> ActionSpace:
    """The space `mode` names; `auto` is the dataset's `real_dim` padded to `max_dim`."""
    spaces = {
        "ee6d": EE6DSpace,
        "joint": JointSpace,
        "agibot_ee6d": AgibotEE6DSpace,
        "franka_joint7": FrankaJoint7Space,
        "so101_bimanual": BimanualSO101Space,
    }
    key = mode.lower()
    if key == "auto":
        if real_dim > max_dim:
            raise ConfigError(
                f"the actions have {real_dim} values, more than max_action_dim={max_dim}",
                where="policy.max_action_dim",
                hint=f"set --policy.max_action_dim={real_dim} or more",
            )
        return ActionSpace(max_dim, real_dim)
    if key not in spaces:
        raise ConfigError(
            f"unknown action space {mode!r}",
            where="policy.action_mode",
            hint=f"choose one of: {', '.join([*spaces, 'auto'])}",
        )
    return spaces[key]()
