"""`rlctl dataset view ROOT|REPO_ID`: a local web page to look at a dataset's episodes.

    rlctl dataset view data/pusht                 # serves on 127.0.0.1, opens a browser
    rlctl dataset view lerobot/pusht --port 8000 --no-browser
    rlctl dataset view data/pusht --out site/     # the same page as static files

The page lists the episodes (filterable), plays the chosen episode's cameras in sync and plots
each state/action group with a cursor that follows the video; clicking a plot seeks. Videos are
the dataset's own files, served with range requests. Heavy imports happen in the body only.
"""

from __future__ import annotations

import click

from rlctl.entrypoints.cli.config_options import config_options, settings_command
from rlctl.entrypoints.settings import AppSettings


@settings_command()
@click.argument("location", metavar="ROOT|REPO_ID")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
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
    type=click.Path(file_okay=False),
    default=None,
    help="Write the page as static files to this folder (videos linked or copied) and exit.",
)
@click.option("--revision", default=None, help="Hub revision of a REPO_ID (branch, tag, commit).")
@config_options(AppSettings)
def view(
    location: str,
    host: str,
    port: int,
    browser: bool,
    out: str | None,
    revision: str | None,
    config: AppSettings,
) -> None:
    """Look at the dataset at ROOT (or a Hub REPO_ID) in a local web page: episodes, synced
    camera videos, state/action plots; --out DIR writes it as static files."""
    from rlctl.entrypoints.container import build_container

    container = build_container(config)
    root = container.resolve_dataset()(location, revision=revision)
    viewer = container.view_dataset()(str(root))
    if out is not None:
        from rlctl.adapters.viewer.site import write_site

        page = write_site(viewer, out)
        click.echo(f"wrote {len(viewer.page.episodes)} episodes to {page}")
        return
    _serve(viewer, host, port, browser)


def _serve(viewer: object, host: str, port: int, browser: bool) -> None:
    import threading
    import webbrowser

    from rlctl.adapters.viewer.server import ViewerServer

    server = ViewerServer(viewer, host=host, port=port).start()  # type: ignore[arg-type]
    click.echo(f"serving {viewer.root} at {server.url}  (Ctrl-C to stop)")  # type: ignore[attr-defined]
    if browser:
        webbrowser.open(server.url)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        click.echo("stopped")
    finally:
        server.stop()
