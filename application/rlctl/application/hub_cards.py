"""README.md cards for the Hub: a dataset card and a model card, written from metadata.

The YAML header carries what the Hub indexes (license, tags, task category, the dataset's parquet
files, a policy's training dataset), with the keys LeRobot 0.6.1 writes, so a repo pushed by
rlctl is listed and filtered like one pushed by LeRobot. Values are written as JSON strings,
which YAML reads as double-quoted scalars: no YAML library needed, and no value can break the
header.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from rlctl.domain.dataset_meta import DatasetMeta

DEFAULT_LICENSE = "apache-2.0"
LEROBOT_URL = "https://github.com/huggingface/lerobot"


def _scalar(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return json.dumps(str(value), ensure_ascii=False)


def front_matter(fields: Mapping[str, Any]) -> str:
    """A YAML header of scalars, lists of scalars and lists of flat mappings; None is skipped."""
    lines = ["---"]
    for key, value in fields.items():
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            lines.append(f"{key}:")
            for item in value:
                if isinstance(item, Mapping):
                    pairs = [f"{k}: {_scalar(v)}" for k, v in item.items()]
                    lines.append("- " + "\n  ".join(pairs))
                else:
                    lines.append(f"- {_scalar(item)}")
        else:
            lines.append(f"{key}: {_scalar(value)}")
    lines.append("---")
    return "\n".join(lines) + "\n"


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


def _md(text: Any) -> str:
    # Table cells: a pipe or a newline would end the cell.
    return str(text).replace("|", "\\|").replace("\n", " ")


def dataset_card(
    meta: DatasetMeta,
    repo_id: str,
    *,
    tags: Iterable[str] = (),
    license: str | None = DEFAULT_LICENSE,
) -> str:
    header = front_matter(
        {
            "license": license,
            "task_categories": ["robotics"],
            "tags": _unique(["LeRobot", *tags]),
            "configs": [{"config_name": "default", "data_files": "data/*/*.parquet"}],
        }
    )
    cameras = ", ".join(f"`{k}`" for k in meta.visual_keys) or "none"
    tasks = "\n".join(f"- {task}" for task in meta.tasks) or "- (none)"
    info = json.dumps(dict(meta.info), indent=4, ensure_ascii=False, default=str)
    return (
        f"{header}\n"
        f"# {repo_id}\n\n"
        f"A robot-learning dataset in [LeRobot]({LEROBOT_URL})'s {meta.codebase_version} "
        "format, made with rlctl. It loads with "
        f'`LeRobotDataset("{repo_id}")` or `rlctl dataset pull {repo_id}`.\n\n'
        "## Summary\n\n"
        "| | |\n| --- | --- |\n"
        f"| Robot type | {_md(meta.robot_type or 'unknown')} |\n"
        f"| Episodes | {meta.total_episodes} |\n"
        f"| Frames | {meta.total_frames} |\n"
        f"| Frame rate | {meta.fps} fps |\n"
        f"| Cameras | {_md(cameras)} |\n"
        f"| License | {_md(license or 'unspecified')} |\n\n"
        f"## Tasks\n\n{tasks}\n\n"
        "## Dataset Structure\n\n"
        f"[meta/info.json](meta/info.json):\n```json\n{info}\n```\n"
    )


_TASKS_SECTION = re.compile(r"(^## Tasks\n\n)((?:- .*\n)+)", re.MULTILINE)
# LeRobot's card and rlctl's end with info.json, shown whole.
_INFO_BLOCK = re.compile(
    r"(\[meta/info\.json\]\(meta/info\.json\):\s*\n```json\n)(.*?)(\n```)", re.DOTALL
)


def update_card_counts(text: str, meta: DatasetMeta) -> str:
    """A dataset card (LeRobot's or rlctl's) with what it says of the dataset made true again
    for `meta`: the episode and frame counts of the summary table, the task list, and the
    info.json it shows. Anything else (the user's own words) is left as it is."""
    for label, count in (("Episodes", meta.total_episodes), ("Frames", meta.total_frames)):
        text = re.sub(
            rf"^(\| {label} \| )\d+( \|)$", rf"\g<1>{count}\g<2>", text, flags=re.MULTILINE
        )
    tasks = "".join(f"- {task}\n" for task in meta.tasks) or "- (none)\n"
    text = _TASKS_SECTION.sub(lambda m: m.group(1) + tasks, text, count=1)
    info = json.dumps(dict(meta.info), indent=4, ensure_ascii=False, default=str)
    return _INFO_BLOCK.sub(lambda m: m.group(1) + info + m.group(3), text, count=1)


def _metric(value: Any) -> str:
    if isinstance(value, float):
        return "n/a" if math.isnan(value) else f"{value:.4g}"
    return _md(value)


def _features_table(features: Mapping[str, Any]) -> str:
    rows = [
        f"| `{_md(name)}` | {_md(spec.get('type', ''))} | `{_md(spec.get('shape', ''))}` |"
        for name, spec in features.items()
        if isinstance(spec, Mapping)
    ]
    return "| Feature | Type | Shape |\n| --- | --- | --- |\n" + "\n".join(rows) + "\n"


def _training_section(train_config: Mapping[str, Any]) -> str:
    optimizer = train_config.get("optimizer") or {}
    rows = {
        "Training steps": train_config.get("steps"),
        "Batch size": train_config.get("batch_size"),
        "Optimizer": optimizer.get("type") if isinstance(optimizer, Mapping) else None,
        "Learning rate": optimizer.get("lr") if isinstance(optimizer, Mapping) else None,
        "Seed": train_config.get("seed"),
    }
    body = "".join(f"| {name} | {_metric(v)} |\n" for name, v in rows.items() if v is not None)
    return "## Training Configuration\n\n| Setting | Value |\n| --- | --- |\n" + body + "\n"


# eval_info.json's "overall" figures, in the order a reader looks for them.
_METRICS = {
    "pc_success": "Success rate (%)",
    "avg_sum_reward": "Average return",
    "avg_max_reward": "Average max reward",
    "n_episodes": "Episodes",
}


def eval_metrics(eval_info: Mapping[str, Any] | None) -> dict[str, Any]:
    """The headline figures of LeRobot's eval_info.json (`overall`, or the older `aggregated`)."""
    if not eval_info:
        return {}
    overall = eval_info.get("overall") or eval_info.get("aggregated") or {}
    if not isinstance(overall, Mapping):
        return {}
    return {key: overall[key] for key in _METRICS if key in overall}


def model_card(
    config: Mapping[str, Any],
    repo_id: str,
    *,
    train_config: Mapping[str, Any] | None = None,
    eval_info: Mapping[str, Any] | None = None,
    tags: Iterable[str] = (),
    license: str | None = None,
) -> str:
    """A policy's card from its config.json, train_config.json and eval_info.json."""
    policy_type = str(config.get("type") or "policy")
    dataset = train_config.get("dataset") if train_config else None
    dataset_repo = dataset.get("repo_id") if isinstance(dataset, Mapping) else None
    license = license or config.get("license") or DEFAULT_LICENSE
    header = front_matter(
        {
            "license": license,
            "library_name": "lerobot",
            "pipeline_tag": "robotics",
            "tags": _unique(
                ["robotics", "lerobot", policy_type, *(config.get("tags") or []), *tags]
            ),
            "model_name": policy_type,
            "datasets": [dataset_repo] if dataset_repo else None,
        }
    )
    sections = [
        f"{header}\n# {repo_id}\n\n"
        f"A robot policy of type **{policy_type}**, in [LeRobot]({LEROBOT_URL})'s checkpoint "
        f"format, pushed with rlctl. Load it with `rlctl policy pull {repo_id}`, or in LeRobot "
        f"with `--policy.path={repo_id}`.\n\n"
    ]
    if dataset_repo:
        sections.append(
            f"## Training Dataset\n\n[{dataset_repo}](https://huggingface.co/datasets/"
            f"{dataset_repo})\n\n"
        )
    if train_config:
        sections.append(_training_section(train_config))
    metrics = eval_metrics(eval_info)
    if metrics:
        rows = "".join(f"| {_METRICS[k]} | {_metric(v)} |\n" for k, v in metrics.items())
        sections.append("## Evaluation\n\n| Metric | Value |\n| --- | --- |\n" + rows + "\n")
    inputs, outputs = config.get("input_features"), config.get("output_features")
    if isinstance(inputs, Mapping) and inputs:
        sections.append("## Inputs\n\n" + _features_table(inputs) + "\n")
    if isinstance(outputs, Mapping) and outputs:
        sections.append("## Outputs\n\n" + _features_table(outputs) + "\n")
    return "".join(sections).rstrip("\n") + "\n"
