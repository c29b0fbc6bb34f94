// Eddy's admin page: polls the JSON API every second and draws the job
// graph, the watermarks, the restore progress and the checkpoint history.
// Plain JS and SVG, no dependencies: the page is embedded in the binary.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const POLL_MS = 1000;

function el(name, attrs, parent) {
  const e = document.createElementNS(SVG, name);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}

function text(parent, x, y, s, cls) {
  const t = el("text", { x, y }, parent);
  if (cls) t.setAttribute("class", cls);
  t.textContent = s;
  return t;
}

function rate(n) {
  if (n >= 1e6) return (n / 1e6).toFixed(1) + "M/s";
  if (n >= 1e3) return (n / 1e3).toFixed(1) + "k/s";
  return n.toFixed(0) + "/s";
}

function bytes(n) {
  if (n >= 1 << 30) return (n / (1 << 30)).toFixed(1) + " GiB";
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + " MiB";
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + " KiB";
  return n + " B";
}

function millis(ms) {
  if (ms == null) return "";
  if (Math.abs(ms) >= 86400000) return (ms / 86400000).toFixed(1) + " d";
  if (Math.abs(ms) >= 3600000) return (ms / 3600000).toFixed(1) + " h";
  if (Math.abs(ms) >= 60000) return (ms / 60000).toFixed(1) + " min";
  if (Math.abs(ms) >= 1000) return (ms / 1000).toFixed(2) + " s";
  return ms.toFixed(ms < 10 ? 2 : 0) + " ms";
}

function pct(f) { return Math.round(f * 100) + "%"; }

function clip(s, n) { return s.length > n ? s.slice(0, n - 1) + "…" : s; }

// layout places each stage in a column by its distance from a source.
function layout(stages) {
  const depth = {};
  const byID = {};
  stages.forEach(s => { byID[s.id] = s; });
  const d = s => {
    if (depth[s.id] != null) return depth[s.id];
    depth[s.id] = 0;
    const ins = (s.inputs || []).map(i => byID[i]).filter(Boolean);
    depth[s.id] = ins.length ? 1 + Math.max(...ins.map(d)) : 0;
    return depth[s.id];
  };
  stages.forEach(d);
  const rows = {};
  const pos = {};
  stages.forEach(s => {
    const c = depth[s.id];
    rows[c] = (rows[c] || 0) + 1;
    pos[s.id] = { col: c, row: rows[c] - 1 };
  });
  return pos;
}

