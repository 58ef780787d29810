"""`rlctl dataset view ROOT|REPO_ID`: a local web page to look at a dataset's episodes.

    rlctl dataset view data/pusht                 # serves on 127.0.0.1, opens a browser
    rlctl dataset view lerobot/pusht --port 8000 --no-browser
    rlctl dataset view data/pusht --out site/     # the same page as static files
    rlctl dataset view data/pusht --rerun --episode 3 --out ep3.rrd   # one episode for rerun
    rlctl dataset view data/pusht --host 0.0.0.0 --port 8000 --insecure  # to the whole network

The page lists the episodes (filterable), plays the chosen episode's cameras in sync and plots
each state/action group with a cursor that follows the video; clicking a plot seeks. Videos are
the dataset's own files, served with range requests. `--rerun` writes one episode as a rerun
recording instead (cameras, state, action, named per dimension): `rerun FILE.rrd` opens it.
The page is served on loopback; an address other machines reach needs `--insecure` (as for
`rlctl policy serve`), and a warning says who can read the dataset. Heavy imports happen in the
body only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from rlctl.entrypoints.cli.config_options import config_options, settings_command
from rlctl.entrypoints.settings import AppSettings

if TYPE_CHECKING:
    from rlctl.application.use_cases.view_dataset import DatasetViewer


@settings_command()
@click.argument("location", metavar="ROOT|REPO_ID")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; one other machines reach (0.0.0.0, a LAN address) needs "
    "--insecure.",
)
@click.option(
    "--insecure",
    is_flag=True,
    help="Serve on a --host other machines reach: anyone who can reach it reads the dataset, "
    "without a password.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    help="Port to listen on (default: any free).",
)
@click.option(
    "--browser/--no-browser", default=True, help="Open the page in a web browser (default: yes)."
)
@click.option(
    "--out",
    type=click.Path(),
    default=None,
    help="Write the page as static files to this folder (videos linked or copied) and exit; "
    "with --rerun, the .rrd file to write.",
)
@click.option(
    "--rerun",
    "rerun",
    is_flag=True,
    help="Write one episode as a rerun recording (.rrd) instead of serving the page.",
)
@click.option(
    "--episode",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="The episode --rerun writes.",
)
@click.option("--revision", default=None, help="Hub revision of a REPO_ID (branch, tag, commit).")
@config_options(AppSettings)
def view(
    location: str,
    host: str,
    insecure: bool,
    port: int,
    browser: bool,
    out: str | None,
    rerun: bool,
    episode: int,
    revision: str | None,
    config: AppSettings,
) -> None:
    """Look at the dataset at ROOT (or a Hub REPO_ID) in a local web page: episodes, synced
    camera videos, state/action plots; --out DIR writes it as static files."""
    from rlctl.entrypoints.container import build_container

    container = build_container(config)
    if out is None and not rerun and not insecure:
        container.refuse_remote_viewer()(host)  # before a Hub dataset is pulled for nothing
    root = container.resolve_dataset()(location, revision=revision)
    if rerun:
        _write_rrd(container, str(root), episode, out)
        return
    viewer = container.view_dataset()(str(root))
    if out is not None:
        page = container.viewer_site()(viewer, out)
        click.echo(f"wrote {len(viewer.page.episodes)} episodes to {page}")
        return
    server = container.viewer_server(viewer, host=host, port=port, allow_remote=insecure)
    _serve(server, viewer, host, browser)


def _write_rrd(container: object, root: str, episode: int, out: str | None) -> None:
    from pathlib import Path

    from rlctl.entrypoints.parts import DisplaySettings

    path = Path(out) if out else Path(f"{Path(root).name}_episode_{episode}.rrd")
    display = container.rerun_display(  # type: ignore[attr-defined]
        settings=DisplaySettings(mode="file", rrd=str(path), image_max_side=0),
        announce=lambda _message: None,
    )
    shown = container.display_episode(display=display)(root, episode)  # type: ignore[attr-defined]
    cameras = ", ".join(shown.cameras) or "no cameras"
    click.echo(
        f"wrote episode {shown.episode} ({shown.frames} frames; {cameras}) to {path}; "
        f"view it with `rerun {path}`"
    )


def _serve(server: Any, viewer: DatasetViewer, host: str, browser: bool) -> None:
    import threading
    import webbrowser

    server = server.start()
    click.echo(f"serving {viewer.root} at {server.url}  (Ctrl-C to stop)")
    if server.reaches_network:
        click.secho(
            f"warning: --host {host} --insecure: any machine that can reach this one on port "
            f"{server.port} can read this dataset, without a password",
            fg="yellow",
            bold=True,
            err=True,
        )
    if browser:
        webbrowser.open(server.url)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        click.echo("stopped")
    finally:
        server.stop()
