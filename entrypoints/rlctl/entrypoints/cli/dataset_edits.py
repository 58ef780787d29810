"""`rlctl dataset remove-feature | add-feature | modify-tasks | convert-images-to-video |
reencode-videos`: LeRobot's `lerobot-edit-dataset` operations that change features, tasks and
videos. Each writes a new folder with `-o`, or edits ROOT in place, safely, without it.
`rlctl dataset crop-roi` (LeRobot's `crop_dataset_roi`) always writes a new folder.

Attached to the `dataset` group by import path; numpy and the adapters load in the bodies.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from rlctl.entrypoints.cli.config_options import config_options, settings_command
from rlctl.entrypoints.cli.dataset_tools import _container, _echo_edit, force_option
from rlctl.entrypoints.settings import AppSettings

_OUTPUT_HELP = (
    "Write the result here; without it ROOT is replaced once the new copy is complete (what "
    "ROOT holds besides the dataset, such as README.md or notes, is kept)."
)


def _output_option[F: Callable[..., Any]](function: F) -> F:
    return click.option(
        "-o", "--output", type=click.Path(file_okay=False), default=None, help=_OUTPUT_HELP
    )(function)


def _json_option[F: Callable[..., Any]](function: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")(
        function
    )


def _json_mapping(text: str | None, option: str, example: str) -> dict[str, Any] | None:
    """The JSON object given to `option`; a mistake is answered with `example`, the shape
    that option takes."""
    if text is None:
        return None
    from rlctl.domain.errors import InvalidInput

    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise InvalidInput(
            f"not JSON: {err.msg} (line {err.lineno}, column {err.colno})",
            where=option,
            hint=f"give a JSON object, e.g. {example}",
        ) from err
    if not isinstance(value, dict):
        raise InvalidInput(
            f"a JSON object is needed, not {type(value).__name__}",
            where=option,
            hint=f"e.g. {example}",
        )
    return value


# A region per camera: top, left, height, width (LeRobot's crop_params_dict).
_CROP_EXAMPLE = "'{\"observation.images.front\": [0, 0, 240, 320]}'"

# What `--g none` / `--crf none` become: no value, the codec's own default (LeRobot's `None`).
_NONE = "none"


class _OptionalNumber(click.ParamType):
    """A number, or `none` / `null` for the codec's own default."""

    name = "number|none"

    def __init__(self, integer: bool) -> None:
        self._integer = integer

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value is None or isinstance(value, (int, float)):
            return value
        if str(value).strip().lower() in ("none", "null"):
            return _NONE
        try:
            number = float(value)
            if self._integer:
                if not number.is_integer():
                    raise ValueError
                return int(number)
            return int(number) if number.is_integer() else number
        except ValueError:
            kind = "a whole number" if self._integer else "a number"
            self.fail(f"{value!r} is not {kind} or 'none'", param, ctx)


