"""Plain-text renderings of use-case results for a terminal."""

from __future__ import annotations

from rlctl.application.use_cases.inspect_dataset import DatasetSummary
from rlctl.domain.language import ColumnSummary


def human_size(n_bytes: int) -> str:
    size = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def _feature_line(key: str, entry: dict, width: int) -> str:
    shape = "x".join(str(d) for d in entry.get("shape", [])) or "scalar"
    line = f"  {key:<{width}}  {entry.get('dtype', '?'):<8} {shape}"
    info = entry.get("info") or {}
    if entry.get("dtype") == "video" and info:
        line += f"  {info.get('video.codec', '?')} {info.get('video.pix_fmt', '')}".rstrip()
    names = entry.get("names")
    if isinstance(names, list) and names and entry.get("dtype") not in ("video", "image"):
        shown = ", ".join(map(str, names[:8])) + (" …" if len(names) > 8 else "")
        line += f"  [{shown}]"
    return line


def render_summary(s: DatasetSummary) -> str:
    tasks = "; ".join(s.tasks[:5]) + (f" (+{len(s.tasks) - 5} more)" if len(s.tasks) > 5 else "")
    lines = [
        f"dataset   {s.location}",
        f"format    LeRobot {s.codebase_version}",
        f"robot     {s.robot_type or '-'}",
        f"fps       {s.fps}",
        f"episodes  {s.total_episodes}",
        f"frames    {s.total_frames} ({s.duration_s:.1f} s)",
        f"tasks     {len(s.tasks)}: {tasks}" if s.tasks else "tasks     0",
        f"size      {human_size(s.size_bytes)}",
        "features",
    ]
    width = max((len(k) for k in s.features), default=0)
    lines += [_feature_line(k, e, width) for k, e in s.features.items()]
    if s.language:
        lines.append("language annotations")
        lines += [_language_line(k, c, width) for k, c in s.language.items()]
    return "\n".join(lines)


def _language_line(key: str, counts: ColumnSummary, width: int) -> str:
    styles = ", ".join(f"{style} {n}" for style, n in counts.styles.items()) or "-"
    line = f"  {key:<{width}}  {counts.rows} rows in {counts.episodes} episodes: {styles}"
    if counts.cameras:
        tied = ", ".join(f"{camera} {n}" for camera, n in counts.cameras.items())
        line += f" (tied to a camera: {tied})"
    return line
