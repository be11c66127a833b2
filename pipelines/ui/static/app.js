// The operator's page: polls /api/summary once a second and draws it. Everything from the
// crawl is put into the page as text (textContent, SVG attributes), never parsed as HTML.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const POLL_MS = 1000;
const MAX_BACKOFF_MS = 5000;
const NUMBER = new Intl.NumberFormat("en-US");

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function svgEl(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function fmt(v, digits) {
  if (v === null || v === undefined) return "–";
  if (digits !== undefined) return Number(v).toFixed(digits);
  return Number.isInteger(v) ? NUMBER.format(v) : NUMBER.format(Math.round(v * 100) / 100);
}

function setNumber(id, value) {
  const node = document.getElementById(id);
  node.textContent = fmt(value);
  node.dataset.value = value === null || value === undefined ? "" : String(value);
}

function replace(container, child) {
  container.replaceChildren(child);
  container.dataset.drawn = String(Date.now());
}

// A line chart of equally spaced values (null: no value). `series`: [{name, values}]. It is
// drawn at the width it gets (`width`), so text is never stretched.
function lineChart(series, opts) {
  const W = Math.max(240, Math.round(opts.width || 600)), H = opts.height || 160;
  const L = 46, R = 8, T = 8, B = 18;
  const svg = svgEl("svg", { class: "chart", width: W, height: H, viewBox: `0 0 ${W} ${H}` });
  const n = Math.max(...series.map((s) => s.values.length), 2);
  let top = opts.max !== undefined ? opts.max : 0;
  for (const s of series) for (const v of s.values) if (v !== null && v > top) top = v;
  if (top <= 0) top = 1;
  const x = (i) => L + (i * (W - L - R)) / (n - 1);
  const y = (v) => T + (H - T - B) * (1 - v / top);
  svg.append(svgEl("line", { class: "axis", x1: L, y1: y(0), x2: W - R, y2: y(0) }));
  svg.append(svgEl("line", { class: "axis", x1: L, y1: y(top), x2: W - R, y2: y(top) }));
  svg.append(svgEl("text", { x: L - 4, y: y(top) + 4, "text-anchor": "end" }, opts.yFormat(top)));
  svg.append(svgEl("text", { x: L - 4, y: y(0), "text-anchor": "end" }, opts.yFormat(0)));
  svg.append(svgEl("text", { x: L, y: H - 4 }, opts.from));
  svg.append(svgEl("text", { x: W - R, y: H - 4, "text-anchor": "end" }, "now"));
  series.forEach((s, k) => {
    let points = [];
    const flush = () => {
      if (points.length === 1) points.push(points[0]); // one value: a dot, not nothing
      if (points.length) svg.append(svgEl("polyline", { class: `s${k}`, points: points.join(" ") }));
      points = [];
    };
    s.values.forEach((v, i) => {
      if (v === null) flush();
      else points.push(`${x(i).toFixed(1)},${y(v).toFixed(1)}`);
    });
    flush();
  });
  const box = el("div");
  if (series.length > 1 || opts.legend) {
    const legend = el("div", { class: "legend" });
    series.forEach((s, k) => legend.append(el("span", { class: `k${k}` }, s.name)));
    box.append(legend);
  }
  box.append(svg);
  return box;
}

// The last seconds of a per-second series worth showing: the whole window once the job
// has run that long, else since it started (at least a minute).
function recent(values, data) {
  const uptime = Math.ceil(data.job.now - data.job.started_at);
  const keep = Math.min(values.length, Math.max(60, uptime + 1));
  return values.slice(values.length - keep);
}

function widthOf(container) {
  return container.clientWidth || 600;
}

// Horizontal bars: [{label, value}].
function barChart(items) {
  const W = 600, row = 18, L = 210, H = Math.max(row * items.length + 4, 40);
  const svg = svgEl("svg", { class: "chart", width: W, height: H, viewBox: `0 0 ${W} ${H}` });
  const top = Math.max(1, ...items.map((i) => i.value));
  items.forEach((item, i) => {
    const y = 2 + i * row;
    const label = item.label.length > 34 ? item.label.slice(0, 33) + "…" : item.label;
    svg.append(svgEl("text", { x: L - 6, y: y + 12, "text-anchor": "end" }, label));
    const w = Math.max(1, ((W - L - 60) * item.value) / top);
    svg.append(svgEl("rect", { class: "f0", x: L, y: y + 2, width: w, height: row - 5 }));
    svg.append(svgEl("text", { x: L + w + 4, y: y + 12 }, fmt(item.value)));
  });
  return svg;
}

function ago(seconds) {
  return seconds >= 120 ? `−${Math.round(seconds / 60)} min` : `−${seconds} s`;
}

function renderTotals(data) {
  const t = data.totals || {};
  setNumber("total-events", t.events);
  setNumber("total-duplicates", t.duplicates);
  setNumber("total-entries", t.entries);
  setNumber("total-removals", t.removals);
  setNumber("total-dead-letters", t.dead_letters);
  setNumber("total-decisions", t.decisions);
  setNumber("frontier-size", data.frontier.queued);
  setNumber("input-lag", data.lag.last);
  document.getElementById("job").textContent = `${data.job.command} · ${data.job.strategy}`;
}

function renderRates(data) {
  const r = data.rates;
  const box = document.getElementById("chart-rates");
  const events = recent(r.events, data);
  replace(box, lineChart(
    [{ name: "pages fetched / s", values: events }, { name: "frontier entries / s", values: recent(r.entries, data) },
     { name: "dead letters / s", values: recent(r.dead_letters, data) }],
    { from: ago(events.length), yFormat: (v) => fmt(v, 0), width: widthOf(box), height: 180 }));
}

function renderHosts(data) {
  const f = data.frontier;
  document.getElementById("hosts-note").textContent = f.full
    ? `Counting the first ${fmt(f.tracked_cap)} queued URLs; later ones are not counted.` : "";
  const box = document.getElementById("chart-hosts");
  if (!f.top_hosts.length) { replace(box, el("p", { class: "note" }, "No URL waiting.")); return; }
  replace(box, barChart(f.top_hosts.map((h) => ({ label: h.host, value: h.queued }))));
}

function renderTop(data) {
  const body = document.querySelector("#top-entries tbody");
  const rows = data.frontier.top_entries.map((e) => {
    const tr = el("tr");
    tr.append(el("td", {}, fmt(e.priority, 4)));
    const url = el("td", { class: "url", title: e.url }, e.url);
    tr.append(url, el("td", {}, e.host), el("td", {}, e.cycle));
    const values = Object.entries(e.echo).map(([k, v]) => `${k} = ${v}`).join(" · ");
    tr.append(el("td", { title: values }, values || "–"));
    return tr;
  });
  body.replaceChildren(...rows);
}

function renderHarvest(data) {
  const h = data.harvest;
  const box = document.getElementById("chart-harvest");
  const note = document.getElementById("harvest-note");
  if (!h) {
    note.textContent = `The ${data.job.strategy} strategy does not judge pages for a topic.`;
    box.replaceChildren();
    return;
  }
  const share = h.judged ? (100 * h.relevant) / h.judged : null;
  note.textContent = `${fmt(h.relevant)} of ${fmt(h.judged)} pages relevant` +
    (share === null ? "" : ` (${share.toFixed(1)} %)`) + `; judge: similarity ≥ ${h.threshold}.`;
  replace(box, lineChart([{ name: `relevant share per ${h.bucket_s} s`, values: h.share }],
    { from: ago(data.rates.window_s), max: 1, legend: true, width: widthOf(box),
      yFormat: (v) => `${Math.round(v * 100)} %` }));
}

function sign(s) { return s > 0 ? "+" : s < 0 ? "−" : "0"; }

function renderFetchers(data) {
  const box = document.getElementById("fetchers");
  if (!data.fetchers.length) {
    box.replaceChildren(el("p", { class: "note" }, "No scaling decision yet (one per fetcher and speed window)."));
    return;
  }
  box.replaceChildren(...data.fetchers.map((f) => {
    const d = f.decisions;
    const part = el("div", { class: "fetcher" });
    const left = el("div");
    left.append(el("h3", {}, f.fetcher_id));
    const width = Math.max(240, widthOf(box) * 0.4);
    left.append(lineChart([{ name: "crawl speed, pages / s", values: d.map((x) => x.crawl_speed) }],
      { from: `${d.length} windows ago`, yFormat: (v) => fmt(v, 1), legend: true, width, height: 90 }));
    left.append(lineChart([{ name: "threads set", values: d.map((x) => x.threads_after) }],
      { from: `${d.length} windows ago`, yFormat: (v) => fmt(v, 0), legend: true, width, height: 70 }));
    const table = el("table");
    const head = el("tr");
    for (const h of ["window end", "pages", "pages/s", "E_cs", "threads", "learning", "reason"]) head.append(el("th", {}, h));
    const thead = el("thead");
    thead.append(head);
    table.append(thead);
    const tbody = el("tbody");
    for (const x of d.slice(-8).reverse()) {
      const tr = el("tr");
      tr.append(el("td", {}, new Date(x.window_end).toISOString().slice(11, 23)), el("td", {}, fmt(x.pages)),
        el("td", {}, fmt(x.crawl_speed, 2)), el("td", {}, sign(x.e_cs_sign)),
        el("td", {}, `${x.threads_before} → ${x.threads_after}`), el("td", {}, x.learning ? "on" : "off"),
        el("td", { title: x.reason }, x.reason));
      tbody.append(tr);
    }
    table.append(tbody);
    part.append(left, table);
    return part;
  }));
}

function renderPaused(data) {
  const box = document.getElementById("paused-hosts");
  const paused = data.paused_hosts || [];
  if (!paused.length) { box.replaceChildren(el("p", { class: "note" }, "None.")); return; }
  const table = el("table");
  const head = el("tr");
  for (const h of ["host", "crawl", "reason", "resumes at", "in", "back-off level"]) head.append(el("th", {}, h));
  const thead = el("thead");
  thead.append(head);
  table.append(thead);
  const tbody = el("tbody");
  const now = data.job.now * 1000;
  for (const p of paused) {
    const tr = el("tr");
    tr.append(el("td", {}, p.host), el("td", {}, p.crawl_id), el("td", {}, p.reason),
      el("td", {}, new Date(p.until).toISOString().slice(0, 19).replace("T", " ")),
      el("td", {}, `${fmt(Math.max(0, (p.until - now) / 1000), 0)} s`), el("td", {}, fmt(p.level)));
    tbody.append(tr);
  }
  table.append(tbody);
  box.replaceChildren(table);
}

function renderDead(data) {
  const box = document.getElementById("dead-letters");
  if (!data.dead_letters.length) { box.replaceChildren(el("p", { class: "note" }, "None.")); return; }
  box.replaceChildren(...data.dead_letters.map((d) => {
    const part = el("div", { class: "dead" });
    part.append(el("h3", {}, `${d.reason}: ${fmt(d.count)}`));
    for (const s of d.samples) {
      const where = s.offset === null ? s.source : `${s.source} [${s.partition ?? "-"}:${s.offset}]`;
      part.append(el("div", { class: "what" }, `${where} — ${s.message}`));
      part.append(el("pre", { class: "raw", title: `${s.raw_bytes} bytes` }, s.raw));
    }
    return part;
  }));
}

function renderLagAndStep(data) {
  const lag = document.getElementById("chart-lag");
  const lags = recent(data.lag.per_second, data);
  replace(lag, lineChart([{ name: "records", values: lags }],
    { from: ago(lags.length), yFormat: (v) => fmt(v, 0), width: widthOf(lag) }));
  const step = document.getElementById("chart-step");
  const steps = recent(data.step.max_ms, data);
  replace(step, lineChart([{ name: "ms", values: steps }],
    { from: ago(steps.length), yFormat: (v) => fmt(v, 0), width: widthOf(step) }));
}

let instance = null;
let restarts = 0;
let backoff = POLL_MS;

function status(text, down) {
  const node = document.getElementById("status");
  node.textContent = text;
  node.classList.toggle("down", down);
  document.body.dataset.connected = down ? "0" : "1";
}

async function poll() {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 5000);
  try {
    const answer = await fetch("/api/summary", { cache: "no-store", signal: abort.signal });
    if (!answer.ok) throw new Error(`HTTP ${answer.status}`);
    const data = await answer.json();
    if (instance !== null && instance !== data.job.instance) restarts += 1;
    instance = data.job.instance;
    status(restarts ? `live — the job restarted ${restarts}× while this page was open; ` +
      "counters start again at each start" : "live", false);
    for (const render of [renderTotals, renderRates, renderHosts, renderTop, renderHarvest,
                          renderFetchers, renderPaused, renderDead, renderLagAndStep]) {
      try { render(data); } catch (err) { console.error(render.name, err); } // the others still draw
    }
    document.getElementById("updated").textContent = `Updated ${new Date().toLocaleTimeString()}.`;
    backoff = POLL_MS;
  } catch (err) {
    status(`job not answering (${err.message || err}); retrying`, true);
    backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
  } finally {
    clearTimeout(timer);
    setTimeout(poll, backoff);
  }
}

document.addEventListener("DOMContentLoaded", poll);
