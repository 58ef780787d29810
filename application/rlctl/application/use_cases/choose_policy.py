"""Which policy acts: in an evaluation, a saved one, one on a policy server, or a registered
type built for the env; on a robot (`rlctl record`, `rlctl rollout`), a saved one, one on a
server, or none — and, for a saved one, whether the loop waits for its chunks or acts from a
queue the acting engine fills in a worker (`--inference.type=sync|async|rtc`)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import attrs

from rlctl.application.acting_engine import AsyncActing, LocalChunks
from rlctl.application.ports.policy import Policy, PolicyLoader
from rlctl.application.ports.policy_service import PolicyConnector
from rlctl.application.ports.simulation import Simulation
from rlctl.domain.errors import ConfigError, NotSupported
from rlctl.domain.eval_settings import EvalPolicySettings
from rlctl.domain.remote_inference import RemotePolicySettings
from rlctl.domain.rollout import InferenceConfig, RTCInferenceConfig


@runtime_checkable
class DecodesWholeChunks(Protocol):
    """A policy that may decode its actions only a whole chunk at a time (GR00T's relative
    actions, measured from the state the chunk was predicted from): acting one action per tick
    (`select_action`) is refused; `predict_chunk` serves (a policy server, the acting engine).
    A policy without the property acts per tick."""

    @property
    def decodes_whole_chunks(self) -> bool: ...


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
        policy = loader.load(
            settings.path,
            device=settings.device,
            rtc=settings.rtc_config,
            rtc_delay=settings.rtc_inference_delay,
        )
        _check_acts_per_tick(
            policy,
            hint="serve it (`rlctl policy serve --policy.path=...`) and evaluate with "
            "--policy.server=HOST:PORT, where each chunk is decoded whole; or train it with "
            "absolute actions",
        )
        return policy
    return loader.create_for_simulation(settings.type, simulation, seed=seed)


def choose_acting_policy(
    loader: PolicyLoader,
    settings: RemotePolicySettings,
    *,
    path: str | None,
    device: str | None = None,
    connector: PolicyConnector | None = None,
    inference: InferenceConfig | None = None,
    realtime: bool = True,
) -> Policy | None:
    """The policy acting on a robot: loaded from `path` (a local checkpoint), reached on
    `settings.server` in real time (the robot never waits for a chunk: it holds or plays what
    is queued), or None when a teleoperator drives alone.

    `inference` (`rlctl rollout`): `sync` (or None) runs a saved policy in the loop's tick;
    `async` and `rtc` run it in the acting engine's worker, exactly as a served policy runs
    (the same queue, merge rules, delay measurement, real-time chunking and holds).
    `realtime`: the robot keeps the wall clock's pace, so a tick without an action holds;
    otherwise (a simulator) the tick waits for it."""
    settings = _with_inference(settings, inference)
    threshold = inference.asks_at() if inference is not None else None
    if settings.server:
        if path or connector is None:
            raise ConfigError(
                "a policy runs here (--policy.path) or on a server (--policy.server), not both",
                where="policy.server",
            )
        policy = connector.connect(settings, realtime=realtime, queue_threshold=threshold)
        try:
            _check_rtc(policy, inference)
        except BaseException:
            if isinstance(policy, AsyncActing):
                policy.close()  # its worker and its connection
            raise
        return policy
    if not path:
        return None
    if inference is None or not inference.asynchronous:
        loaded = loader.load(
            path,
            device=device,
            rtc=settings.rtc_config,
            rtc_delay=settings.rtc_inference_delay,
        )
        _check_acts_per_tick(
            loaded,
            hint="act from whole chunks: `rlctl rollout --inference.type=async` (or rtc; "
            "--strategy.type=episodic records episodes as `rlctl record` does), or serve it "
            "(`rlctl policy serve`) and pass --policy.server=HOST:PORT",
        )
        return loaded
    # The engine hands the model the actions still queued itself (real-time chunking), so the
    # policy's own select_action buffer is not used: it is loaded as it was saved.
    policy = loader.load(path, device=device)
    _check_rtc(policy, inference)
    from rlctl.application.use_cases.serve_policy import PolicyService

    return AsyncActing(
        LocalChunks(PolicyService({"local": policy})),
        settings,
        realtime=realtime,
        label="policy",
        queue_threshold=threshold,
    )


def _check_acts_per_tick(policy: Policy, *, hint: str) -> None:
    """Refuse, before anything starts, a policy that cannot act one action per tick (LeRobot's
    select_action refuses it at the first tick)."""
    if isinstance(policy, DecodesWholeChunks) and policy.decodes_whole_chunks:
        raise NotSupported(
            f"this {policy.config.type_name} policy's relative actions are decoded a whole chunk "
            "at a time, against the state the chunk was predicted from, so it cannot act one "
            "action per tick here (LeRobot's select_action refuses it too)",
            where="policy.path",
            hint=hint,
        )


def _with_inference(
    settings: RemotePolicySettings, inference: InferenceConfig | None
) -> RemotePolicySettings:
    if isinstance(inference, RTCInferenceConfig):
        return attrs.evolve(settings, rtc_config=inference.rtc)
    return settings


def _check_rtc(policy: Policy, inference: InferenceConfig | None) -> None:
    if (
        isinstance(inference, RTCInferenceConfig)
        and inference.rtc.enabled
        and not policy.config.supports_rtc
    ):
        raise ConfigError(
            f"real-time chunking needs a flow-matching policy; "
            f"{policy.config.type_name} cannot follow the actions still queued",
            where="inference.type",
            hint="use --inference.type=async (chunks merged by --policy.aggregate) or "
            "sync; RTC works with smolvla, pi0 and pi05",
        )
