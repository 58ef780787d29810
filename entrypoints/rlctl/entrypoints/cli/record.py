"""`rlctl record`: record demonstrations into a LeRobot v3.0 dataset (LeRobot's `lerobot-record`).

    rlctl record --robot.type=so101_follower --robot.port=/dev/ttyACM0 --robot.id=black \\
        --robot.cameras='{front: {type: opencv, index_or_path: 0, width: 640, height: 480}}' \\
        --teleop.type=so101_leader --teleop.port=/dev/ttyACM1 --teleop.id=blue \\
        --dataset.repo_id=me/cubes --dataset.single_task="Grab the cube" \\
        --dataset.num_episodes=10 --dataset.episode_time_s=30 --dataset.reset_time_s=10

    rlctl record --robot.type=sim --robot.env.type=metaworld --robot.env.task=push-v3 \\
        --teleop.type=metaworld_expert --dataset.root=outputs/mw --dataset.num_episodes=5

Keys while recording: → (or n) next, ← (or r) re-record, Esc (or q) stop. `--resume=true`
appends to an existing dataset; `--policy.path=...` lets a trained policy act during
episodes; `--display_data=true` shows the cameras, joints and actions live in rerun (its
viewer, `--display.mode=web` for a browser, or an .rrd file on a machine without a screen).
Ctrl-C keeps every finished episode (exit status 130).
"""

from __future__ import annotations

import attrs
import click

from rlctl.domain.policies.compute_dtype import ComputeDtype
from rlctl.domain.remote_inference import RemotePolicySettings
from rlctl.domain.video import VideoEncoding
from rlctl.entrypoints.cli.config_options import config_options, settings_command
from rlctl.entrypoints.cli.devices import ControlsMode
from rlctl.entrypoints.parts import DisplaySettings, RobotConfig, TeleoperatorConfig
from rlctl.entrypoints.settings import AppSettings, DatasetSettings

EXIT_INTERRUPTED = 130


@attrs.frozen(kw_only=True)
class DatasetRecordSettings(DatasetSettings):
    # `user/name`: stored under $HF_LEROBOT_HOME/user/name unless `root` says where.
    repo_id: str = ""
    root: str | None = None
    single_task: str = ""
    fps: int = 30
    episode_time_s: float = 60.0
    reset_time_s: float = 60.0
    warmup_time_s: float = 0.0
    num_episodes: int = 50
    # Cameras as videos (encoded in the background while recording) or as PNG images.
    video: bool = True
    video_encoding: VideoEncoding = attrs.field(factory=VideoEncoding)
    push_to_hub: bool = False
    private: bool | None = None
    tags: tuple[str, ...] = ()


@attrs.frozen
class PolicyInControl(RemotePolicySettings):
    """A policy acting: saved here (`path`), or on a policy server (`server`, remote settings)."""

    path: str | None = None
    device: str | None = None
    # A bfloat16 policy computes in float32 where the device emulates bfloat16 (`auto`), in
    # its own dtypes (`keep`), or in float32 everywhere (`float32`).
    compute_dtype: ComputeDtype = "auto"


@attrs.frozen(kw_only=True)
class RecordCommandSettings(AppSettings):
    robot: RobotConfig | None = None
    teleop: TeleoperatorConfig | None = None
    policy: PolicyInControl = attrs.field(factory=PolicyInControl)
    dataset: DatasetRecordSettings = attrs.field(factory=DatasetRecordSettings)
    resume: bool = False
    controls: ControlsMode = "keyboard"
    # An arm with no saved calibration is calibrated on the spot (else: an error).
    calibrate: bool = True
    # Show cameras, joints and actions live in rerun while recording (see display.*).
    display_data: bool = False
    display: DisplaySettings = attrs.field(factory=DisplaySettings)


@settings_command("record")
@config_options(RecordCommandSettings)
@click.pass_context
def record_command(ctx: click.Context, config: RecordCommandSettings) -> None:
    """Record episodes from a robot driven by a teleoperator (or a policy) into a dataset."""
    from rlctl.application.use_cases.record_episodes import DatasetTarget, RecordSettings
    from rlctl.entrypoints.cli.devices import record_controls, recording_root, require_robot
    from rlctl.entrypoints.container import build_container

    ds = config.dataset
    root = recording_root(ds.root, ds.repo_id)
    container = build_container(config, owns_process=True)  # the loop may tune the interpreter
    robot = container.robot(require_robot(config.robot))
    teleop = (
        container.teleoperator(config.teleop.paired_with(config.robot))
        if config.teleop is not None
        else None
    )
    # A saved policy's path (folder, run folder or Hub repo id) is resolved once, by the container.
    policy = container.acting_policy(config.policy)
    use_case = container.record_episodes(
        robot=robot,
        controls=record_controls(container, config.controls),
        teleop=teleop,
        policy=policy,
        calibrate=container.calibrate_robot() if config.calibrate else None,
    )
    report = use_case(
        DatasetTarget(root=root, resume=config.resume, video=ds.video, encoding=ds.video_encoding),
        RecordSettings(
            fps=ds.fps,
            num_episodes=ds.num_episodes,
            episode_time_s=ds.episode_time_s,
            reset_time_s=ds.reset_time_s,
            warmup_time_s=ds.warmup_time_s,
            single_task=ds.single_task,
        ),
    )
    click.echo(
        f"recorded {len(report.saved_episodes)} episode(s), {report.frames} frames, into "
        f"{report.root} ({report.total_episodes} in all)"
        + (f"; {report.rerecorded} re-recorded" if report.rerecorded else "")
    )
    click.echo(f"loop: {report.timing.describe()}; longest save {report.max_save_s * 1e3:.1f} ms")
    if ds.push_to_hub and ds.repo_id and report.total_episodes:
        _push(container, str(report.root), ds)
    if report.interrupted:
        ctx.exit(EXIT_INTERRUPTED)


def _push(container: object, root: str, ds: DatasetRecordSettings) -> None:
    from rlctl.application.use_cases.push_dataset import PushDatasetRequest

    request = PushDatasetRequest(
        root=root, repo_id=ds.repo_id, private=ds.private, tags=ds.tags, videos=ds.video
    )
    result = container.push_dataset()(request)  # type: ignore[attr-defined]
    click.echo(f"pushed to {result.url}")
