"""The actor/learner wire (`rl_service.proto`): its generated modules are fresh, and the learner
refuses what the policy server refuses (no token, pickles, oversized or non-finite messages),
before anything reaches the replay."""

from __future__ import annotations

import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.remote import rl_service_pb2 as pb
from rlctl.adapters.remote import rl_wire, wire
from rlctl.adapters.remote.errors import ServerRefused
from rlctl.adapters.remote.grpc_server import GrpcPolicyServer
from rlctl.adapters.remote.rl_grpc import (
    SERVICE,
    GrpcLearnerEndpoint,
    GrpcLearnerLink,
    served_methods,
)
from rlctl.application.ports.reinforcement import ActorHello, LearnerDescription, LearnerUnavailable
from rlctl.domain.errors import InvalidInput
from rlctl.domain.features import FeatureSpec, typed_feature
from rlctl.domain.policies.gaussian_actor import GaussianActorConfig
from rlctl.domain.rl.replay import RLTransition, stack

REPO = Path(__file__).resolve().parents[3]
PROTO = Path("rlctl/adapters/remote/rl_service.proto")
GENERATED = ("rl_service_pb2.py", "rl_service_pb2.pyi", "rl_service_pb2_grpc.py")
TOKEN = "a-token-of-sixteen-chars"


def test_the_generated_modules_are_up_to_date_with_the_proto(tmp_path: Path) -> None:
    outputs = [f"--{kind}_out={tmp_path}" for kind in ("python", "pyi", "grpc_python")]
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-Iadapters", *outputs, f"adapters/{PROTO}"],
        cwd=REPO,
        check=True,
        timeout=120,
    )
    for name in GENERATED:
        fresh = (tmp_path / PROTO.parent / name).read_text()
        checked_in = (REPO / "adapters" / PROTO.parent / name).read_text()
        assert checked_in == fresh, f"{name} is stale: regenerate it as rl_service.proto says"


def test_each_method_is_a_stream_of_one_message() -> None:
    service = pb.DESCRIPTOR.services_by_name["LearnerService"]
    assert SERVICE == "rlctl.rl.v1.LearnerService"
    assert served_methods() == ["Describe", "PushTransitions", "FetchParameters"]
    assert all(m.client_streaming and not m.server_streaming for m in service.methods)


def transitions(n: int = 3, reward: float = 1.0) -> object:
    return stack(
        [
            RLTransition(
                state={"observation.state": np.full(2, i, dtype=np.float32)},
                action=np.array([0.1], dtype=np.float32),
                reward=reward,
                next_state={"observation.state": np.full(2, i + 1, dtype=np.float32)},
                done=i == n - 1,
                truncated=False,
                is_intervention=i == 0,
            )
            for i in range(n)
        ]
    )


FEATURES = {
    "observation.state": FeatureSpec("observation.state", "float32", (2,)),
    "action": FeatureSpec("action", "float32", (1,)),
}


@pytest.fixture
def learner() -> Iterator[tuple[GrpcLearnerEndpoint, str]]:
    config = GaussianActorConfig(
        input_features={"observation.state": typed_feature("STATE", (2,))},
        output_features={"action": typed_feature("ACTION", (1,))},
    )
    server = GrpcPolicyServer(port=0, token=TOKEN, max_message_bytes=64 * 1024)
    endpoint = GrpcLearnerEndpoint(server)
    stats = {"action": {"min": np.array([-1.0]), "max": np.array([1.0])}}
    address = endpoint.start(lambda hello: LearnerDescription(config, stats), lambda batch: None)
    yield endpoint, address
    endpoint.stop()


def test_an_honest_actor_is_described_to_pushes_and_fetches(learner) -> None:
    endpoint, address = learner
    link = GrpcLearnerLink(address, token=TOKEN, timeout_s=5)
    low, high = np.array([-2.0]), np.array([2.0])
    description = link.describe(ActorHello(FEATURES, low, high))
    assert description.config.type_name == "gaussian_actor"
    np.testing.assert_array_equal(description.stats["action"]["max"], [1.0])
    assert link.push(transitions(), {"Episodic reward": 3.0}) == 0
    (pushed,) = endpoint.take()
    assert pushed.report == {"Episodic reward": 3.0}
    assert pushed.batch is not None and len(pushed.batch) == 3
    np.testing.assert_array_equal(pushed.batch.is_intervention, [True, False, False])
    assert link.fetch(0) == (0, None)
    endpoint.publish(2, {"policy.w": np.arange(3, dtype=np.float32)})
    version, weights = link.fetch(0)
    assert version == 2 and weights is not None
    np.testing.assert_array_equal(weights["policy.w"], [0, 1, 2])
    assert link.fetch(2) == (2, None)
    link.close()


def refused(link: GrpcLearnerLink, method: str, body: bytes) -> ServerRefused:
    with pytest.raises(ServerRefused) as err:
        link.send_raw(method, body)
    return err.value


