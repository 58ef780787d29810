"""`rlctl policy serve`: serve trained policies to robots over gRPC (remote inference).

    rlctl policy serve --policy.path=outputs/train/act/checkpoints/last/pretrained_model \\
        --port 8080 --token-file ~/.rlctl/token
    rlctl policy serve --policy.paths='{"act": "runs/act/pretrained_model", "mlp": "runs/mlp"}'

Then, on the robot's computer: `rlctl record ... --policy.server=GPU_BOX:8080
--policy.token_file=~/.rlctl/token`. Messages carry data only (tensor bytes with dtype and shape,
task text, ticks): nothing a client sends is unpickled. Serves on 127.0.0.1 unless `--host` says
otherwise; another host needs a token (in a file only its owner reads: `chmod 600`) and TLS
(`--tls-cert`, `--tls-key`), or `--insecure` to send them in clear on a network you trust.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import click

from rlctl.domain.policies.compute_dtype import ComputeDtype
from rlctl.entrypoints.cli.config_options import config_options, settings_command
from rlctl.entrypoints.cli.server_settings import check_message_timeout
from rlctl.entrypoints.settings import AppSettings


@attrs.frozen
class ServedPolicies:
    # One policy: a `pretrained_model` folder, a run (its last checkpoint) or a Hub repo id;
    # served under its folder's (or repo's) name.
    path: str | None = None
    # Several policies, by the name robots ask for: {name: folder or repo id}.
    paths: dict[str, str] = attrs.field(factory=dict)
    # cpu, cuda, cuda:1, mps; default: the device it was trained on, if present here.
    device: str | None = None
    # A bfloat16 policy computes in float32 where the device emulates bfloat16 (`auto`), in
    # its own dtypes (`keep`), or in float32 everywhere (`float32`).
    compute_dtype: ComputeDtype = "auto"


@attrs.frozen(kw_only=True)
class ServeCommandSettings(AppSettings):
    policy: ServedPolicies = attrs.field(factory=ServedPolicies)
    # The address to listen on: loopback unless told otherwise (beyond it: a token, and TLS or
    # --insecure).
    host: str = "127.0.0.1"
    # 0: any free port (printed when serving).
    port: int = 8080
    # A file holding the token clients must send (at least 16 characters; chmod 600).
    token_file: str | None = None
    # PEM certificate and private key: serve over TLS.
    tls_cert: str | None = None
    tls_key: str | None = None
    # Messages over this size are refused (RESOURCE_EXHAUSTED).
    max_message_mb: float = 64.0
    # Requests handled at once (each policy still answers one at a time); more are refused
    # (RESOURCE_EXHAUSTED) instead of queueing.
    workers: int = 8
    # Requests in flight from one host at once; unset: half of workers.
    max_per_peer: int | None = None
    # Connections open at once; the next ones are closed on arrival.
    max_connections: int = 64
    # A connection without calls this long is closed (its client reconnects when it calls).
    idle_timeout_s: float = 300.0
    # A call whose message has not arrived this many seconds after it was admitted is cut off,
    # so a robot stalled mid-send (its network gone, its process frozen) frees its worker and
    # its host's slots.
    message_timeout_s: float = 30.0


@settings_command("serve")
@config_options(ServeCommandSettings)
@click.option(
    "--insecure",
    is_flag=True,
    help="Serve beyond this machine without TLS: the token and the observations cross the "
    "network in clear. Only on a network you trust.",
)
def serve(config: ServeCommandSettings, insecure: bool) -> None:
    """Serve trained policies to robots over gRPC (remote inference)."""
    from rlctl.application.use_cases.serve_policy import ServedPolicy
    from rlctl.domain.errors import ConfigError
    from rlctl.entrypoints.container import build_container

    served = [ServedPolicy(name, path) for name, path in config.policy.paths.items()]
    if config.policy.path:
        served.insert(0, ServedPolicy(_name_of(Path(config.policy.path)), config.policy.path))
    if not served:
        raise ConfigError(
            "no policy to serve",
            where="--policy.path",
            hint="""--policy.path=FOLDER, or --policy.paths='{"NAME": "FOLDER", ...}'""",
        )
    if not 0 < config.max_message_mb <= 2047:
        raise ConfigError(
            f"max_message_mb must be within (0, 2047], got {config.max_message_mb}",
            where="--max-message-mb",
        )
    check_message_timeout(config.message_timeout_s)
    # Each location (folder, run folder or Hub repo id) is resolved once, by the container.
    use_case, served = build_container(config).policy_serving(served, config, insecure=insecure)

    def ready(address: str) -> None:
        names = ", ".join(p.name for p in served)
        click.echo(f"serving {names} on {address}", err=False)

    use_case(served, device=config.policy.device, on_ready=ready)


def _name_of(folder: Path) -> str:
    # `.../checkpoints/last/pretrained_model` is better known by its run than by its leaf.
    parts = [p for p in folder.resolve().parts if p not in {"pretrained_model", "last"}]
    return parts[-1] if parts else folder.name
