"""CropDatasetRoi: LeRobot's `lerobot/rl/crop_dataset_roi.py` — the chosen cameras' frames cropped
to a region of interest and resized (128x128 by default), into a new dataset; everything else
copied as it is.

Unlike LeRobot's script it keeps the episodes' boundaries and tasks exactly (LeRobot's closes
each episode one frame late and writes the task given on its command line, empty by default),
keeps video cameras as video (encoded anew with their own settings) and image cameras as images,
and recomputes the cropped cameras' statistics from the new frames. It never edits in place: the
output is a new folder (`<root>_cropped_resized` by default, LeRobot's `new_repo_id`). The
regions are given (LeRobot's crop-params JSON); LeRobot's window to draw them is not there.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import structlog

from rlctl.application.ports.dataset_tools import EpisodeRef, FeatureChanges
from rlctl.application.use_cases.dataset_rebuild import (
    DatasetTool,
    EditResult,
    edit_dataset,
)
from rlctl.domain.errors import InvalidInput
from rlctl.domain.features import FeatureSpec
from rlctl.domain.rl.roi import RegionCrop

log = structlog.get_logger(__name__)


def default_output(location: str) -> str:
    return location.rstrip("/") + "_cropped_resized"


def _cropped_spec(spec: FeatureSpec, crop: RegionCrop) -> FeatureSpec:
    height, width = crop.size
    dims = {"height": height, "width": width, "channels": spec.hwc[2]}
    names = list(spec.names) if isinstance(spec.names, list | tuple) else []
    order = names if set(names) == set(dims) and len(names) == 3 else list(dims)
    info = {k: v for k, v in (spec.info or {}).items() if not k.startswith("video.")}
    return attrs.evolve(spec, shape=tuple(dims[n] for n in order), info=info or None)


class CropDatasetRoi(DatasetTool):
    def __call__(
        self, location: str, crops: Mapping[str, RegionCrop], output: str | None = None
    ) -> EditResult:
        meta = self._meta_reader.read_meta(location)
        for key, crop in crops.items():
            spec = meta.features.get(key)
            if spec is None or not spec.is_visual:
                cameras = ", ".join(meta.visual_keys) or "none"
                raise InvalidInput(
                    f"{key!r} is not a camera of this dataset",
                    where=location,
                    hint=f"its cameras: {cameras}",
                )
            if spec.is_depth_map:
                raise InvalidInput(
                    "rlctl crops RGB cameras only; this one is a depth camera",
                    where=key,
                    hint="leave it out of the crop parameters",
                )
            height, width, _ = spec.hwc
            crop.check_fits(height, width, key)
        target = output or default_output(location)
        features = {
            k: _cropped_spec(f, crops[k]) if k in crops else f for k, f in meta.features.items()
        }
        log.info("cropping cameras", cameras={k: c.box for k, c in crops.items()})
        return edit_dataset(
            self._rebuilder,
            self._folders,
            self._progress,
            location=location,
            output=target,
            template=attrs.evolve(meta, features=features),
            refs=[EpisodeRef(location, i) for i in range(meta.total_episodes)],
            description="cropping cameras",
            changes=FeatureChanges(cropped=crops),
        )
