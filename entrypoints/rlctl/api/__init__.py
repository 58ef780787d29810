"""The embedding facade: what a service or notebook calls instead of the CLI.

Everything goes through the container, so an embedder can override any port with its own
adapter: `c = rlctl.api.container(); c.meta_reader.override(providers.Object(mine))`, then pass
`using=c`. Locations are local folders or Hugging Face Hub repo ids (pulled into LeRobot's cache).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rlctl.entrypoints.container import Container, build_container
from rlctl.entrypoints.settings import AppSettings, DatasetSettings

__all__ = [
    "AppSettings",
    "Container",
    "DatasetSettings",
    "add_features",
    "collate",
    "connect_policy",
    "container",
    "convert_images_to_video",
    "create_dataset",
    "inspect_dataset",
    "load_policy",
    "modify_tasks",
    "open_dataset",
    "reencode_videos",
    "remove_features",
    "resume_dataset",
    "rollout",
]


def container(settings: AppSettings | None = None) -> Container:
    """A fresh composition root; override its providers to swap adapters."""
    return build_container(settings)


def inspect_dataset(location: str | Path, *, using: Container | None = None) -> Any:
    """Summarise a dataset (fps, features, episodes, frames, tasks, robot type, size)."""
    c = using or build_container()
    return _read_local(location, c, lambda root: c.inspect_dataset()(str(root)))


def open_dataset(
    location: str | Path | Sequence[str | Path],
    *,
    delta_timestamps: Mapping[str, Sequence[float]] | None = None,
    episodes: Iterable[int] | None = None,
    video_backend: str | None = None,
    image_transforms: Callable[[Any], Any] | None = None,
    revision: str | None = None,
    streaming: bool = False,
    buffer_size: int | None = None,
    seed: int | None = None,
    weights: Sequence[float] | None = None,
    using: Container | None = None,
) -> Any:
    """A LeRobot v3.0 dataset as a torch `Dataset` (items as LeRobot's `__getitem__`).

    A list of locations gives a multi-dataset over the features they share. `episodes` picks a
    subset (and, for a repo id, downloads only those episodes' files).

    `streaming=True` reads a Hub repo id without downloading it (only `meta/`): a torch
    `IterableDataset` with the same items, shuffled through a buffer of `buffer_size` frames
    (1000) seeded by `seed` (42), each DataLoader worker and DDP rank reading its own shard.
    A list of repo ids streamed is interleaved, `weights[i] / sum(weights)` of each pass from
    dataset i (None: in proportion to their frames).

    Batch it with `DataLoader(dataset, ..., collate_fn=rlctl.api.collate)` when the dataset has
    language annotations (`language_persistent`, `language_events`).
    """
    c = using or build_container()
    backend = {"video_backend": video_backend} if video_backend else {}
    several = not isinstance(location, (str, Path))
    if weights is not None and not (streaming and several):
        from rlctl.domain.errors import InvalidInput

        raise InvalidInput(
            "weights interleave several streamed datasets",
            where="weights",
            hint="pass a list of repo ids with streaming=True, or drop weights (a local "
            "multi-dataset is a concatenation; `rlctl train --dataset.weights` samples it)",
        )
    if streaming and not isinstance(location, (str, Path)):
        if episodes is not None:
            from rlctl.domain.errors import InvalidInput

            raise InvalidInput(
                "episodes selects episodes of one dataset, not of several",
                where="episodes",
                hint="stream all episodes of each, or stream one dataset with episodes=",
            )
        for one in location:
            _check_streamable(one)
        return c.streaming_mixture(
            list(location),
            weights=weights,
            delta_timestamps=delta_timestamps,
            image_transforms=image_transforms,
            revision=revision,
            **backend,
            **({"buffer_size": buffer_size} if buffer_size is not None else {}),
            **({"seed": seed} if seed is not None else {}),
        )
    if streaming:
        return _streaming_dataset(
            location,
            c,
            delta_timestamps=delta_timestamps,
            episodes=episodes,
            image_transforms=image_transforms,
            revision=revision,
            **backend,
            **({"buffer_size": buffer_size} if buffer_size is not None else {}),
            **({"seed": seed} if seed is not None else {}),
        )
    if not isinstance(location, (str, Path)):
        roots = [_local_dataset(loc, c, revision=revision) for loc in location]
        return c.multi_torch_dataset(
            roots, delta_timestamps=delta_timestamps, image_transforms=image_transforms, **backend
        )
    chosen = tuple(episodes) if episodes is not None else None

    def opened(root: Path | str) -> Any:
        return c.torch_dataset(
            root,
            delta_timestamps=delta_timestamps,
            episodes=chosen,
            image_transforms=image_transforms,
            **backend,
        )

    return _read_local(location, c, opened, revision=revision, episodes=chosen)


def collate(items: Sequence[Mapping[str, Any] | None]) -> Any:
    """The `collate_fn` for a torch `DataLoader` over `open_dataset(...)`, as LeRobot's
    `lerobot_collate_fn`: `language_persistent` / `language_events` (lists of row dicts, which
    torch's default collate refuses) stay lists with one entry per item, in batch order;
    everything else goes through `default_collate`. Any dataset can use it."""
    return Container.collate_items()(items)


def create_dataset(
    root: str | Path,
    *,
    fps: int,
    features: Mapping[str, Any],
    robot_type: str | None = None,
    video: Any = None,
    using: Container | None = None,
) -> Any:
    """Start a dataset at `root`: `add_frame(dict)`, `save_episode()`, `finalize()`.

    `features` maps keys to `FeatureSpec`s or to LeRobot's info.json entries
    (`{"dtype": "float32", "shape": [6], "names": [...]}`).
    """
    from rlctl.domain.features import FeatureSpec

    specs = {
        key: spec if isinstance(spec, FeatureSpec) else FeatureSpec.from_info(key, spec)
        for key, spec in features.items()
    }
    writer = (using or build_container()).dataset_writer()
    return writer.create(Path(root), fps=fps, features=specs, robot_type=robot_type, video=video)


def resume_dataset(root: str | Path, *, using: Container | None = None) -> Any:
    """Reopen a dataset to append episodes after its last complete one."""
    return (using or build_container()).dataset_writer().resume(Path(root))


def add_features(
    root: str | Path,
    features: Mapping[str, tuple[Any, Any]],
    *,
    output: str | Path | None = None,
    force: bool = False,
    using: Container | None = None,
) -> Any:
    """LeRobot's `add_features`: `{"name": (values, {"dtype": "float32", "shape": [1],
    "names": None})}`, values an array (numpy, torch, list) with one row per frame of the
    dataset, in index order. Writes `output`, or edits `root` in place (safely) without it.
    `force`: apply an edit in place even when `root` is what the same edit already made."""
    c = using or build_container()
    return c.add_features()(str(root), features, _optional(output), force=force)


def remove_features(
    root: str | Path,
    features: str | Sequence[str],
    *,
    output: str | Path | None = None,
    force: bool = False,
    using: Container | None = None,
) -> Any:
    """LeRobot's `remove_feature`: the dataset without these features (cameras' videos too)."""
    names = [features] if isinstance(features, str) else list(features)
    return (using or build_container()).remove_features()(
        str(root), names, _optional(output), force=force
    )


def modify_tasks(
    root: str | Path,
    *,
    new_task: str | None = None,
    episode_tasks: Mapping[int, str] | None = None,
    task_replacements: Mapping[str, str] | None = None,
    output: str | Path | None = None,
    force: bool = False,
    using: Container | None = None,
) -> Any:
    """LeRobot's `modify_tasks` (precedence: episode_tasks, task_replacements, new_task)."""
    return (using or build_container()).modify_tasks()(
        str(root),
        new_task=new_task,
        episode_tasks=episode_tasks,
        task_replacements=task_replacements,
        output=_optional(output),
        force=force,
    )


def convert_images_to_video(
    root: str | Path,
    *,
    output: str | Path | None = None,
    encoding: Any = None,
    depth_encoding: Any = None,
    episodes: str | Sequence[int] | None = None,
    force: bool = False,
    using: Container | None = None,
) -> Any:
    """LeRobot's `convert_image_to_video_dataset`: cameras stored as images become videos,
    encoded with `encoding` (a `rlctl.domain.video.VideoEncoding`; LeRobot's defaults)."""
    return (using or build_container()).convert_images_to_video()(
        str(root),
        _optional(output),
        encoding=encoding,
        depth_encoding=depth_encoding,
        episodes=episodes,
        force=force,
    )


def reencode_videos(
    root: str | Path,
    encoding: Any = None,
    *,
    output: str | Path | None = None,
    force: bool = False,
    using: Container | None = None,
) -> Any:
    """LeRobot's `reencode_dataset` for RGB videos: `encoding` a `VideoEncoding` (default:
    LeRobot's defaults); cameras already encoded so are left alone."""
    from rlctl.domain.video import VideoEncoding

    return (using or build_container()).reencode_videos()(
        str(root), encoding or VideoEncoding(), _optional(output), force=force
    )


def _optional(path: str | Path | None) -> str | None:
    return None if path is None else str(path)


def load_policy(
    location: str | Path,
    *,
    device: str | None = None,
    compute_dtype: str | None = None,
    using: Container | None = None,
):
    """A trained policy (rlctl or LeRobot `pretrained_model` folder, or a Hub repo id):
    its features and `predict_chunk(observation_batch, noise=None)`, processors included.
    `compute_dtype`: what a bfloat16 policy computes in — `auto` (None; float32 where the
    device only emulates bfloat16), `keep` (its own dtypes, LeRobot's arithmetic) or `float32`."""
    c = using or build_container()
    path = c.resolve_policy()(str(location))
    if compute_dtype is None:
        loader = c.policy_loader()
    else:
        loader = c.policy_loader_with(compute_dtype=compute_dtype)
    return loader.load(str(path), device=device)


def connect_policy(
    server: str, *, realtime: bool = True, using: Container | None = None, **settings: Any
) -> Any:
    """A policy served by `rlctl policy serve` at `server` (`HOST:PORT`), as a `Policy`:
    `select_action` once per control tick never waits on the network (with `realtime`), holding
    the last action when no fresh one has arrived. `settings` are `RemotePolicySettings` fields
    (`token_file`, `tls_cert`, `aggregate`, `chunk_size_threshold`, …); `close()` when done."""
    from rlctl.domain.remote_inference import RemotePolicySettings

    c = using or build_container()
    return c.policy_connector().connect(
        RemotePolicySettings(server=server, **settings), realtime=realtime
    )


def rollout(
    robot: Mapping[str, Any] | Any,
    *,
    policy: str | Path | None = None,
    server: str | None = None,
    strategy: Mapping[str, Any] | str = "base",
    inference: Mapping[str, Any] | str = "sync",
    teleop: Mapping[str, Any] | Any | None = None,
    dataset: str | Path | None = None,
    resume: bool = False,
    task: str = "",
    fps: int = 30,
    duration_s: float = 10.0,
    return_to_initial_position: bool = True,
    controls: Any = None,
    using: Container | None = None,
) -> Any:
    """Run a policy on a robot as `rlctl rollout` does, and return its report (`to_info()` is
    the JSON `--report_path` writes).

    `robot` / `teleop`: configs or mappings as on the command line (`{"type":
    "so101_follower", "port": "/dev/ttyACM0", "id": "arm"}`); `policy`: a checkpoint folder or
    Hub repo id, or `server`: `HOST:PORT` of `rlctl policy serve`; `strategy` / `inference`: a
    type name or a mapping of its settings (`{"type": "dagger", "record_autonomous": False}`);
    `dataset`: where a recording strategy stores its episodes; `controls`: a `RolloutControls`
    (keys, pedal, or your own events); None: none. Every command goes through the robot's
    safety guard. With `duration_s=0` it runs until the controls stop it; then the arm goes back
    to where it started (`return_to_initial_position`)."""
    from rlctl.application.use_cases.record_episodes import DatasetTarget
    from rlctl.application.use_cases.run_rollout import RolloutSettings
    from rlctl.domain.config import structure
    from rlctl.domain.errors import ConfigError
    from rlctl.domain.rollout import InferenceConfig, RolloutStrategyConfig
    from rlctl.entrypoints.cli.record import PolicyInControl
    from rlctl.entrypoints.parts import RobotConfig, TeleoperatorConfig

    if not policy and not server:
        raise ConfigError(
            "no policy given",
            where="policy",
            hint="give policy=DIR or a Hub repo id, or server=HOST:PORT",
        )

    def config(value: Any, base: type) -> Any:
        data = {"type": value} if isinstance(value, str) else value
        return structure(dict(data), base) if isinstance(data, Mapping) else data

    chosen = config(strategy, RolloutStrategyConfig)
    robot_config = config(robot, RobotConfig)
    c = using or build_container()
    source = PolicyInControl(path=str(policy) if policy else None, server=server)
    made = c.robot(robot_config)
    acting = c.acting_policy(
        source, inference=config(inference, InferenceConfig), realtime=made.realtime
    )
    try:
        teleoperator = (
            c.teleoperator(config(teleop, TeleoperatorConfig).paired_with(robot_config))
            if teleop is not None
            else None
        )
        use_case = c.run_rollout(
            robot=made,
            policy=acting,
            teleop=teleoperator,
            controls=controls if controls is not None else c.rollout_controls(chosen, False),
        )
    except BaseException:
        close = getattr(acting, "close", None)  # the use case closes it once it runs
        if callable(close):
            close()
        raise
    return use_case(
        chosen,
        RolloutSettings(
            fps=fps,
            duration_s=duration_s,
            task=task,
            return_to_initial_position=return_to_initial_position,
        ),
        DatasetTarget(root=Path(dataset), resume=resume) if dataset is not None else None,
    )


def _streaming_dataset(location: Any, c: Container, **options: Any) -> Any:
    _check_streamable(location)
    return c.streaming_dataset(location, **options)


def _check_streamable(location: Any) -> None:
    from rlctl.application.ports.hub import is_repo_id
    from rlctl.domain.errors import InvalidInput

    if not isinstance(location, str) or not is_repo_id(location) or Path(location).exists():
        raise InvalidInput(
            f"streaming reads a Hub dataset by its repo id, not {location!r}",
            where="location",
            hint="pass a repo id such as 'lerobot/pusht'; a local folder is read without "
            "streaming (streaming=False)",
        )


def _read_local(
    location: str | Path, c: Container, opener: Callable[[Path | str], Any], **options: Any
) -> Any:
    """`opener` of the local copy; a Hub copy that fails to open as damaged is compared with the
    Hub's hashes, what differs fetched again, and opened once more."""
    if c.config.dataset.store() != "lerobot" or Path(location).expanduser().is_dir():
        return opener(_local_dataset(location, c, **options))
    return c.resolve_dataset().read(location, opener, **options)


def _local_dataset(location: str | Path, c: Container, **options: Any) -> Path | str:
    if c.config.dataset.store() != "lerobot":
        return str(location)  # another store names its datasets its own way
    if Path(location).expanduser().is_dir():
        return Path(location).expanduser()
    return c.resolve_dataset()(location, **options)