function drawGraph(job) {
  const svg = document.getElementById("graph");
  svg.replaceChildren();
  const defs = el("defs", {}, svg);
  const m = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" }, defs);
  el("path", { d: "M0,0 L10,5 L0,10 z", fill: "#4a5568" }, m);
  const W = 300, H = 168, GX = 90, GY = 20, X0 = 10, Y0 = 10;
  const pos = layout(job.stages);
  let maxRow = 0, maxCol = 0;
  const box = {};
  job.stages.forEach(s => {
    const p = pos[s.id];
    maxRow = Math.max(maxRow, p.row);
    maxCol = Math.max(maxCol, p.col);
    box[s.id] = { x: X0 + p.col * (W + GX), y: Y0 + p.row * (H + GY) };
  });
  svg.setAttribute("viewBox", `0 0 ${X0 * 2 + (maxCol + 1) * W + maxCol * GX} ${Y0 * 2 + (maxRow + 1) * H + maxRow * GY}`);
  svg.style.height = (Y0 * 2 + (maxRow + 1) * H + maxRow * GY) + "px";
  job.edges.forEach(e => {
    const a = box[e.from], b = box[e.to];
    if (!a || !b) return;
    el("path", { class: "edge", "data-from": e.from, "data-to": e.to,
      d: `M${a.x + W},${a.y + H / 2} C${a.x + W + GX / 2},${a.y + H / 2} ${b.x - GX / 2},${b.y + H / 2} ${b.x},${b.y + H / 2}` }, svg);
  });
  job.stages.forEach(s => {
    const { x, y } = box[s.id];
    const g = el("g", { class: "stage", "data-name": s.name, "data-in-per-sec": s.inPerSec.toFixed(1), transform: `translate(${x},${y})` }, svg);
    el("rect", { class: "box", width: W, height: H, rx: 6 }, g);
    text(g, 10, 20, s.name, "title");
    text(g, W - 10, 20, "×" + s.parallelism, "small").setAttribute("text-anchor", "end");
    text(g, 10, 38, clip(s.operators.join(" → "), 52), "small").appendChild(el("title", {})).textContent = s.operators.join(" → ");
    text(g, 10, 60, `in ${rate(s.inPerSec)}   out ${rate(s.outPerSec)}`, "rate");
    text(g, 10, 78, `records ${s.recordsIn.toLocaleString()} in, ${s.recordsOut.toLocaleString()} out`, "small");
    // One bar per subtask: busy, back-pressured, idle.
    const bw = W - 20, bh = Math.max(4, Math.min(10, 40 / s.subtasks.length - 2));
    s.subtasks.forEach((t, i) => {
      const by = 88 + i * (bh + 2);
      if (by + bh > H - 40) return;
      let bx = 10;
      [["busy", t.busy], ["pressed", t.backPressured], ["idle", t.idle]].forEach(([cls, f]) => {
        const w = Math.max(0, f) * bw;
        if (w > 0) el("rect", { class: cls, x: bx, y: by, width: w, height: bh }, g);
        bx += w;
      });
    });
    text(g, 10, H - 26, `busy ${pct(s.busy)}  back-pressured ${pct(s.backPressured)}  idle ${pct(s.idle)}`, "small");
    text(g, 10, H - 9, s.watermarkMs != null ? `watermark lag ${millis(s.watermarkLagMs)}` +
      (s.lateRecords ? `  late ${s.lateRecords.toLocaleString()}` : "") : "no watermark yet", "small");
  });
}

function drawWatermarks(job) {
  const tb = document.querySelector("#watermarks tbody");
  tb.replaceChildren();
  job.stages.forEach(s => s.subtasks.forEach(t => {
    const tr = document.createElement("tr");
    const wm = t.watermarkMs != null ? new Date(t.watermarkMs).toISOString().replace("T", " ").replace("Z", "") : "—";
    [s.name, t.subtask, wm, millis(t.watermarkLagMs)].forEach(v => {
      const td = document.createElement("td");
      td.textContent = v;
      tr.appendChild(td);
    });
    tb.appendChild(tr);
  }));
}

function drawRestore(job) {
  const r = job.restore;
  const status = document.getElementById("status");
  document.getElementById("job-name").textContent = job.job;
  if (job.ready) {
    status.textContent = "running";
    status.className = "badge ready";
  } else if (r.running) {
    status.textContent = "restoring";
    status.className = "badge restoring";
  } else {
    status.textContent = "not running";
    status.className = "badge down";
  }
  const from = r.fromCheckpoint ? `restored from checkpoint ${r.fromCheckpoint} in ${millis(r.durationMs)}` : "started without a checkpoint";
  document.getElementById("restore-text").textContent =
    `attempt ${r.attempt}: ${from}; ${r.subtasksRunning} of ${r.subtasks} subtasks restored and running; restarts ${job.stats.Restarts}`;
  document.getElementById("restore-bar").style.width = (r.subtasks ? 100 * r.subtasksRunning / r.subtasks : 0) + "%";
  document.getElementById("ckpt-counts").textContent = `${job.checkpointsCompleted} completed, ${job.checkpointsFailed} failed`;
}

