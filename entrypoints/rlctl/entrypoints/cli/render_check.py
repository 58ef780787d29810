"""`rlctl dataset check`'s report for a terminal: one line per problem, its hint beneath."""

from __future__ import annotations

from rlctl.application.use_cases.check_dataset import CheckReport


def render_check(report: CheckReport) -> str:
    errors, warnings = len(report.errors), len(report.warnings)
    verdict = "ok" if report.ok else f"{errors} problem{'s' if errors != 1 else ''}"
    lines = [
        f"{report.location}: {verdict}, {warnings} warning{'s' if warnings != 1 else ''} "
        f"({report.files_checked} data and video files read)"
    ]
    for problem in report.problems:
        where = f"{problem.where}: " if problem.where else ""
        lines.append(f"{problem.severity:<8}{where}{problem.message}")
        if problem.hint:
            lines.append(f"{'':<8}hint: {problem.hint}")
    return "\n".join(lines)
