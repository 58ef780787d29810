"""Which policy an evaluation runs: a saved one, or a registered type built for the env."""

from __future__ import annotations

from rlctl.application.ports.policy import Policy, PolicyLoader
from rlctl.application.ports.simulation import Simulation
from rlctl.domain.eval_settings import EvalPolicySettings


def choose_policy(
    loader: PolicyLoader,
    settings: EvalPolicySettings,
    simulation: Simulation,
    *,
    seed: int | None = None,
) -> Policy:
    """The policy `settings` name: loaded from its path, or built for `simulation` by type."""
    if settings.path:
        return loader.load(settings.path, device=settings.device)
    return loader.create_for_simulation(settings.type, simulation, seed=seed)