// plot draws series (each {cls, values}) over xs into svg, with a y axis
// labelled by fmt.
function plot(svg, xs, series, fmt) {
  svg.replaceChildren();
  const W = 600, H = 180, L = 58, R = 8, T = 8, B = 18;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("data-points", xs.length);
  el("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }, svg);
  el("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }, svg);
  if (xs.length === 0) return;
  const x0 = xs[0], x1 = Math.max(xs[xs.length - 1], x0 + 1);
  let ymax = 0;
  series.forEach(s => s.values.forEach(v => { ymax = Math.max(ymax, v); }));
  ymax = ymax > 0 ? ymax * 1.1 : 1;
  const X = x => L + (x - x0) / (x1 - x0) * (W - L - R);
  const Y = y => H - B - y / ymax * (H - B - T);
  text(svg, L - 4, T + 8, fmt(ymax), "").setAttribute("text-anchor", "end");
  text(svg, L - 4, H - B, fmt(0), "").setAttribute("text-anchor", "end");
  text(svg, L, H - 4, new Date(x0).toLocaleTimeString(), "");
  text(svg, W - R, H - 4, new Date(x1).toLocaleTimeString(), "").setAttribute("text-anchor", "end");
  series.forEach(s => {
    const d = s.values.map((v, i) => (i ? "L" : "M") + X(xs[i]).toFixed(1) + "," + Y(v).toFixed(1)).join(" ");
    el("path", { class: s.cls, d }, svg);
  });
}

function drawCheckpoints(cp) {
  const h = cp.history;
  const xs = h.map(c => c.completedMs);
  plot(document.getElementById("ckpt-duration"), xs, [
    { cls: "duration", values: h.map(c => c.durationMs) },
    { cls: "sync", values: h.map(c => c.syncMs) },
    { cls: "async", values: h.map(c => c.asyncMs) },
  ], millis);
  plot(document.getElementById("ckpt-size"), xs, [
    { cls: "full", values: h.map(c => c.fullSize) },
    { cls: "incremental", values: h.map(c => c.bytes) },
  ], bytes);
  const tb = document.querySelector("#ckpt-table tbody");
  tb.replaceChildren();
  h.slice(-10).reverse().forEach(c => {
    const tr = document.createElement("tr");
    [c.id, new Date(c.completedMs).toLocaleTimeString(), millis(c.durationMs), millis(c.barrierMs), millis(c.syncMs),
      millis(c.asyncMs), millis(c.manifestMs), bytes(c.bytes), bytes(c.fullSize), c.stateEntries.toLocaleString()].forEach(v => {
      const td = document.createElement("td");
      td.textContent = v;
      tr.appendChild(td);
    });
    tb.appendChild(tr);
  });
}

async function poll() {
  try {
    const [job, cp] = await Promise.all([
      fetch("api/job", { cache: "no-store" }).then(r => r.json()),
      fetch("api/checkpoints", { cache: "no-store" }).then(r => r.json()),
    ]);
    drawRestore(job);
    drawGraph(job);
    drawWatermarks(job);
    drawCheckpoints(cp);
    document.body.dataset.updates = (+(document.body.dataset.updates || 0) + 1).toString();
  } catch (e) {
    const status = document.getElementById("status");
    status.textContent = "job gone";
    status.className = "badge down";
  }
  setTimeout(poll, POLL_MS);
}

// takeSavepoint asks for a savepoint and says which checkpoint it is.
async function takeSavepoint() {
  const button = document.getElementById("savepoint");
  const out = document.getElementById("savepoint-result");
  button.disabled = true;
  out.textContent = "taking a savepoint…";
  try {
    const r = await fetch("api/savepoint", { method: "POST" });
    const body = await r.json();
    out.textContent = r.ok ? `savepoint: checkpoint ${body.id} (kept until savepoints/${String(body.id).padStart(20, "0")} is deleted)`
      : `savepoint failed: ${body.error}`;
  } catch (e) {
    out.textContent = `savepoint failed: ${e}`;
  }
  button.disabled = false;
}

document.getElementById("savepoint").addEventListener("click", takeSavepoint);
poll();
