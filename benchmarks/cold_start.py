"""Cold start of the CLI: wall time and peak memory of `rlctl --help` and of the commands' own
`--help`, which lists every setting generated from the settings classes (goal < 0.5 s, < 100 MB).

Usage: uv run python benchmarks/cold_start.py [--repeat 5] [--lerobot /path/to/lerobot-train]
Prints one JSON line per command: median wall seconds and peak RSS in MB of the command's
process (each command measured from its own process tree). Measure with bytecode written
(PYTHONDONTWRITEBYTECODE unset), as on a user's machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

# Run in a child of its own: ru_maxrss of children is the largest child seen so far (KiB).
_PROBE = (
    "import json,resource,subprocess,sys,time;t=time.perf_counter();"
    "subprocess.run(sys.argv[1:],capture_output=True,check=True);"
    "print(json.dumps({'wall_s':time.perf_counter()-t,"
    "'peak_rss_mb':resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss/1024}))"
)


def measure(cmd: list[str], repeat: int) -> dict[str, float | str]:
    runs = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", _PROBE, *cmd], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(repeat)
    ]
    return {
        "command": " ".join(["rlctl", *cmd[1:]]),
        "wall_s": round(statistics.median(r["wall_s"] for r in runs), 3),
        "peak_rss_mb": round(max(r["peak_rss_mb"] for r in runs), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--lerobot", help="path of lerobot-train, to run its --help once")
    args = parser.parse_args()
    rlctl = shutil.which("rlctl") or str(Path(sys.executable).with_name("rlctl"))
    for sub in (
        ["--help"],
        ["dataset", "info", "--help"],
        ["record", "--help"],
        ["train", "--help"],
        ["train", "--policy.type=diffusion", "--help"],
        ["eval", "--env.type=aloha", "--help"],
    ):
        print(json.dumps(measure([rlctl, *sub], args.repeat)))
    if args.lerobot:
        # A separate process tree per measurement keeps LeRobot's peak apart from ours.
        code = (
            "import json,resource,subprocess,sys,time;t=time.perf_counter();"
            "subprocess.run([sys.argv[1],'--help'],capture_output=True);"
            "print(json.dumps({'command':sys.argv[1]+' --help',"
            "'wall_s':round(time.perf_counter()-t,3),"
            "'peak_rss_mb':round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss/1024,1)}))"
        )
        subprocess.run([sys.executable, "-c", code, args.lerobot], check=True)


if __name__ == "__main__":
    main()
