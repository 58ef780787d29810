"""Every port, and the adapters that serve it: checked by mypy, not only documented.

Each function below is never called. Its parameters are the adapters of one port (the real ones
the container wires, and the in-memory or scripted fake from `rlctl.adapters.memory`), and it
returns them as the port. mypy (`uv run mypy`, run by `.ci/run`) checks the return statement, so
a port whose signature changes without its adapters, or an adapter that drifts from its port,
fails CI instead of a user.

The tests at the bottom run with pytest: the imports are real (a renamed adapter fails the
suite), every Protocol in `rlctl.application.ports` is stated here, and every port has a fake.

This lives in `tests/`, not in a package: it is a check, not code anything runs, and only here
may one module import the adapters of every layer without the import contracts minding.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import typing

from rlctl.adapters.cameras.opencv import OpenCVCamera
from rlctl.adapters.cameras.reachy2 import Reachy2Camera
from rlctl.adapters.cameras.realsense import RealSenseCamera
from rlctl.adapters.cameras.zmq import ZMQCamera
from rlctl.adapters.clock.system import SystemClock
from rlctl.adapters.control.rollout_keys import (
    EitherControls,
    FootPedal,
    NoRolloutControls,
    RolloutKeyboard,
)
from rlctl.adapters.control.stop_signals import StopSignals
from rlctl.adapters.control.terminal import KeyboardControls, NoControls, TerminalConsole
from rlctl.adapters.display.rerun_display import RerunDisplay
from rlctl.adapters.hub.huggingface import HuggingFaceHub
from rlctl.adapters.hub.integrity import LeRobotIntegrity
from rlctl.adapters.hub.layout import LeRobotLayout
from rlctl.adapters.memory.action_tokenizer import RoundingTokenizer, RoundingTokenizerFitter
from rlctl.adapters.memory.calibration_store import InMemoryCalibrationStore
from rlctl.adapters.memory.camera import SyntheticCamera
from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.control import (
    NoInterrupts,
    ScriptedConsole,
    ScriptedControls,
    ScriptedRolloutControls,
)
from rlctl.adapters.memory.dataset_store import InMemoryDatasetStore
from rlctl.adapters.memory.dataset_tools import (
    InMemoryDatasetFolders,
    InMemoryDatasetRebuilder,
    InMemoryRebuild,
    InMemoryStatsAccess,
    ScriptedCheck,
    ScriptedDatasetChecker,
)
from rlctl.adapters.memory.dataset_writer import InMemoryDatasetWriter, InMemoryWriteSession
from rlctl.adapters.memory.episode_actions import InMemoryEpisodeActions
from rlctl.adapters.memory.episode_data import InMemoryEpisodeData
from rlctl.adapters.memory.hub import InMemoryHub
from rlctl.adapters.memory.integrity import DeclaredIntegrity
from rlctl.adapters.memory.live_display import NoDisplay, RecordedDisplay
from rlctl.adapters.memory.metrics import RecordingMetricsSink
from rlctl.adapters.memory.motor_bus import InMemoryMotorBus
from rlctl.adapters.memory.policy import InMemoryPolicyLoader, ScriptedPolicy
from rlctl.adapters.memory.policy_server import (
    InProcessChunkClient,
    InProcessPolicyConnector,
    InProcessPolicyServer,
    ScriptedChunkService,
)
from rlctl.adapters.memory.progress import (
    RecordedTask,
    RecordingProgress,
    SilentProgress,
    _SilentTask,
)
from rlctl.adapters.memory.reinforcement import (
    ConstantActingPolicy,
    ConstantActingPolicyFactory,
    CountingTrainer,
    CountingTrainerFactory,
    InMemoryLearnerEndpoint,
    InMemoryLearnerLink,
    InMemoryReplayStore,
    LineInteraction,
    ScriptedIntervention,
    ThresholdReward,
)
from rlctl.adapters.memory.robot import ScriptedRobot
from rlctl.adapters.memory.run_report import InMemoryRunFolders, RecordingReportRenderer
from rlctl.adapters.memory.simulator import FakeSimulation, FakeVectorSimulator
from rlctl.adapters.memory.success import ScriptedSuccessDetector
from rlctl.adapters.memory.teleoperator import (
    ScriptedLeaderArm,
    ScriptedSelfCalibrating,
    ScriptedTeleoperator,
)
from rlctl.adapters.memory.training import (
    ScriptedProcesses,
    ScriptedSession,
    ScriptedTrainingBackend,
)
from rlctl.adapters.memory.video import InMemoryVideos, InMemoryVideoWriter
from rlctl.adapters.motors.damiao import DamiaoMotorBus
from rlctl.adapters.motors.damiao_modes import DamiaoModeBus
from rlctl.adapters.motors.dynamixel import DynamixelMotorBus
from rlctl.adapters.motors.fashionstar import FashionStarMotorBus
from rlctl.adapters.motors.feetech import FeetechMotorBus
from rlctl.adapters.motors.robstride import RobstrideMotorBus
from rlctl.adapters.policies.loaded_policy import LeRobotPolicyLoader, LoadedPolicy
from rlctl.adapters.policies.success_detector import ClassifierSuccessDetector
from rlctl.adapters.policies.vla.fast import FASTFitter, FASTTokenizer
from rlctl.adapters.remote.grpc_client import GrpcPolicyClient
from rlctl.adapters.remote.grpc_server import GrpcPolicyServer
from rlctl.adapters.remote.remote_policy import GrpcPolicyConnector, RemotePolicy
from rlctl.adapters.remote.rl_grpc import GrpcLearnerEndpoint, GrpcLearnerLink
from rlctl.adapters.reports.renderer import HtmlReportRenderer
from rlctl.adapters.reports.run_folder import LocalRunFolder
from rlctl.adapters.rl.acting import (
    GaussianActingPolicy,
    GaussianActingPolicyFactory,
    RobotInteraction,
)
from rlctl.adapters.rl.reward import ClassifierReward, EnvReward, NoIntervention
from rlctl.adapters.rl.trainer import (
    SafetensorsReplayStore,
    TorchSACTrainer,
    TorchSACTrainerFactory,
)
from rlctl.adapters.robots.arm_follower import ArmFollower
from rlctl.adapters.robots.bimanual import BimanualFollower
from rlctl.adapters.robots.calibration_files import CalibrationFiles
from rlctl.adapters.robots.earthrover import EarthRoverMiniPlus
from rlctl.adapters.robots.lekiwi import LeKiwi
from rlctl.adapters.robots.lekiwi_client import LeKiwiClient
from rlctl.adapters.robots.openarm_follower import DamiaoArm, OpenArmFollower
from rlctl.adapters.robots.reachy2 import Reachy2Robot
from rlctl.adapters.robots.rebot_b601_follower import RebotB601Arm, RebotB601Follower
from rlctl.adapters.robots.servo_arm import ServoArm
from rlctl.adapters.robots.sim_robot import SimRobot
from rlctl.adapters.robots.unitree_g1 import UnitreeG1Robot
from rlctl.adapters.sim.metaworld_expert import MetaWorldExpertPolicy
from rlctl.adapters.sim.plain_vector import PlainVectorSimulator
from rlctl.adapters.sim.random_policy import RandomPolicy
from rlctl.adapters.sim.simulation import GymSimulation, GymVectorSimulator
from rlctl.adapters.storage.lerobot_v3.episode_actions import LeRobotEpisodeActions
from rlctl.adapters.storage.lerobot_v3.episode_data import LeRobotEpisodeData
from rlctl.adapters.storage.lerobot_v3.language_summary import LeRobotLanguageSummary
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.tools.checker import (
    LeRobotDatasetCheck,
    LeRobotDatasetChecker,
)
from rlctl.adapters.storage.lerobot_v3.tools.folders import LocalDatasetFolders
from rlctl.adapters.storage.lerobot_v3.tools.rebuild import LeRobotRebuild, LeRobotRebuilder
from rlctl.adapters.storage.lerobot_v3.tools.stats_access import LeRobotStatsAccess
from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer, LeRobotV3WriteSession
from rlctl.adapters.storage.lerobot_v21.source import LeRobotV21Reader
from rlctl.adapters.storage.streaming.source import HubStreamedDatasets
from rlctl.adapters.telemetry.metrics import (
    FanOutSink,
    JsonlMetricsSink,
    TensorBoardSink,
    WandbSink,
)
from rlctl.adapters.telemetry.progress import RichProgress, _RichTask
from rlctl.adapters.teleop.arm_leader import ArmLeader
from rlctl.adapters.teleop.bimanual_leader import BimanualLeader
from rlctl.adapters.teleop.ee_arm import EndEffectorArm
from rlctl.adapters.teleop.episode_replay import EpisodeReplayTeleop
from rlctl.adapters.teleop.gamepad import GamepadTeleop
from rlctl.adapters.teleop.keyboard import KeyboardEndEffectorTeleop
from rlctl.adapters.teleop.keyboard_rover import KeyboardRoverTeleop
from rlctl.adapters.teleop.lekiwi_keyboard import LeKiwiKeyboardTeleop
from rlctl.adapters.teleop.metaworld_expert import MetaWorldExpertTeleop
from rlctl.adapters.teleop.openarm_leader import OpenArmLeader
from rlctl.adapters.teleop.phone import PhoneTeleop
from rlctl.adapters.teleop.reachy2_teleoperator import Reachy2Teleoperator
from rlctl.adapters.teleop.rebot_102_leader import Rebot102Arm, Rebot102Leader
from rlctl.adapters.teleop.unitree_g1_exo import UnitreeG1Exoskeleton
from rlctl.adapters.training.backend import TorchProcesses, TorchTrainingBackend
from rlctl.adapters.training.session import TorchTrainingSession
from rlctl.adapters.video.auto import AutoVideoDecoder
from rlctl.adapters.video.pyav_decoder import PyAVVideoDecoder
from rlctl.adapters.video.pyav_encoder import PyAVVideoEncoder, PyAVVideoWriter
from rlctl.adapters.video.torchcodec_decoder import TorchCodecVideoDecoder
from rlctl.application import ports
from rlctl.application.acting_engine import LocalChunks
from rlctl.application.ports.action_tokenizer import ActionTokenizerFitter, FittedActionTokenizer
from rlctl.application.ports.camera import Camera
from rlctl.application.ports.clock import Clock
from rlctl.application.ports.control import Console, Interrupts, RecordControls, RolloutControls
from rlctl.application.ports.dataset import (
    DatasetMetaReader,
    LanguageAnnotations,
    StreamedDatasets,
)
from rlctl.application.ports.dataset_tools import (
    DatasetCheck,
    DatasetChecker,
    DatasetFolders,
    DatasetRebuild,
    DatasetRebuilder,
    DatasetStatsAccess,
    LegacyDatasetReader,
)
from rlctl.application.ports.dataset_writer import DatasetWriter, DatasetWriteSession
from rlctl.application.ports.episode_data import EpisodeDataReader
from rlctl.application.ports.hub import DatasetIntegrity, DatasetLayout, Hub
from rlctl.application.ports.live_display import LiveDisplay
from rlctl.application.ports.motors import MotorBus
from rlctl.application.ports.policy import Policy, PolicyLoader
from rlctl.application.ports.policy_service import (
    ChunkClient,
    ChunkService,
    PolicyConnector,
    PolicyServer,
)
from rlctl.application.ports.progress import Progress, ProgressTask
from rlctl.application.ports.reinforcement import (
    ActingPolicy,
    ActingPolicyFactory,
    Interaction,
    InterventionSource,
    LearnerEndpoint,
    LearnerLink,
    ReplayStore,
    RewardSource,
    SACTrainer,
    SACTrainerFactory,
)
from rlctl.application.ports.robot import CalibrationStore, CalibrationTarget, Robot
from rlctl.application.ports.run_report import ReportRenderer, RunFolderReader
from rlctl.application.ports.simulation import Simulation, VectorSimulator
from rlctl.application.ports.success import SuccessDetector
from rlctl.application.ports.teleoperator import (
    ActuatedTeleoperator,
    EpisodeActions,
    SelfCalibrating,
    Teleoperator,
)
from rlctl.application.ports.training import (
    MetricsSink,
    TrainingBackend,
    TrainingProcesses,
    TrainingSession,
)
from rlctl.application.ports.video import VideoDecoder, VideoEncoder, VideoWriter
from rlctl.application.use_cases.serve_policy import PolicyService

# --- devices --------------------------------------------------------------------------------


def camera(
    opencv: OpenCVCamera,
    zmq: ZMQCamera,
    realsense: RealSenseCamera,
    fake: SyntheticCamera,
    reachy2: Reachy2Camera,
) -> list[Camera]:
    return [opencv, zmq, realsense, fake, reachy2]


def clock(system: SystemClock, fake: ManualClock) -> list[Clock]:
    return [system, fake]


def record_controls(
    keyboard: KeyboardControls, none: NoControls, fake: ScriptedControls
) -> list[RecordControls]:
    return [keyboard, none, fake]


def rollout_controls(
    keyboard: RolloutKeyboard,
    none: NoRolloutControls,
    pedal: FootPedal,
    both: EitherControls,
    fake: ScriptedRolloutControls,
) -> list[RolloutControls]:
    return [keyboard, none, pedal, both, fake]


def console(terminal: TerminalConsole, fake: ScriptedConsole) -> list[Console]:
    return [terminal, fake]


def interrupts(signals: StopSignals, fake: NoInterrupts) -> list[Interrupts]:
    return [signals, fake]


def motor_bus(
    feetech: FeetechMotorBus,
    dynamixel: DynamixelMotorBus,
    damiao: DamiaoMotorBus,
    robstride: RobstrideMotorBus,
    fake: InMemoryMotorBus,
    damiao_modes: DamiaoModeBus,
    fashionstar: FashionStarMotorBus,
) -> list[MotorBus]:
    return [feetech, dynamixel, damiao, robstride, fake, damiao_modes, fashionstar]


def calibration_target(
    arm: ServoArm, can_arm: DamiaoArm, rebot: RebotB601Arm, rebot_leader: Rebot102Arm
) -> list[CalibrationTarget]:
    return [arm, can_arm, rebot, rebot_leader]


def calibration_store(
    files: CalibrationFiles, fake: InMemoryCalibrationStore
) -> list[CalibrationStore]:
    return [files, fake]


def robot(
    arm: ArmFollower,
    arms: BimanualFollower,
    openarm: OpenArmFollower,
    kiwi: LeKiwi,
    kiwi_client: LeKiwiClient,
    rover: EarthRoverMiniPlus,
    sim: SimRobot,
    fake: ScriptedRobot,
    rebot: RebotB601Follower,
    reachy2: Reachy2Robot,
    g1: UnitreeG1Robot,
) -> list[Robot]:
    return [arm, arms, openarm, kiwi, kiwi_client, rover, sim, fake, rebot, reachy2, g1]


def teleoperator(
    arm: ArmLeader,
    arms: BimanualLeader,
    openarm_leader: OpenArmLeader,
    pad: GamepadTeleop,
    phone: PhoneTeleop,
    keys: KeyboardEndEffectorTeleop,
    ee_arm: EndEffectorArm,
    kiwi_keys: LeKiwiKeyboardTeleop,
    rover_keys: KeyboardRoverTeleop,
    replay: EpisodeReplayTeleop,
    expert: MetaWorldExpertTeleop,
    fake: ScriptedTeleoperator,
    rebot_leader: Rebot102Leader,
    reachy2: Reachy2Teleoperator,
    g1_exo: UnitreeG1Exoskeleton,
) -> list[Teleoperator]:
    teleops: list[Teleoperator] = [arm, arms, openarm_leader, pad, phone, keys, ee_arm]
    return [*teleops, kiwi_keys, rover_keys, replay, expert, fake, rebot_leader, reachy2, g1_exo]


def self_calibrating(
    g1_exo: UnitreeG1Exoskeleton, fake: ScriptedSelfCalibrating
) -> list[SelfCalibrating]:
    return [g1_exo, fake]


def actuated_teleoperator(fake: ScriptedLeaderArm) -> list[ActuatedTeleoperator]:
    return [fake]


def episode_actions(
    lerobot: LeRobotEpisodeActions, fake: InMemoryEpisodeActions
) -> list[EpisodeActions]:
    return [lerobot, fake]


# --- datasets -------------------------------------------------------------------------------


def meta_reader(lerobot: LeRobotMetaReader, fake: InMemoryDatasetStore) -> list[DatasetMetaReader]:
    return [lerobot, fake]


def language_annotations(
    lerobot: LeRobotLanguageSummary, fake: InMemoryDatasetStore
) -> list[LanguageAnnotations]:
    return [lerobot, fake]


def legacy_dataset_reader(
    v21: LeRobotV21Reader, fake: InMemoryDatasetStore
) -> list[LegacyDatasetReader]:
    return [v21, fake]


def dataset_writer(lerobot: LeRobotV3Writer, fake: InMemoryDatasetWriter) -> list[DatasetWriter]:
    return [lerobot, fake]


def dataset_write_session(
    lerobot: LeRobotV3WriteSession, fake: InMemoryWriteSession
) -> list[DatasetWriteSession]:
    return [lerobot, fake]


def episode_data(lerobot: LeRobotEpisodeData, fake: InMemoryEpisodeData) -> list[EpisodeDataReader]:
    return [lerobot, fake]


def dataset_checker(
    lerobot: LeRobotDatasetChecker, fake: ScriptedDatasetChecker
) -> list[DatasetChecker]:
    return [lerobot, fake]


def dataset_check(lerobot: LeRobotDatasetCheck, fake: ScriptedCheck) -> list[DatasetCheck]:
    return [lerobot, fake]


def dataset_rebuilder(
    lerobot: LeRobotRebuilder, fake: InMemoryDatasetRebuilder
) -> list[DatasetRebuilder]:
    return [lerobot, fake]


def dataset_rebuild(lerobot: LeRobotRebuild, fake: InMemoryRebuild) -> list[DatasetRebuild]:
    return [lerobot, fake]


def dataset_folders(
    local: LocalDatasetFolders, fake: InMemoryDatasetFolders
) -> list[DatasetFolders]:
    return [local, fake]


def dataset_stats_access(
    lerobot: LeRobotStatsAccess, fake: InMemoryStatsAccess
) -> list[DatasetStatsAccess]:
    return [lerobot, fake]


def hub(huggingface: HuggingFaceHub, fake: InMemoryHub) -> list[Hub]:
    return [huggingface, fake]


def action_tokenizer_fitter(
    fast: FASTFitter, fake: RoundingTokenizerFitter
) -> list[ActionTokenizerFitter]:
    return [fast, fake]


def fitted_action_tokenizer(
    fast: FASTTokenizer, fake: RoundingTokenizer
) -> list[FittedActionTokenizer]:
    return [fast, fake]


def dataset_layout(lerobot: LeRobotLayout) -> list[DatasetLayout]:
    return [lerobot]


def dataset_integrity(lerobot: LeRobotIntegrity, fake: DeclaredIntegrity) -> list[DatasetIntegrity]:
    return [lerobot, fake]


# --- video ----------------------------------------------------------------------------------


def video_decoder(
    pyav: PyAVVideoDecoder,
    torchcodec: TorchCodecVideoDecoder,
    auto: AutoVideoDecoder,
    fake: InMemoryVideos,
) -> list[VideoDecoder]:
    return [pyav, torchcodec, auto, fake]


def video_encoder(pyav: PyAVVideoEncoder, fake: InMemoryVideos) -> list[VideoEncoder]:
    return [pyav, fake]


def video_writer(pyav: PyAVVideoWriter, fake: InMemoryVideoWriter) -> list[VideoWriter]:
    return [pyav, fake]


# --- progress and metrics -------------------------------------------------------------------


def progress(rich: RichProgress, silent: SilentProgress, fake: RecordingProgress) -> list[Progress]:
    return [rich, silent, fake]


def progress_task(rich: _RichTask, silent: _SilentTask, fake: RecordedTask) -> list[ProgressTask]:
    return [rich, silent, fake]


def live_display(rerun: RerunDisplay, off: NoDisplay, fake: RecordedDisplay) -> list[LiveDisplay]:
    return [rerun, off, fake]


def run_folder_reader(local: LocalRunFolder, fake: InMemoryRunFolders) -> list[RunFolderReader]:
    return [local, fake]


def report_renderer(
    html: HtmlReportRenderer, fake: RecordingReportRenderer
) -> list[ReportRenderer]:
    return [html, fake]


def metrics_sink(
    jsonl: JsonlMetricsSink,
    tensorboard: TensorBoardSink,
    wandb: WandbSink,
    fan_out: FanOutSink,
    fake: RecordingMetricsSink,
) -> list[MetricsSink]:
    return [jsonl, tensorboard, wandb, fan_out, fake]


# --- policies, simulation and training ------------------------------------------------------


def policy(
    loaded: LoadedPolicy,
    random: RandomPolicy,
    expert: MetaWorldExpertPolicy,
    remote: RemotePolicy,
    fake: ScriptedPolicy,
) -> list[Policy]:
    return [loaded, random, expert, remote, fake]


def policy_loader(lerobot: LeRobotPolicyLoader, fake: InMemoryPolicyLoader) -> list[PolicyLoader]:
    return [lerobot, fake]


def chunk_service(service: PolicyService, fake: ScriptedChunkService) -> list[ChunkService]:
    return [service, fake]


def chunk_client(
    grpc: GrpcPolicyClient, local: LocalChunks, fake: InProcessChunkClient
) -> list[ChunkClient]:
    return [grpc, local, fake]


def policy_server(grpc: GrpcPolicyServer, fake: InProcessPolicyServer) -> list[PolicyServer]:
    return [grpc, fake]


def policy_connector(
    grpc: GrpcPolicyConnector, fake: InProcessPolicyConnector
) -> list[PolicyConnector]:
    return [grpc, fake]


def success_detector(
    classifier: ClassifierSuccessDetector, fake: ScriptedSuccessDetector
) -> list[SuccessDetector]:
    return [classifier, fake]


def simulation(gym: GymSimulation, fake: FakeSimulation) -> list[Simulation]:
    return [gym, fake]


def vector_simulator(
    gym: GymVectorSimulator, plain: PlainVectorSimulator, fake: FakeVectorSimulator
) -> list[VectorSimulator]:
    return [gym, plain, fake]


def training_backend(
    torch: TorchTrainingBackend, fake: ScriptedTrainingBackend
) -> list[TrainingBackend]:
    return [torch, fake]


def training_session(torch: TorchTrainingSession, fake: ScriptedSession) -> list[TrainingSession]:
    return [torch, fake]


def training_processes(torch: TorchProcesses, fake: ScriptedProcesses) -> list[TrainingProcesses]:
    return [torch, fake]


def streamed_datasets(
    hub: HubStreamedDatasets, fake: InMemoryDatasetStore
) -> list[StreamedDatasets]:
    return [hub, fake]


# --- reinforcement learning (HIL-SERL) --------------------------------------------------------


def learner_endpoint(
    grpc: GrpcLearnerEndpoint, fake: InMemoryLearnerEndpoint
) -> list[LearnerEndpoint]:
    return [grpc, fake]


def learner_link(grpc: GrpcLearnerLink, fake: InMemoryLearnerLink) -> list[LearnerLink]:
    return [grpc, fake]


def sac_trainer(torch: TorchSACTrainer, fake: CountingTrainer) -> list[SACTrainer]:
    return [torch, fake]


def sac_trainer_factory(
    torch: TorchSACTrainerFactory, fake: CountingTrainerFactory
) -> list[SACTrainerFactory]:
    return [torch, fake]


def replay_store(files: SafetensorsReplayStore, fake: InMemoryReplayStore) -> list[ReplayStore]:
    return [files, fake]


def acting_policy(torch: GaussianActingPolicy, fake: ConstantActingPolicy) -> list[ActingPolicy]:
    return [torch, fake]


def acting_policy_factory(
    torch: GaussianActingPolicyFactory, fake: ConstantActingPolicyFactory
) -> list[ActingPolicyFactory]:
    return [torch, fake]


def interaction(robot: RobotInteraction, fake: LineInteraction) -> list[Interaction]:
    return [robot, fake]


def reward_source(
    env: EnvReward, classifier: ClassifierReward, fake: ThresholdReward
) -> list[RewardSource]:
    return [env, classifier, fake]


def intervention_source(
    nobody: NoIntervention, fake: ScriptedIntervention
) -> list[InterventionSource]:
    return [nobody, fake]


# Ports whose only stand-ins live outside `rlctl.adapters.memory` (tests use a scripted policy
# from `rlctl.adapters.sim`, or the real adapter on a temporary folder). A fake added to
# `rlctl.adapters.memory` takes its port off this list.
WITHOUT_MEMORY_FAKE = frozenset({"CalibrationTarget", "DatasetLayout"})


# --- the runtime half -----------------------------------------------------------------------


def _port_protocols() -> dict[str, type]:
    found: dict[str, type] = {}
    for info in pkgutil.iter_modules(ports.__path__):
        module = importlib.import_module(f"{ports.__name__}.{info.name}")
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and obj.__module__ == module.__name__
                and getattr(obj, "_is_protocol", False)
            ):
                found[name] = obj
    return found


def _statements() -> dict[type, list[type]]:
    """Port -> the adapter classes stated for it, read from the functions' annotations."""
    stated: dict[type, list[type]] = {}
    for name, fn in globals().items():
        if name.startswith(("_", "test_")) or not inspect.isfunction(fn):
            continue
        if fn.__module__ != __name__:
            continue
        hints = typing.get_type_hints(fn)
        (port,) = typing.get_args(hints.pop("return"))
        stated.setdefault(port, []).extend(hints.values())
    return stated


def test_every_port_is_stated_with_its_adapters() -> None:
    protocols = _port_protocols()
    stated = _statements()
    missing = sorted(name for name, port in protocols.items() if port not in stated)
    assert not missing, (
        f"ports without a conformance statement: {missing}; add a function to "
        "tests/test_port_conformance.py that returns the port's adapters as the port"
    )
    assert set(stated) <= set(protocols.values())


def test_every_port_has_an_in_memory_fake() -> None:
    without = sorted(
        port.__name__
        for port, adapters in _statements().items()
        if not any(a.__module__.startswith("rlctl.adapters.memory.") for a in adapters)
    )
    assert without == sorted(WITHOUT_MEMORY_FAKE)
