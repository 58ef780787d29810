"""Action chunks: the block of future actions a policy predicts at once.

ACT and Diffusion Policy predict a block of future actions; the control loop executes a few of
them, one per tick, then asks for a new block (the queues that hand them out one tick at a time
are `rlctl.domain.acting`'s). Actions may be numpy arrays or torch tensors (on any device):
this module only indexes them and reads `.shape`, which both share, and never copies them to the
host. The padding mask is small and always kept as a numpy bool array.

A chunk may carry a leading batch axis, `(batch, horizon, action_dim)`, for vectorised
environments. Its padding mask stays `(horizon,)`, shared by the whole batch: a batched queue
pops one `(batch, action_dim)` row per tick for every environment at once (as LeRobot's
`select_action` does), so every environment must skip the same steps.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from rlctl.domain.errors import InvalidInput

Actions = Any  # an array-like with `.shape` and numpy-style indexing: np.ndarray or torch.Tensor


def _mask(value: Any) -> np.ndarray:
    # `.tolist()` works on numpy arrays and on torch tensors on any device alike.
    values = value.tolist() if hasattr(value, "tolist") else value
    return np.asarray(values, dtype=bool)


def _no_padding(actions: Actions) -> np.ndarray:
    shape: tuple[int, ...] = getattr(actions, "shape", ())
    # A malformed `actions` is reported by the shape check in `__attrs_post_init__`.
    return np.zeros(int(shape[-2]) if len(shape) >= 2 else 0, dtype=bool)


@attrs.frozen(eq=False)
class ActionChunk:
    """`actions` of shape `(horizon, action_dim)` or `(batch, horizon, action_dim)`.

    `is_pad[i]` marks step `i` as padding (past the episode end, in training data); padded steps
    are never executed. `start_step` is the control step at which `actions[..., 0, :]` applies.
    """

    actions: Actions
    is_pad: np.ndarray = attrs.field(
        default=attrs.Factory(lambda self: _no_padding(self.actions), takes_self=True),
        converter=_mask,
    )
    start_step: int = 0

    def __attrs_post_init__(self) -> None:
        shape = getattr(self.actions, "shape", None)
        if shape is None or len(shape) not in (2, 3):
            raise InvalidInput(
                f"actions must have shape (horizon, action_dim) or (batch, horizon, action_dim), "
                f"got {tuple(shape) if shape is not None else type(self.actions).__name__}",
                where="action chunk",
            )
        if self.is_pad.shape != (self.horizon,):
            raise InvalidInput(
                f"is_pad must have shape ({self.horizon},) to match the horizon, "
                f"got {self.is_pad.shape}",
                where="action chunk",
                hint="a batched chunk shares one padding mask across the batch",
            )

    @property
    def horizon(self) -> int:
        return int(self.actions.shape[-2])

    @property
    def action_dim(self) -> int:
        return int(self.actions.shape[-1])

    @property
    def batch_size(self) -> int | None:
        """The leading batch size, or None for an unbatched chunk."""
        return int(self.actions.shape[0]) if len(self.actions.shape) == 3 else None

    @property
    def valid_steps(self) -> np.ndarray:
        """Positions in the horizon of the steps that are not padding."""
        return np.flatnonzero(~self.is_pad)

    def step(self, position: int) -> Actions:
        """The action at one position of the horizon: `(action_dim,)`, or `(batch, action_dim)`."""
        return self.actions[..., position, :]

    def valid(self) -> Actions:
        """The unpadded actions, in order, with the horizon axis kept."""
        return select_steps(self.actions, self.valid_steps, self.horizon)

    def take(self, n: int) -> ActionChunk:
        """The first `n` steps (all of them if the horizon is shorter), padding included."""
        if n < 0:
            raise InvalidInput(f"cannot take {n} steps of an action chunk", where="action chunk")
        return ActionChunk(
            actions=self.actions[..., :n, :], is_pad=self.is_pad[:n], start_step=self.start_step
        )


def select_steps(actions: Actions, steps: np.ndarray, horizon: int) -> Actions:
    """`actions[..., steps, :]` for ascending `steps` of a horizon: a view when they are
    contiguous."""
    if steps.size == horizon:
        return actions
    if steps.size and steps[-1] - steps[0] + 1 == steps.size:
        # A contiguous run is a view in numpy and torch; a list index would copy.
        return actions[..., int(steps[0]) : int(steps[-1]) + 1, :]
    return actions[..., steps.tolist(), :]
