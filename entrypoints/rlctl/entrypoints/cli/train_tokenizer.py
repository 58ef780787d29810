"""`rlctl train-tokenizer`: fit π0-FAST's action tokenizer (FAST: DCT + BPE) on a dataset's
action chunks, as LeRobot 0.6.1's `lerobot-train-tokenizer` does, setting for setting.

    rlctl train-tokenizer --dataset.root=DIR --action_horizon=50 --encoded_dims=0:7 \\
        --normalization_mode=MEAN_STD --output_dir=fast_tokenizer

LeRobot's spelling (`--repo_id=user/name --root=DIR`) is read too. `--dataset.repo_id` may name
a dataset on the Hub (pulled into LeRobot's cache). The folder written is the one LeRobot's
`AutoProcessor.from_pretrained(..., trust_remote_code=True)` and π0-FAST read
(`--policy.action_tokenizer_name=<output_dir or Hub repo id>`); `--push_to_hub=true` uploads it.
"""

from __future__ import annotations

import json
from typing import Literal

import attrs
import click

from rlctl.application.use_cases.train_action_tokenizer import TokenizerTrainingConfig
from rlctl.entrypoints.cli.config_options import config_options, settings_command
from rlctl.entrypoints.settings import AppSettings, DatasetSettings


@attrs.frozen(kw_only=True)
class TokenizerDatasetSettings(DatasetSettings):
    repo_id: str | None = None
    root: str | None = None
    revision: str | None = None


@attrs.frozen(kw_only=True)
class TrainTokenizerSettings(TokenizerTrainingConfig):
    """LeRobot's settings, plus rlctl's `dataset.*` spelling and the shared adapter choices."""

    dataset: TokenizerDatasetSettings = attrs.field(factory=TokenizerDatasetSettings)
    progress: Literal["auto", "terminal", "silent"] = "auto"

    def app_settings(self) -> AppSettings:
        """The shared adapter choices, for the container."""
        dataset = DatasetSettings(
            store=self.dataset.store, video_backend=self.dataset.video_backend
        )
        return AppSettings(dataset=dataset, progress=self.progress)

    def training_config(self) -> TokenizerTrainingConfig:
        """The use case's settings: `dataset.repo_id`/`dataset.root` win over LeRobot's flat
        `repo_id`/`root`."""
        fields = {f.name: getattr(self, f.name) for f in attrs.fields(TokenizerTrainingConfig)}
        fields["repo_id"] = self.dataset.repo_id or self.repo_id
        fields["root"] = self.dataset.root or self.root
        return TokenizerTrainingConfig(**fields)


@settings_command("train-tokenizer")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@config_options(TrainTokenizerSettings)
def train_tokenizer_command(as_json: bool, config: TrainTokenizerSettings) -> None:
    """Fit a FAST action tokenizer (π0-FAST's) on a dataset's action chunks."""
    from rlctl.entrypoints.container import build_container

    settings = config.training_config()
    settings.check()
    container = build_container(config.app_settings())
    location = settings.root or settings.repo_id
    assert location is not None  # settings.check() refuses neither
    root = container.resolve_dataset()(location, revision=config.dataset.revision)
    result = container.train_action_tokenizer()(settings, str(root))
    stats = result.metadata["compression_stats"]
    if as_json:
        data = {
            "output_dir": str(result.output_dir),
            "chunks": result.chunks,
            "hub_commit": result.hub_commit,
            **result.metadata,
        }
        click.echo(json.dumps(data, indent=2))
        return
    click.echo(
        f"fitted the FAST tokenizer on {result.chunks} action chunks "
        f"({settings.action_horizon} steps x {result.metadata['total_encoded_dims']} dims): "
        f"{stats['mean_token_length']:.1f} tokens per chunk on average "
        f"(p99 {stats['p99_token_length']:.0f}, compression {stats['compression_ratio']:.2f}x)"
    )
    click.echo(f"saved to {result.output_dir}")
    if result.hub_commit:
        click.echo(f"pushed to the Hub at commit {result.hub_commit}")
    click.echo(
        f"use it with: rlctl train --policy.type=pi0_fast "
        f"--policy.action_tokenizer_name={result.output_dir}"
    )
