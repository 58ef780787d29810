"""The report page in a real browser (Debian's chromium, headless, as the viewer's tests drive
it): its inlined script runs without an error and reads the values under the pointer."""

from __future__ import annotations

import pytest

from tests.adapters.reports.test_reports import report, write_train_run
from tests.adapters.viewer.test_viewer_browser import browser, new_tab  # noqa: F401 (fixture)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def test_the_pointer_over_a_chart_reads_its_values_and_moves_its_cursor(browser, tmp_path):  # noqa: F811
    files = report(write_train_run(tmp_path / "run"))
    errors: list[str] = []
    with new_tab(browser, f"file://{files.html}", errors) as tab:
        chart = tab.locator("#chart-0 svg")
        box = chart.bounding_box()
        # The middle of the plot: step 15 or so of 30.
        tab.mouse.move(box["x"] + box["width"] * 0.55, box["y"] + box["height"] / 2)
        readout = tab.inner_text("#chart-0 .readout")
        assert readout.startswith("loss ") and "kld_loss " in readout and " @ 1" in readout
        assert chart.locator("line.cursor").get_attribute("visibility") == "visible"
        tab.mouse.move(1, 1)
        assert tab.inner_text("#chart-0 .readout") == ""
    assert not errors, errors
