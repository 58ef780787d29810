// @ts-check
// rlctl dataset viewer: episode list, synchronised camera clips, one chart per plot group.
// Hand-written, no dependencies, so the page works offline and from files (`--out DIR`).
// Type-checked by tsc from its JSDoc (tools/js: `npm ci && npm run check`).
"use strict";

/**
 * The data the viewer's server sends (`rlctl.application.use_cases.view_dataset`, with each
 * episode's charts drawn by `rlctl.adapters.viewer.charts`).
 * @typedef {{ key: string, kind: string, names: string[] }} PlotGroup
 * @typedef {{ index: number, length: number, duration_s: number, tasks: string[],
 *   annotations: Record<string, string> }} EpisodeSummary
 * @typedef {{ title: string, fps: number, robot_type: string | null, total_frames: number,
 *   cameras: string[], groups: PlotGroup[], episodes: EpisodeSummary[],
 *   image_cameras?: string[] }} DatasetPage
 * @typedef {{ key: string, file: string, start_s: number, end_s: number }} VideoClip
 * @typedef {{ from: number, to: number, text: string }} LanguageRun
 * @typedef {{ svg: string, colours: string[] }} ChartData
 * @typedef {{ index: number, fps: number, length: number, tasks: string[], timestamps: number[],
 *   series: Record<string, (number | null)[][]>, videos: VideoClip[],
 *   language?: Record<string, LanguageRun[]>, charts: Record<string, ChartData> }} EpisodeData
 *
 * What the page shows.
 * @typedef {{ el: HTMLVideoElement, clip: VideoClip }} ShownVideo
 * @typedef {{ el: HTMLImageElement, key: string }} ShownPicture
 * @typedef {{ group: PlotGroup, values: (number | null)[][], section: HTMLElement,
 *   svg: SVGSVGElement, cursor: SVGLineElement, legend: HTMLElement, cells: HTMLElement[],
 *   width: number, left: number, plotWidth: number, x0: number, x1: number }} Plot
 */

