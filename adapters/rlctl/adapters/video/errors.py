"""Turn what av, torchcodec and ffmpeg raise into `VideoError`s naming the file and the fix."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rlctl.domain.errors import RlctlError, VideoError

FFMPEG_HINT = (
    "install ffmpeg (apt-get install ffmpeg) or decode with PyAV: --dataset.video_backend=pyav"
)
TORCHCODEC_HINT = f"if the file is complete (else re-download it), {FFMPEG_HINT}"
CORRUPT_HINT = (
    "the file may be truncated or not an mp4; re-download the dataset or re-encode the episode"
)


def missing_file_error(path: Path) -> VideoError:
    return VideoError(
        "video file not found",
        where=str(path),
        hint="check the dataset's videos/ folder, or re-download the dataset",
    )


def ensure_file(path: Path) -> None:
    """Fail early with a plain message: decoders report a missing file in many obscure ways."""
    if not path.is_file():
        raise missing_file_error(path)


@contextmanager
def translated(path: Path, action: str, hint: str = CORRUPT_HINT) -> Iterator[None]:
    """Re-raise anything but our own errors as a `VideoError` naming `path`, cause chained.

    Our own errors include those of the file a decoder reads through (a streamed file that
    cannot reach the Hub says so, rather than "cannot decode")."""
    try:
        yield
    except RlctlError:
        raise
    except FileNotFoundError as err:
        raise missing_file_error(path) from err
    except Exception as err:
        raise VideoError(
            f"cannot {action}: {type(err).__name__}: {err}", where=str(path), hint=hint
        ) from err
