"""Which policy an evaluation runs: a saved one, one on a policy server, or a registered type
built for the env."""

from __future__ import annotations

from rlctl.application.ports.policy import Policy, PolicyLoader
from rlctl.application.ports.policy_service import PolicyConnector
from rlctl.application.ports.simulation import Simulation
from rlctl.domain.errors import ConfigError
from rlctl.domain.eval_settings import EvalPolicySettings


def choose_policy(
    loader: PolicyLoader,
    settings: EvalPolicySettings,
    simulation: Simulation,
    *,
    seed: int | None = None,
    connector: PolicyConnector | None = None,
) -> Policy:
    """The policy `settings` name: loaded from its path, reached on its server (a simulation
    waits for its chunks: it has no real time to keep), or built for `simulation` by type."""
    if settings.server:
        if settings.path or connector is None:
            raise ConfigError(
                "a policy runs here (--policy.path) or on a server (--policy.server), not both",
                where="policy.server",
            )
        return connector.connect(settings, realtime=False)
    if settings.path:
        return loader.load(
            settings.path,
            device=settings.device,
            rtc=settings.rtc_config,
            rtc_delay=settings.rtc_inference_delay,
        )
    return loader.create_for_simulation(settings.type, simulation, seed=seed)