def _encoder_options[F: Callable[..., Any]](function: F) -> F:
    """LeRobot's `VideoEncoderConfig` fields; unset ones keep LeRobot's defaults."""
    options = [
        click.option("--vcodec", default=None, help="libsvtav1 (default), h264 or hevc."),
        click.option("--pix_fmt", "--pix-fmt", "pix_fmt", default=None, help="e.g. yuv420p."),
        click.option(
            "--g",
            "g",
            type=_OptionalNumber(integer=True),
            default=None,
            help="GOP size (keyframe interval; default 2), or none for the codec's.",
        ),
        click.option(
            "--crf",
            type=_OptionalNumber(integer=False),
            default=None,
            help="Quality (lower is better; default 30), or none.",
        ),
        click.option("--preset", default=None, help="Codec preset (libsvtav1: 12 by default)."),
        click.option(
            "--fast_decode", "--fast-decode", "fast_decode", type=int, default=None, help="0-2."
        ),
        click.option(
            "--extra_options",
            "--extra-options",
            "extra_options",
            default=None,
            metavar="JSON",
            help='More encoder options, e.g. \'{"tune": "film"}\'.',
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _encoding(
    vcodec: str | None,
    pix_fmt: str | None,
    g: Any,
    crf: Any,
    preset: str | None,
    fast_decode: int | None,
    extra_options: str | None,
) -> Any:
    from rlctl.domain.video import VideoEncoding

    kwargs: dict[str, Any] = {}
    for name, value in (
        ("codec", vcodec),
        ("pix_fmt", pix_fmt),
        ("preset", preset),
        ("fast_decode", fast_decode),
    ):
        if value is not None:
            kwargs[name] = value
    for name, value in (("g", g), ("crf", crf)):
        if value is not None:
            kwargs[name] = None if value == _NONE else value
    extra = _json_mapping(extra_options, "--extra_options", '\'{"tune": "film"}\'')
    if extra is not None:
        kwargs["extra_options"] = extra
    return VideoEncoding(**kwargs)


@settings_command("remove-feature")
@click.argument("root", type=click.Path(file_okay=False, exists=True))
@click.option(
    "--feature",
    "features",
    multiple=True,
    required=True,
    metavar="NAME",
    help="A feature to remove (repeat, or separate with commas).",
)
@_output_option
@_json_option
@force_option
@config_options(AppSettings)
def remove_feature(
    root: str,
    features: tuple[str, ...],
    output: str | None,
    as_json: bool,
    force: bool,
    config: AppSettings,
) -> None:
    """Remove features (a camera and its videos, a state, ...) from ROOT."""
    names = [n.strip() for value in features for n in value.split(",") if n.strip()]
    result = _container(config).remove_features()(root, names, output, force=force)
    _echo_edit(result, as_json, "rewrote")


@settings_command("add-feature")
@click.argument("root", type=click.Path(file_okay=False, exists=True))
@click.option("--feature", "name", required=True, metavar="NAME", help="The new feature's name.")
@click.option(
    "--values",
    "values_file",
    required=True,
    type=click.Path(dir_okay=False, exists=True),
    help="A .npy file of (frames, *shape) values, one row per frame in index order.",
)
@click.option("--dtype", default=None, help="The stored dtype (default: the array's).")
@click.option(
    "--names",
    default=None,
    metavar="A,B,…",
    help="Names of the values (the feature's last axis).",
)
@_output_option
@_json_option
@force_option
@config_options(AppSettings)
def add_feature(
    root: str,
    name: str,
    values_file: str,
    dtype: str | None,
    names: str | None,
    output: str | None,
    as_json: bool,
    force: bool,
    config: AppSettings,
) -> None:
    """Add a feature to ROOT from a .npy file holding one value per frame."""
    import numpy as np

    from rlctl.domain.errors import InvalidInput

    try:
        values = np.load(values_file, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise InvalidInput(
            f"not a .npy array file: {err}",
            where=values_file,
            hint="save the values with numpy.save(path, array)",
        ) from err
    shape = list(values.shape[1:]) or [1]
    info = {
        "dtype": dtype or ("string" if values.dtype.kind == "U" else str(values.dtype)),
        "shape": shape,
        "names": [n.strip() for n in names.split(",")] if names else None,
    }
    result = _container(config).add_features()(root, {name: (values, info)}, output, force=force)
    _echo_edit(result, as_json, "rewrote")


@settings_command("modify-tasks")
@click.argument("root", type=click.Path(file_okay=False, exists=True))
@click.option("--new-task", "--new_task", "new_task", default=None, help="Task for every episode.")
@click.option(
    "--episode-tasks",
    "--episode_tasks",
    "episode_tasks",
    default=None,
    metavar="JSON",
    help='Tasks of some episodes (over --new-task), e.g. \'{"0": "Task A", "3": "Task B"}\'.',
)
@click.option(
    "--task-replacements",
    "--task_replacements",
    "task_replacements",
    default=None,
    metavar="JSON",
    help='Existing tasks renamed, e.g. \'{"pick the cube": "lift the cube"}\'.',
)
@_output_option
@_json_option
@force_option
@config_options(AppSettings)
def modify_tasks(
    root: str,
    new_task: str | None,
    episode_tasks: str | None,
    task_replacements: str | None,
    output: str | None,
    as_json: bool,
    force: bool,
    config: AppSettings,
) -> None:
    """Change the task strings of ROOT's episodes (in place unless -o is given)."""
    from rlctl.domain.errors import InvalidInput

    per_episode = _json_mapping(episode_tasks, "--episode-tasks", '\'{"0": "pick the cube"}\'')
    replacements = _json_mapping(
        task_replacements, "--task-replacements", '\'{"old task": "new task"}\''
    )
    by_index: dict[int, str] | None = None
    if per_episode is not None:
        try:
            by_index = {int(k): v for k, v in per_episode.items()}
        except ValueError as err:
            raise InvalidInput(
                "episode indices must be whole numbers",
                where="--episode-tasks",
                hint='e.g. \'{"0": "Task A"}\'',
            ) from err
    result = _container(config).modify_tasks()(
        root,
        new_task=new_task,
        episode_tasks=by_index,
        task_replacements=replacements,
        output=output,
        force=force,
    )
    _echo_edit(result, as_json, "rewrote")


@settings_command("convert-images-to-video")
@click.argument("root", type=click.Path(file_okay=False, exists=True))
@click.option("--episodes", metavar="SPEC", default=None, help='Episodes to keep, e.g. "0-4,7".')
@_encoder_options
@click.option("--depth-min", type=float, default=None, help="Depth cameras: nearest (m), 0.01.")
@click.option("--depth-max", type=float, default=None, help="Depth cameras: farthest (m), 10.")
@click.option("--depth-shift", type=float, default=None, help="Depth cameras: log shift (m), 3.5.")
@click.option(
    "--depth-use-log/--depth-linear",
    default=None,
    help="Depth cameras: logarithmic (default) or linear quantization.",
)
@_output_option
@_json_option
@force_option
@config_options(AppSettings)
def convert_images_to_video(
    root: str,
    episodes: str | None,
    vcodec: str | None,
    pix_fmt: str | None,
    g: Any,
    crf: Any,
    preset: str | None,
    fast_decode: int | None,
    extra_options: str | None,
    depth_min: float | None,
    depth_max: float | None,
    depth_shift: float | None,
    depth_use_log: bool | None,
    output: str | None,
    as_json: bool,
    force: bool,
    config: AppSettings,
) -> None:
    """Encode ROOT's cameras stored as images into videos (LeRobot's video settings)."""
    from rlctl.domain.depth import DepthQuantization
    from rlctl.domain.video import depth_video_encoding

    encoding = _encoding(vcodec, pix_fmt, g, crf, preset, fast_decode, extra_options)
    quantization: dict[str, Any] = {}
    for name, value in (
        ("depth_min", depth_min),
        ("depth_max", depth_max),
        ("shift", depth_shift),
        ("use_log", depth_use_log),
    ):
        if value is not None:
            quantization[name] = value
    depth = depth_video_encoding(DepthQuantization(**quantization))
    result = _container(config).convert_images_to_video()(
        root, output, encoding=encoding, depth_encoding=depth, episodes=episodes, force=force
    )
    _echo_edit(result, as_json, "converted")


@settings_command("reencode-videos")
@click.argument("root", type=click.Path(file_okay=False, exists=True))
@_encoder_options
@_output_option
@_json_option
@force_option
@config_options(AppSettings)
def reencode_videos(
    root: str,
    vcodec: str | None,
    pix_fmt: str | None,
    g: Any,
    crf: Any,
    preset: str | None,
    fast_decode: int | None,
    extra_options: str | None,
    output: str | None,
    as_json: bool,
    force: bool,
    config: AppSettings,
) -> None:
    """Re-encode ROOT's RGB videos with new settings (unset ones: LeRobot's defaults)."""
    encoding = _encoding(vcodec, pix_fmt, g, crf, preset, fast_decode, extra_options)
    outcome = _container(config).reencode_videos()(root, encoding, output, force=force)
    if outcome.result is None:
        message = "every video already has these settings; nothing to do"
        click.echo(json.dumps({"output": root, "cameras": []}) if as_json else message)
        return
    if as_json:
        result = outcome.result
        data = {
            "output": result.output,
            "episodes": result.episodes,
            "frames": result.frames,
            "tasks": result.tasks,
            "cameras": list(outcome.cameras),
            "depth_cameras_kept": list(outcome.skipped_depth),
            "kept": list(result.kept),
        }
        click.echo(json.dumps(data, indent=2))
        return
    verb = "re-encoded " + ", ".join(outcome.cameras) + " ->" if outcome.cameras else "copied to"
    _echo_edit(outcome.result, False, verb)
    if outcome.skipped_depth:
        click.echo(f"depth cameras kept as they are: {', '.join(outcome.skipped_depth)}")


@settings_command("crop-roi")
@click.argument("root", type=click.Path(file_okay=False, exists=True))
@click.option(
    "--crop-params",
    metavar="JSON",
    default=None,
    help="Each camera's region [top, left, height, width], e.g. "
    "'{\"observation.images.front\": [0, 80, 480, 480]}'.",
)
@click.option(
    "--crop-params-path",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="A JSON file of the regions (LeRobot's crop-params file).",
)
@click.option(
    "--resize",
    nargs=2,
    type=int,
    default=(128, 128),
    show_default=True,
    metavar="HEIGHT WIDTH",
    help="The size each cropped frame is resized to.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False),
    default=None,
    help="The new dataset's folder (default: ROOT_cropped_resized); ROOT is never changed.",
)
@_json_option
@config_options(AppSettings)
def crop_roi(
    root: str,
    crop_params: str | None,
    crop_params_path: str | None,
    resize: tuple[int, int],
    output: str | None,
    as_json: bool,
    config: AppSettings,
) -> None:
    """Crop the cameras of ROOT to regions of interest and resize them, into a new dataset
    (LeRobot's crop_dataset_roi, for HIL-SERL)."""
    from pathlib import Path

    from rlctl.domain.errors import InvalidInput
    from rlctl.domain.rl.roi import parse_crops

    if (crop_params is None) == (crop_params_path is None):
        raise InvalidInput(
            "give the regions once: --crop-params or --crop-params-path",
            where="--crop-params",
            hint=f"e.g. --crop-params {_CROP_EXAMPLE}",
        )
    if crop_params_path is not None:
        try:
            crop_params = Path(crop_params_path).read_text("utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise InvalidInput(
                f"cannot read the crop parameters: {err}", where=crop_params_path
            ) from err
    where = crop_params_path or "--crop-params"
    raw = _json_mapping(crop_params, where, _CROP_EXAMPLE)
    crops = parse_crops(raw or {}, resize)
    result = _container(config).crop_dataset_roi()(root, crops, output)
    _echo_edit(result, as_json, "cropped " + ", ".join(crops) + " ->")
