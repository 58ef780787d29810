"""`rlctl report RUN`: a training run's, an evaluation's or a rollout's report, as one HTML page
and a PNG of its curves.

    rlctl report outputs/train/2026-01-01/10-00-00_act        # while it trains, or after
    rlctl report outputs/eval/2026-01-01/11-00-00_pusht_act --embed-videos
    rlctl report outputs/train/... --watch 30                 # rewrite every 30 s until Ctrl-C
    rlctl report ~/rollouts/rollout_arm.rollout_info.json     # a rollout: timing, who drove

The page is self-contained (inline SVG and script); videos are referenced relative to it, or
embedded with --embed-videos. Heavy imports happen in the command body only.
"""

from __future__ import annotations

import click

from rlctl.entrypoints.cli.config_options import start_command


@click.command(name="report")
@click.argument("run_dir", metavar="RUN", type=click.Path(exists=False))
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Where to write the HTML page (default: RUN/report.html; for a rollout's report file, "
    "the same name ending in .html).",
)
@click.option(
    "--png",
    type=click.Path(dir_okay=False),
    default=None,
    help="Where to write the curves' PNG (default: report_curves.png beside the page).",
)
@click.option(
    "--embed-videos", is_flag=True, help="Put the videos inside the page (one file to share)."
)
@click.option(
    "--watch",
    type=click.IntRange(min=1),
    default=None,
    metavar="SECONDS",
    help="Rewrite the report every SECONDS until Ctrl-C; the page reloads itself as often.",
)
@click.pass_context
def report_command(
    ctx: click.Context,
    run_dir: str,
    out: str | None,
    png: str | None,
    embed_videos: bool,
    watch: int | None,
) -> None:
    """Write the report of a training run, an evaluation or a rollout (its rollout_info.json):
    an HTML page and a PNG of curves."""
    import time

    from rlctl.entrypoints.container import build_container

    start_command(ctx)
    use_case = build_container().report_run()

    def write() -> None:
        files = use_case(
            run_dir, html=out, png=png, embed_videos=embed_videos, refresh_s=watch or 0
        )
        written = files.html + (f" and {files.png}" if files.png else "")
        click.echo(f"wrote {written}")

    if watch is None:
        write()
        return
    # Ctrl-C is how watching ends, whether it comes during a rewrite or between two.
    try:
        while True:
            write()
            time.sleep(watch)
    except KeyboardInterrupt:
        click.echo("stopped")
