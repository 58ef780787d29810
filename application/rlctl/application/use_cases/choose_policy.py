"""Which policy acts: in an evaluation, a saved one, one on a policy server, or a registered
type built for the env; on a robot (`rlctl record`), a saved one, one on a server, or none."""

from __future__ import annotations

from rlctl.application.ports.policy import Policy, PolicyLoader
from rlctl.application.ports.policy_service import PolicyConnector
from rlctl.application.ports.simulation import Simulation
from rlctl.domain.errors import ConfigError
from rlctl.domain.eval_settings import EvalPolicySettings
from rlctl.domain.remote_inference import RemotePolicySettings


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


def choose_acting_policy(
    loader: PolicyLoader,
    settings: RemotePolicySettings,
    *,
    path: str | None,
    device: str | None = None,
    connector: PolicyConnector | None = None,
) -> Policy | None:
    """The policy acting on a robot: loaded from `path` (a local checkpoint), reached on
    `settings.server` in real time (the robot never waits for a chunk: it holds or plays what
    is queued), or None when a teleoperator drives alone."""
    if settings.server:
        if path or connector is None:
            raise ConfigError(
                "a policy runs here (--policy.path) or on a server (--policy.server), not both",
                where="policy.server",
            )
        return connector.connect(settings, realtime=True)
    if path:
        return loader.load(
            path,
            device=device,
            rtc=settings.rtc_config,
            rtc_delay=settings.rtc_inference_delay,
        )
    return None
