// @ts-check
// rlctl run report: the values of every line at the step under the pointer. Inlined into the
// page (which must work as one file); each chart is `reports.chart`'s SVG, which says where its
// plot is, followed by its series as JSON.
"use strict";

/** @typedef {{ name: string, x: (number | null)[], y: (number | null)[] }} ReportSeries */

/** @param {Element} figure */
function attachReadout(figure) {
  const svg = figure.querySelector("svg");
  const readout = figure.querySelector(".readout");
  const cursor = svg && svg.querySelector("line.cursor");
  const payload = figure.querySelector('script[type="application/json"]');
  if (!svg || !readout || !cursor || !payload) return;
  /** @type {ReportSeries[]} */
  const series = JSON.parse(payload.textContent || "[]");
  const width = svg.viewBox.baseVal.width;
  const left = Number(svg.dataset.left);
  const plotWidth = Number(svg.dataset.plotWidth);
  const x0 = Number(svg.dataset.x0);
  const x1 = Number(svg.dataset.x1);
  svg.addEventListener("mousemove", (event) => {
    const box = svg.getBoundingClientRect();
    const px = ((event.clientX - box.left) * width) / box.width;
    const x = x0 + ((px - left) / plotWidth) * (x1 - x0);
    /** @type {string[]} */
    const parts = [];
    for (const s of series) {
      let best = -1;
      let gap = Infinity;
      s.x.forEach((value, i) => {
        if (value === null || s.y[i] === null) return;
        const d = Math.abs(value - x);
        if (d < gap) { gap = d; best = i; }
      });
      const y = s.y[best];
      if (best >= 0 && y !== null && y !== undefined) {
        parts.push(s.name + " " + y.toPrecision(4) + " @ " + s.x[best]);
      }
    }
    readout.textContent = parts.join(" \u00b7 ");
    cursor.setAttribute("x1", String(px));
    cursor.setAttribute("x2", String(px));
    cursor.setAttribute("visibility", "visible");
  });
  svg.addEventListener("mouseleave", () => {
    cursor.setAttribute("visibility", "hidden");
    readout.textContent = "";
  });
}

document.querySelectorAll("figure.chart").forEach(attachReadout);