(function () {
  /** @param {string} id @returns {HTMLElement} */
  function $(id) {
    const el = document.getElementById(id);
    if (!el) throw new Error("the page has no #" + id);
    return el;
  }

  /**
   * The first element under `root` matching `selector`, of the type asked for.
   * @template {Element} T
   * @param {ParentNode} root @param {string} selector @param {new () => T} type
   * @returns {T}
   */
  function find(root, selector, type) {
    const el = root.querySelector(selector);
    if (!(el instanceof type)) throw new Error("the page has no " + selector);
    return el;
  }

  const view = {
    /** @type {DatasetPage | null} */
    dataset: null,
    /** @type {EpisodeData | null} the loaded episode's data */
    episode: null,
    duration: 0,      // seconds: length / fps
    t: 0,             // episode time in seconds, from 0
    playing: false,
    /** @type {ShownVideo[]} */
    videos: [],
    /** @type {ShownPicture[]} cameras stored as images, one picture a frame */
    pictures: [],
    /** @type {Plot[]} */
    plots: [],
    clockStart: 0,    // for episodes without video: performance.now() when play started
    clockFrom: 0,
    lastFrame: -1,
    loadToken: 0,
  };

  /** @returns {DatasetPage} */
  function dataset() {
    if (!view.dataset) throw new Error("the dataset is not loaded yet");
    return view.dataset;
  }

  /** @returns {EpisodeData} */
  function episode() {
    if (!view.episode) throw new Error("no episode is loaded");
    return view.episode;
  }

  /**
   * Data: fetched as JSON when served, read from `data/*.js` twins when opened from disk.
   * @param {string} name @returns {Promise<any>}
   */
  function loadData(name) {
    if (location.protocol !== "file:") {
      return fetch("data/" + name + ".json").then((r) => {
        if (!r.ok) throw new Error(name + ": HTTP " + r.status);
        return r.json();
      });
    }
    return new Promise((resolve, reject) => {
      /** @type {Record<string, unknown>} */
      const store = (window.rlctlData = window.rlctlData || {});
      if (store[name]) return resolve(store[name]);
      const script = document.createElement("script");
      script.src = "data/" + name + ".js";
      script.onload = () => resolve(store[name]);
      script.onerror = () => reject(new Error("cannot load data/" + name + ".js"));
      document.head.appendChild(script);
    });
  }

  const fps = () => episode().fps;
  /** @param {number} t */
  const frameOf = (t) => Math.max(0, Math.min(episode().length - 1, Math.floor(t * fps() + 1e-6)));
  // The last frame's start: the episode's, and never past a clip's `to_timestamp`, so that
  // playback stops before the next episode of a shared file.
  function lastTime() {
    let last = (episode().length - 1) / fps();
    for (const { clip } of view.videos) last = Math.min(last, clip.end_s - clip.start_s - 1 / fps());
    return Math.max(0, last);
  }

  // ---- episode list -------------------------------------------------------------------------
  function renderList() {
    const list = $("episodes");
    list.textContent = "";
    for (const ep of dataset().episodes) {
      const li = document.createElement("li");
      li.dataset.episode = String(ep.index);
      const notes = Object.entries(ep.annotations).map(([k, v]) => k + ": " + v).join(" · ");
      li.dataset.text = [String(ep.index), ep.tasks.join(" "), notes].join(" ").toLowerCase();
      li.innerHTML = '<span class="ep-index"></span><span class="ep-length"></span>' +
        '<div class="ep-tasks"></div><div class="ep-notes"></div>';
      find(li, ".ep-index", HTMLElement).textContent = "Episode " + ep.index;
      find(li, ".ep-length", HTMLElement).textContent = ep.length + " frames · " + ep.duration_s.toFixed(1) + " s";
      find(li, ".ep-tasks", HTMLElement).textContent = ep.tasks.join(" · ");
      find(li, ".ep-notes", HTMLElement).textContent = notes;
      li.addEventListener("click", () => selectEpisode(ep.index).catch(showError));
      list.appendChild(li);
    }
    applyFilter();
  }

  function applyFilter() {
    const query = find(document, "#filter", HTMLInputElement).value.trim().toLowerCase();
    let shown = 0;
    for (const li of episodeItems()) {
      const match = !query || (li.dataset["text"] || "").includes(query);
      li.hidden = !match;
      if (match) shown++;
    }
    const total = dataset().episodes.length;
    $("count").textContent = query ? shown + " of " + total + " episodes" : total + " episodes";
  }

  /** @returns {HTMLElement[]} */
  function episodeItems() {
    return [...$("episodes").children].filter((li) => li instanceof HTMLElement);
  }

  // ---- choosing an episode ------------------------------------------------------------------
  /** @param {number} index @param {Promise<EpisodeData> | null} [preloaded] */
  async function selectEpisode(index, preloaded) {
    const token = ++view.loadToken;
    pause();
    document.body.dataset.ready = "";
    /** @type {EpisodeData} */
    const loaded = await (preloaded || loadData("episode-" + index));
    if (token !== view.loadToken) return;
    view.episode = loaded;
    view.duration = loaded.length / loaded.fps;
    view.t = 0;
    view.lastFrame = -1;
    for (const li of episodeItems()) {
      li.classList.toggle("selected", Number(li.dataset["episode"]) === index);
    }
    if (location.hash !== "#episode=" + index) history.replaceState(null, "", "#episode=" + index);
    $("episode-title").textContent = "Episode " + index + " · " + loaded.length + " frames · " +
      view.duration.toFixed(2) + " s";
    $("episode-tasks").textContent = loaded.tasks.length ? "Task: " + loaded.tasks.join(" · ") : "";
    buildVideos(loaded);
    buildPlots(loaded);
    await Promise.all([...view.videos.map(videoReady), ...view.pictures.map(pictureReady)]);
    if (token !== view.loadToken) return;
    prefetchPictures(loaded);
    seek(0);
    document.body.dataset.ready = String(index);
    document.dispatchEvent(new CustomEvent("rlctl:episode-ready", { detail: index }));
  }

  /** @param {ShownVideo} video @returns {Promise<void>} */
  function videoReady(video) {
    return new Promise((resolve) => {
      const el = video.el;
      const done = () => resolve();
      if (el.readyState >= 2) return done();
      el.addEventListener("loadeddata", done, { once: true });
      el.addEventListener("error", done, { once: true });
    });
  }

  /** @param {string} key @param {number} frame */
  function frameUrl(key, frame) {
    return "frames/" + episode().index + "/" + encodeURIComponent(key) + "/" + frame;
  }

  /** @param {ShownPicture} picture @returns {Promise<void>} */
  function pictureReady(picture) {
    return new Promise((resolve) => {
      picture.el.addEventListener("load", () => resolve(), { once: true });
      picture.el.addEventListener("error", () => resolve(), { once: true });
      picture.el.src = frameUrl(picture.key, 0);
    });
  }

  /**
   * The browser keeps the pictures it fetched: fetch the episode's ahead of playback.
   * @param {EpisodeData} shown
   */
  function prefetchPictures(shown) {
    let budget = 3000;
    for (const { key } of view.pictures) {
      for (let frame = 1; frame < shown.length && budget > 0; frame++, budget--) {
        new Image().src = frameUrl(key, frame);
      }
    }
  }

  /** @param {EpisodeData} shown */
  function buildVideos(shown) {
    const box = $("videos");
    for (const v of view.videos) { v.el.removeAttribute("src"); v.el.load(); }
    box.textContent = "";
    view.videos = shown.videos.map((clip) => {
      const figure = document.createElement("figure");
      figure.className = "camera";
      const el = document.createElement("video");
      el.muted = true;
      el.playsInline = true;
      el.preload = "auto";
      el.dataset.key = clip.key;
      // The media fragment makes the first frame shown the episode's, not the file's.
      el.src = "media/" + clip.file.split("/").map(encodeURIComponent).join("/") + "#t=" + clip.start_s;
      const caption = document.createElement("figcaption");
      caption.textContent = clip.key;
      figure.append(el, caption);
      box.appendChild(figure);
      return { el, clip };
    });
    view.pictures = (dataset().image_cameras || []).map((key) => {
      const figure = document.createElement("figure");
      figure.className = "camera";
      const el = document.createElement("img");
      el.dataset.key = key;
      el.alt = key;
      const caption = document.createElement("figcaption");
      caption.textContent = key;
      figure.append(el, caption);
      box.appendChild(figure);
      return { el, key };
    });
    if (!view.videos.length && !view.pictures.length) {
      box.innerHTML = '<div class="empty">This dataset has no cameras.</div>';
    }
  }

  // ---- plots: drawn by the server (the reports' charts); the page moves their cursor ------
  /** @param {EpisodeData} shown */
  function buildPlots(shown) {
    const box = $("plots");
    box.textContent = "";
    view.plots = [];
    for (const group of dataset().groups) {
      const values = shown.series[group.key];
      const chart = shown.charts[group.key];
      if (!values || !chart) continue;
      const section = document.createElement("div");
      section.className = "plot";
      section.dataset.key = group.key;
      section.innerHTML = '<h3></h3><div class="chart"></div><div class="legend"></div>';
      find(section, "h3", HTMLElement).textContent = group.key + " (" + group.kind + ")";
      // The server's own SVG, its text escaped there.
      find(section, ".chart", HTMLElement).innerHTML = chart.svg;
      box.appendChild(section);
      const svg = find(section, "svg", SVGSVGElement);
      /** @type {Plot} */
      const plot = {
        group, values, section, svg,
        cursor: find(svg, "line.cursor", SVGLineElement),
        legend: find(section, ".legend", HTMLElement),
        width: svg.viewBox.baseVal.width,
        left: Number(svg.dataset["left"]),
        plotWidth: Number(svg.dataset["plotWidth"]),
        x0: Number(svg.dataset["x0"]),
        x1: Number(svg.dataset["x1"]),
        cells: [],
      };
      group.names.forEach((name, i) => {
        const item = document.createElement("span");
        item.innerHTML = '<span class="swatch"></span><span class="name"></span> <b></b>';
        find(item, ".swatch", HTMLElement).style.background = chart.colours[i] || "";
        find(item, ".name", HTMLElement).textContent = name;
        plot.legend.appendChild(item);
        plot.cells.push(find(item, "b", HTMLElement));
      });
      attachSeeking(plot);
      view.plots.push(plot);
    }
    if (!view.plots.length) box.innerHTML = '<div class="empty">No state or action features to plot.</div>';
  }

  /** @param {number} v */
  function formatNumber(v) {
    const a = Math.abs(v);
    if (a !== 0 && (a < 1e-2 || a >= 1e4)) return v.toExponential(1);
    return v.toFixed(a < 1 ? 3 : a < 100 ? 2 : 0);
  }

  // Chart units (the SVG's viewBox) to episode time and back.
  /** @param {Plot} plot @param {number} t */
  function xOf(plot, t) {
    return plot.left + (t - plot.x0) / Math.max(plot.x1 - plot.x0, 1e-9) * plot.plotWidth;
  }
  /** @param {Plot} plot @param {number} x */
  function tOf(plot, x) {
    return plot.x0 + (x - plot.left) / plot.plotWidth * (plot.x1 - plot.x0);
  }

  /** @param {Plot} plot */
  function drawCursor(plot) {
    const frame = frameOf(view.t);
    const x = xOf(plot, episode().timestamps[frame] ?? view.t);
    plot.cursor.setAttribute("x1", String(x));
    plot.cursor.setAttribute("x2", String(x));
    plot.cursor.setAttribute("visibility", "visible");
    plot.section.dataset.cursorFrame = String(frame);
    plot.section.dataset.cursorX = x.toFixed(1);
  }

  /** @param {Plot} plot */
  function attachSeeking(plot) {
    let dragging = false;
    /** @param {MouseEvent} event */
    const seekAt = (event) => {
      const rect = plot.svg.getBoundingClientRect();
      pause();
      seek(tOf(plot, (event.clientX - rect.left) * plot.width / rect.width));
    };
    plot.svg.addEventListener("mousedown", (e) => { dragging = true; seekAt(e); });
    window.addEventListener("mousemove", (e) => { if (dragging) seekAt(e); });
    window.addEventListener("mouseup", () => { dragging = false; });
  }

  // ---- time: the first video is the clock; without video, performance.now() ---------------
  function currentTime() {
    const clock = view.videos[0];
    if (clock) return clock.el.currentTime - clock.clip.start_s;
    if (!view.playing) return view.t;
    return view.clockFrom + (performance.now() - view.clockStart) / 1000;
  }

  /** @param {number} t */
  function seek(t) {
    if (!view.episode) return;
    view.t = Math.max(0, Math.min(lastTime(), t));
    // The middle of the cursor's frame: rounding can show neither its neighbour before nor
    // the one after, whatever time inside the frame was asked for.
    const middle = (frameOf(view.t) + 0.5) / fps();
    for (const { el, clip } of view.videos) el.currentTime = clip.start_s + middle;
    view.clockFrom = view.t;
    view.clockStart = performance.now();
    render();
  }

  /** @param {number} n */
  function stepFrames(n) {
    pause();
    seek((frameOf(view.t) + n) / fps());
  }

  function play() {
    if (!view.episode || view.playing) return;
    if (view.t >= lastTime() - 1e-6) seek(0);
    view.playing = true;
    view.clockFrom = view.t;
    view.clockStart = performance.now();
    for (const { el } of view.videos) el.play().catch(() => {});
    $("play").textContent = "Pause";
    requestAnimationFrame(tick);
  }

  function pause() {
    if (!view.playing) return;
    view.playing = false;
    for (const { el } of view.videos) el.pause();
    $("play").textContent = "Play";
    if (view.episode) seek(currentTime());
  }

  function tick() {
    if (!view.playing) return;
    const t = currentTime();
    // A file that ends early (a truncated recording) ends playback too.
    if (t >= lastTime() || view.videos[0]?.el.ended) {
      view.playing = false;
      for (const { el } of view.videos) el.pause();
      $("play").textContent = "Play";
      seek(lastTime());
      return;
    }
    view.t = Math.max(0, t);
    // Keep the other cameras within a frame of the first one.
    for (const { el, clip } of view.videos.slice(1)) {
      if (Math.abs(el.currentTime - clip.start_s - view.t) > 1 / fps()) el.currentTime = clip.start_s + view.t;
      if (el.paused) el.play().catch(() => {});
    }
    render();
    requestAnimationFrame(tick);
  }

  function render() {
    const frame = frameOf(view.t);
    $("clock").textContent = view.t.toFixed(3) + " s · frame " + frame + " / " + (episode().length - 1);
    for (const plot of view.plots) drawCursor(plot);
    if (frame !== view.lastFrame) {
      view.lastFrame = frame;
      for (const plot of view.plots) {
        plot.values.forEach((column, i) => {
          const v = column[frame];
          const cell = plot.cells[i];
          if (cell) cell.textContent = v === null || v === undefined ? "–" : formatNumber(v);
        });
      }
      renderLanguage(frame);
      for (const picture of view.pictures) {
        const url = frameUrl(picture.key, frame);
        if (!picture.el.src.endsWith(url)) picture.el.src = url;
      }
    }
  }

  /** @param {number} frame */
  function renderLanguage(frame) {
    const box = $("language");
    box.textContent = "";
    for (const [key, runs] of Object.entries(episode().language || {})) {
      const run = runs.find((r) => frame >= r.from && frame < r.to);
      const line = document.createElement("div");
      line.innerHTML = '<span class="key"></span>: <span class="current"></span>';
      find(line, ".key", HTMLElement).textContent = key;
      find(line, ".current", HTMLElement).textContent = run ? run.text : "–";
      box.appendChild(line);
    }
  }

  // Seek and resolve once every camera shows the new frame: the figure the benchmark reads.
  // The frame callback is asked for before seeking: a paused video presents exactly one new
  // frame, the one sought.
  /** @param {number} t @returns {Promise<number>} milliseconds until every camera shows it */
  function seekAndWait(t) {
    pause();
    const started = performance.now();
    const shown = view.videos.map(({ el }) => /** @type {Promise<void>} */ (new Promise((resolve) => {
      // Older browsers have no frame callback: the end of the seek is the next best sign.
      if (typeof el.requestVideoFrameCallback === "function") el.requestVideoFrameCallback(() => resolve());
      else el.addEventListener("seeked", () => resolve(), { once: true });
    })));
    seek(t);
    return Promise.all(shown).then(() => performance.now() - started);
  }

  // ---- start --------------------------------------------------------------------------------
  /** @param {KeyboardEvent} event */
  function onKey(event) {
    if (event.target instanceof HTMLInputElement) return;
    if (event.key === "ArrowRight") { event.preventDefault(); stepFrames(1); }
    else if (event.key === "ArrowLeft") { event.preventDefault(); stepFrames(-1); }
    else if (event.key === " " || event.code === "Space") {
      event.preventDefault();
      if (view.playing) pause(); else play();
    }
  }

  /** @param {DatasetPage} page */
  function cameraCount(page) {
    const n = page.cameras.length + (page.image_cameras || []).length;
    return n + " camera" + (n === 1 ? "" : "s");
  }

  async function start() {
    // The episode in the address (or the first) is fetched beside the list, not after it.
    const wanted = Number((location.hash.match(/episode=(\d+)/) || [])[1] || 0);
    /** @type {Promise<EpisodeData>} */
    const early = loadData("episode-" + wanted);
    early.catch(() => {});
    /** @type {DatasetPage} */
    const page = await loadData("dataset");
    view.dataset = page;
    document.title = page.title + " · rlctl viewer";
    $("title").textContent = page.title;
    $("facts").textContent = [
      page.episodes.length + " episodes", page.total_frames + " frames", page.fps + " fps",
      page.robot_type || "", cameraCount(page),
    ].filter(Boolean).join(" · ");
    renderList();
    $("filter").addEventListener("input", applyFilter);
    $("play").addEventListener("click", () => (view.playing ? pause() : play()));
    $("prev").addEventListener("click", () => stepFrames(-1));
    $("next").addEventListener("click", () => stepFrames(1));
    document.addEventListener("keydown", onKey);
    const first = page.episodes.find((e) => e.index === wanted) || page.episodes[0];
    if (first) await selectEpisode(first.index, first.index === wanted ? early : null);
    else $("episode-title").textContent = "This dataset has no episodes.";
  }

  window.rlctlViewer = {
    seek, play, pause, seekAndWait, selectEpisode,
    time: () => view.t,
    frame: () => (view.episode ? frameOf(view.t) : -1),
    playing: () => view.playing,
  };
  /** @param {unknown} error */
  function showError(error) {
    const message = error instanceof Error ? error.message : String(error);
    $("episode-title").textContent = "Cannot load: " + message;
    document.body.dataset["error"] = message;
  }

  start().catch(showError);
})();
