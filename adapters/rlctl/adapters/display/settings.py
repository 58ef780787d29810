"""How `--display_data=true` shows a run: kept light, since the commands' `--help` imports it."""

from __future__ import annotations

from typing import Literal

import attrs

DisplayMode = Literal["auto", "viewer", "web", "file"]


@attrs.frozen(kw_only=True)
class DisplaySettings:
    # auto: rerun's viewer when this machine has a screen, else an .rrd file; viewer; web
    # (rerun's web viewer served from here, its address printed); file (an .rrd to open later).
    mode: DisplayMode = "auto"
    # The .rrd written in file mode; default: outputs/display/<command>_<date>_<time>.rrd.
    rrd: str | None = None
    # Where the web viewer is served (web mode).
    web_port: int = 9090
    # The port rerun's data travels on (the spawned viewer's, or the web viewer's source).
    grpc_port: int = 9876
    # Pictures are shrunk by whole steps until their longer side is at most this; 0: full size.
    image_max_side: int = 320
    # Pictures are sent as JPEG of this quality (off the loop's thread); 0: raw pixels.
    jpeg_quality: int = 80
    # Frames waiting to be sent; when the display falls behind, newer ones are dropped.
    queue_frames: int = 4
