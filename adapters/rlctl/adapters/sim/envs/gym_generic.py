"""Any registered gym id: `--env.type=gym --env.gym_id=CartPole-v1 --env.package=...`.

The features and the feature map are declared in the config, since rlctl cannot guess what a
policy should read from an arbitrary env.
"""

from __future__ import annotations

from typing import Any

import attrs

from rlctl.adapters.sim.config import EnvConfig
from rlctl.application.ports.simulation import SimTask


@EnvConfig.register("gym")
@attrs.frozen(kw_only=True)
class GymEnv(EnvConfig):
    # The full gym id (`gym_pusht/PushT-v0`, `CartPole-v1`).
    id: str = "CartPole-v1"
    # Imported when the id is not registered yet; defaults to the id's namespace.
    package: str | None = None
    # The requirement to suggest when the package is missing (`pip install '<install>'`).
    install: str | None = None
    suite: str = "gym"
    kwargs: dict[str, Any] = attrs.field(factory=dict)

    @property
    def gym_id(self) -> str:
        return self.id

    @property
    def package_name(self) -> str:
        if self.package:
            return self.package
        namespace, _, _ = self.id.rpartition("/")
        return namespace or "gymnasium"

    def gym_kwargs(self) -> dict[str, Any]:
        return dict(self.kwargs)

    def tasks(self) -> list[SimTask]:
        return [SimTask(self.suite, 0, self.task or self.id)]

    def install_hint(self) -> str:
        return f"install it with: pip install '{self.install or self.package_name}'"