def test_no_token_is_refused_unread(learner) -> None:
    endpoint, address = learner
    link = GrpcLearnerLink(address, token="not-the-token-at-all", timeout_s=5)
    assert refused(link, "PushTransitions", rl_wire.encode_push(transitions(), None)).code == (
        "UNAUTHENTICATED"
    )
    assert endpoint.take() == []


def test_a_pickle_is_refused(learner) -> None:
    endpoint, address = learner
    link = GrpcLearnerLink(address, token=TOKEN, timeout_s=5)
    body = pickle.dumps({"state": np.zeros(2)})
    err = refused(link, "PushTransitions", body)
    assert err.code == "INVALID_ARGUMENT" and "pickles" in err.message
    assert endpoint.take() == []


@pytest.mark.parametrize(
    "columns, reason",
    [
        ({"reward": np.array([np.nan], dtype=np.float32)}, "NaN or infinity"),
        ({"action": np.array([[np.inf]], dtype=np.float32)}, "NaN or infinity"),
        ({"state.observation.state": np.zeros((1, 2), np.float64)}, "differ"),
        ({"reward": np.zeros(2, dtype=np.float32)}, "rows"),
        ({"extra": np.zeros(1, dtype=np.float32)}, "unknown column"),
        ({"is_intervention": np.zeros(1, dtype=np.float32)}, "bool vector"),
    ],
)
def test_malformed_or_non_finite_transitions_are_refused(learner, columns, reason) -> None:
    endpoint, address = learner
    link = GrpcLearnerLink(address, token=TOKEN, timeout_s=5)
    honest = rl_wire.transition_columns(transitions(1))  # type: ignore[arg-type]
    body = pb.TransitionBatch(transitions=wire.encode_tensors({**honest, **columns}))
    err = refused(link, "PushTransitions", body.SerializeToString())
    assert err.code == "INVALID_ARGUMENT" and reason in err.message
    assert endpoint.take() == []


def test_a_non_finite_report_is_refused(learner) -> None:
    _, address = learner
    link = GrpcLearnerLink(address, token=TOKEN, timeout_s=5)
    body = pb.TransitionBatch(report_json='{"Episodic reward": NaN}')
    assert refused(link, "PushTransitions", body.SerializeToString()).code == "INVALID_ARGUMENT"


def test_an_oversized_message_is_refused(learner) -> None:
    endpoint, address = learner
    link = GrpcLearnerLink(address, token=TOKEN, timeout_s=5)
    big = transitions(3000)  # about 100 kB, over the 64 kB limit
    with pytest.raises(ServerRefused) as err:
        link.push(big, None)  # type: ignore[arg-type]
    assert err.value.code == "RESOURCE_EXHAUSTED"
    assert endpoint.take() == []


def test_an_absent_learner_is_unavailable_not_an_error() -> None:
    link = GrpcLearnerLink("127.0.0.1:9", timeout_s=1)
    with pytest.raises(LearnerUnavailable, match="unreachable"):
        link.fetch(0)


def test_decoding_checks_the_batch_before_the_replay_sees_it() -> None:
    with pytest.raises(InvalidInput, match="lacks"):
        rl_wire.decode_push(
            pb.TransitionBatch(
                transitions=wire.encode_tensors({"reward": np.zeros(1)})
            ).SerializeToString()
        )


def test_a_hello_carries_the_robots_observation_ranges() -> None:
    low, high = np.array([-2.9, 0.0]), np.array([2.9, 255.0])
    hello = ActorHello(FEATURES, None, None, {"observation.state": (low, high)})
    back = rl_wire.decode_hello(rl_wire.encode_hello(hello))
    (key,) = back.observation_bounds
    np.testing.assert_array_equal(back.observation_bounds[key][0], low)
    np.testing.assert_array_equal(back.observation_bounds[key][1], high)
    assert rl_wire.decode_hello(rl_wire.encode_hello(ActorHello(FEATURES))).observation_bounds == {}


@pytest.mark.parametrize(
    ("bounds", "reason"),
    [
        ({"observation.state": ([0.0, -np.inf], [1.0, 1.0])}, "finite"),
        ({"observation.state": ([0.0, 2.0], [1.0, 1.0])}, "low <= high"),
        ({"observation.state": ([0.0], [1.0])}, "shape"),
        ({"observation.elsewhere": ([0.0, 0.0], [1.0, 1.0])}, "feature the actor observes"),
    ],
)
def test_observation_ranges_that_are_not_a_range_of_a_feature_are_refused(
    bounds: dict[str, tuple[list[float], list[float]]], reason: str
) -> None:
    pairs = {k: (np.asarray(lo), np.asarray(hi)) for k, (lo, hi) in bounds.items()}
    body = rl_wire.encode_hello(ActorHello(FEATURES, None, None, pairs))
    with pytest.raises(InvalidInput, match=reason):
        rl_wire.decode_hello(body)
