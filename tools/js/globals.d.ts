// What the viewer's page keeps on `window`: the data twins loaded from disk (`data/*.js`), and
// the handle the browser tests and the benchmark drive the page by.
interface Window {
  rlctlData?: Record<string, unknown>;
  rlctlViewer?: Record<string, unknown>;
}
