/* crawlfleet's dashboard: fills the page from the JSON API and draws the charts with uPlot.
 * Everything from the store (domain names, URLs, error messages: the crawled web wrote them)
 * goes into the page as text nodes, never as HTML. Changes are POSTs with the page's token in
 * an Authorization header. No build step. */
(function () {
  "use strict";

  const main = document.getElementById("page");
  const page = main.dataset.page;
  const token = document.querySelector('meta[name="crawlfleet-token"]').content;
  const every = Number(document.querySelector('meta[name="crawlfleet-refresh"]').content) || 5000;
  const content = document.getElementById("content");
  const alertsBox = document.getElementById("alerts");
  const updated = document.getElementById("updated");
  const charts = new Map();
  const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#65a30d"];

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "dataset") Object.assign(node.dataset, value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  const num = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en", { maximumFractionDigits: 1 }));
  const pct = (x) => (x === null || x === undefined ? "–" : (100 * x).toFixed(x < 0.1 ? 2 : 1) + "%");
  // pages per rung of the ladder: "http 3 (3 blocked) · impersonate 120"
  const rungs = (d) =>
    ["http", "impersonate", "browser"]
      .filter((k) => (d.rungs || {})[k])
      .map((k) => k + " " + num(d.rungs[k]) + ((d.rung_blocks || {})[k] ? " (" + num(d.rung_blocks[k]) + " blocked)" : ""))
      .join(" · ") || "–";
  const secs = (s) => (s === null || s === undefined ? "–" : s < 120 ? s.toFixed(1) + "s" : s < 7200 ? (s / 60).toFixed(1) + "m" : (s / 3600).toFixed(1) + "h");
  const bytes = (n) => (n === null || n === undefined ? "–" : n < 1 << 20 ? (n / 1024).toFixed(0) + " KiB" : (n / (1 << 20)).toFixed(0) + " MiB");
  // a worker's state (see the overview's WorkerView): alive, stale (silent, never said it stopped), stopped, gone
  const workerClass = { alive: "healthy", stale: "open", stopped: "muted", gone: "muted" };
  const when = (t) => (t ? new Date(t * 1000).toLocaleTimeString() : "–");

  async function get(path) {
    const response = await fetch(path, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    if (!response.ok) throw new Error(path + ": HTTP " + response.status);
    return response.json();
  }

  async function post(path, body) {
    const response = await fetch(path, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Authorization: "Bearer " + token },
      body: JSON.stringify(body || {}),
    });
    if (!response.ok) throw new Error(path + ": HTTP " + response.status + " " + (await response.text()));
    return response.json();
  }

  function table(columns, rows, empty) {
    if (!rows.length) return el("p", { class: "empty" }, empty || "nothing yet");
    const head = el("tr", {}, columns.map((c) => el("th", { class: c.num ? "num" : null }, c.title)));
    const body = rows.map((row) =>
      el("tr", {}, columns.map((c) => el("td", { class: c.num ? "num" : null }, c.value(row))))
    );
    return el("table", {}, el("thead", {}, head), el("tbody", {}, body));
  }

  function cards(items) {
    return el("div", { class: "cards" }, items.map(([label, value, cls]) =>
      el("div", { class: "card " + (cls || "") }, el("span", { class: "label" }, label), el("span", { class: "value" }, value))
    ));
  }

  /* A chart of series over the history's times; kept and given new data on every refresh. */
  function chart(id, title, times, series, format) {
    const names = Object.keys(series);
    const data = [times, ...names.map((n) => series[n])];
    let entry = charts.get(id);
    if (entry && entry.names.join("\u0000") !== names.join("\u0000")) {
      entry.plot.destroy();
      charts.delete(id);
      entry = null;
    }
    if (!entry) {
      const box = el("div", { class: "chart", dataset: { chart: id } }, el("h3", {}, title));
      const target = document.getElementById("charts") || content;
      target.append(box);
      const opts = {
        width: Math.max(320, Math.floor(box.clientWidth || 420) - 8),
        height: 170,
        legend: { show: names.length > 1 },
        scales: { x: { time: true } },
        axes: [{}, { values: (u, ticks) => ticks.map((v) => (format ? format(v) : num(v))) , size: 60 }],
        series: [{}, ...names.map((n, i) => ({ label: n, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true }))],
        hooks: { draw: [(u) => { box.dataset.drawn = String(u.data[0].length); }] },
      };
      entry = { names, box, plot: new uPlot(opts, data, box) };
      charts.set(id, entry);
    } else {
      entry.plot.setData(data);
    }
    return entry.box;
  }

  function chartsBox() {
    let box = document.getElementById("charts");
    if (!box) {
      box = el("div", { id: "charts", class: "charts" });
      content.after(box);
    }
    return box;
  }

  function showAlerts(alerts) {
    alertsBox.replaceChildren(...alerts.map((a) => el("div", { class: "alert", dataset: { rule: a.rule } }, a.message)));
  }

  function problem(error) {
    updated.textContent = "cannot read the API: " + error.message;
    updated.className = "error";
  }

  const actionButton = (label, job, action) =>
    el("button", {
      dataset: { action, job },
      onclick: async (event) => {
        event.target.disabled = true;
        try { await post("/api/jobs/" + encodeURIComponent(job) + "/" + action); } catch (e) { problem(e); }
        await render();
      },
    }, label);

  const renderers = {
    async overview() {
      const [o, h] = await Promise.all([get("/api/overview"), get("/api/history")]);
      content.replaceChildren(cards([
        ["pages/s", num(o.pages_per_second)],
        ["backlog", num(o.backlog)],
        ["oldest queued", secs(o.oldest_age)],
        ["success", pct(o.success_ratio)],
        ["block rate", pct(o.block_ratio)],
        ["validation failures", pct(o.validation_failure_ratio)],
        // red when work waits for a worker or one fell silent; none alive after a finish is fine
        ["workers alive", num(o.workers_alive) + " / " + num(o.workers) + (o.workers_stale ? " (" + num(o.workers_stale) + " stale)" : ""),
          o.workers_stale || o.alerts.some((a) => a.rule === "no_worker_alive") ? "bad" : ""],
        ["in flight", num(o.leased)],
        ["done", num(o.done)],
        ["dead", num(o.dead)],
        ["records", num(o.records)],
        ["quarantined", num(o.quarantined)],
        ["leases expired", num(o.leases_expired)],
      ]));
      chartsBox();
      chart("throughput", "Throughput (pages/s)", h.t, { "pages/s": h.throughput });
      chart("backlog", "Backlog (requests queued)", h.t, { backlog: h.backlog });
      chart("oldest", "Oldest queued request (age)", h.t, { age: h.oldest_age }, secs);
      chart("success", "Success rate", h.t, { success: h.success }, pct);
      chart("blocks", "Block rate", h.t, { blocked: h.block_rate }, pct);
      chart("validation", "Validation failures", h.t, { invalid: h.validation }, pct);
      return o.alerts;
    },
    async jobs() {
      const [jobs, h] = await Promise.all([get("/api/jobs"), get("/api/history")]);
      content.replaceChildren(table([
        { title: "job", value: (j) => j.name },
        { title: "state", value: (j) => j.progress },
        { title: "queued", num: true, value: (j) => num(j.queued) },
        { title: "waiting", num: true, value: (j) => num(j.waiting) },
        { title: "leased", num: true, value: (j) => num(j.leased) },
        { title: "done", num: true, value: (j) => num(j.done) },
        { title: "dead", num: true, value: (j) => num(j.dead) },
        { title: "records", num: true, value: (j) => num(j.records) },
        { title: "quarantined", num: true, value: (j) => num(j.quarantined) },
        { title: "invalid", num: true, value: (j) => pct(j.validation_failure_ratio) },
        { title: "blocked", num: true, value: (j) => num(j.blocked) },
        { title: "retry depth", num: true, value: (j) => j.avg_retry_depth.toFixed(2) },
        { title: "oldest", num: true, value: (j) => secs(j.oldest_queued_age) },
        { title: "", value: (j) => [
          j.job_state === "running" ? actionButton("pause", j.name, "pause") : actionButton("resume", j.name, "resume"),
          j.job_state !== "cancelled" ? actionButton("cancel", j.name, "cancel") : null,
        ] },
      ], jobs, "no jobs"));
      chartsBox();
      chart("jobs", "Backlog per job", h.t, h.jobs);
    },
    async domains() {
      const [domains, h] = await Promise.all([get("/api/domains"), get("/api/history")]);
      content.replaceChildren(table([
        { title: "domain", value: (d) => d.domain },
        { title: "pages/s", num: true, value: (d) => num(d.rate) },
        { title: "backlog", num: true, value: (d) => num(d.backlog) },
        { title: "oldest", num: true, value: (d) => secs(d.oldest_age) },
        { title: "in flight", num: true, value: (d) => num(d.in_flight) + " / " + num(d.max_in_flight) },
        { title: "pacing (s between starts)", num: true, value: (d) => d.delay.toFixed(3) },
        { title: "block rate", num: true, value: (d) => pct(d.block_ratio) },
        { title: "pages", num: true, value: (d) => num(d.pages) },
        { title: "blocked", num: true, value: (d) => num(d.blocked_pages) },
        { title: "pages by rung", value: (d) => rungs(d) },
        { title: "tier", num: true, value: (d) => d.tier },
      ], domains, "no domains yet"));
      chartsBox();
      chart("domains", "Recent block rate per domain", h.t, h.domains, pct);
    },
    async routes() {
      const r = await get("/api/routes");
      const pools = Object.entries(r.pools).map(([pool, p]) => ({ pool, ...p }));
      content.replaceChildren(
        el("h2", {}, "Pools"),
        table([
          { title: "pool", value: (p) => p.pool },
          { title: "healthy", num: true, value: (p) => p.healthy },
          { title: "open", num: true, value: (p) => p.open },
          { title: "probing", num: true, value: (p) => p.probing },
        ], pools, "no pools"),
        el("h2", {}, "Routes"),
        table([
          { title: "route", value: (x) => x.id },
          { title: "pool", value: (x) => x.pool },
          { title: "proxy", value: (x) => x.proxy || "–" },
          { title: "tier", num: true, value: (x) => x.tier },
          { title: "state", value: (x) => el("span", { class: "state " + x.state }, x.state) },
          { title: "success", num: true, value: (x) => pct(x.success_ratio) },
          { title: "latency", num: true, value: (x) => (x.latency === null ? "–" : (1000 * x.latency).toFixed(0) + " ms") },
          { title: "lanes", num: true, value: (x) => x.lanes },
        ], r.routes, "no routes"),
      );
    },
    async workers() {
      const [workers, h] = await Promise.all([get("/api/workers"), get("/api/history")]);
      content.replaceChildren(table([
        { title: "worker", value: (w) => w.worker },
        { title: "state", value: (w) => el("span", { class: "state " + workerClass[w.state], dataset: { state: w.state } },
          w.state === "stale" ? "stale: no report for " + secs(w.silent) : w.state) },
        { title: "kind", value: (w) => w.kinds },
        { title: "host", value: (w) => w.host + " (pid " + w.pid + ")" },
        { title: "pages/s", num: true, value: (w) => num(w.pages_per_second) },
        { title: "pages", num: true, value: (w) => num(w.pages) },
        { title: "success", num: true, value: (w) => pct(w.success_ratio) },
        { title: "in flight", num: true, value: (w) => num(w.in_flight) },
        { title: "memory", num: true, value: (w) => bytes(w.memory) },
        { title: "browser", num: true, value: (w) => (w.gauges.browser_rss ? bytes(w.gauges.browser_rss) : "–") },
        { title: "last seen", value: (w) => when(w.last_seen) },
      ], workers, "no worker has reported yet"));
      chartsBox();
      chart("workers", "Pages/s per worker", h.t, h.workers);
    },
    async dead() {
      const letters = await get("/api/dead?limit=200");
      const replay = (ids) => async (event) => {
        event.target.disabled = true;
        try { await post("/api/dead/replay", { ids }); } catch (e) { problem(e); }
        await render();
      };
      content.replaceChildren(
        letters.length ? el("button", { dataset: { replayAll: "1" }, onclick: replay(letters.map((d) => d.id)) }, "replay all " + letters.length) : "",
        table([
          { title: "id", num: true, value: (d) => d.id },
          { title: "job", value: (d) => d.job },
          { title: "reason", value: (d) => d.reason },
          { title: "attempts", num: true, value: (d) => d.attempts },
          { title: "url", value: (d) => el("span", { class: "url" }, d.url) },
          { title: "last error", value: (d) => d.error || "" },
          { title: "died", value: (d) => when(d.died_at) },
          { title: "", value: (d) => el("button", { dataset: { replay: d.id }, onclick: replay([d.id]) }, "replay") },
        ], letters, "no dead letters"),
      );
    },
    async quarantine() {
      const items = await get("/api/quarantine?limit=200");
      content.replaceChildren(table([
        { title: "id", num: true, value: (q) => q.id },
        { title: "job", value: (q) => q.job },
        { title: "url", value: (q) => el("span", { class: "url" }, q.url) },
        { title: "errors", value: (q) => q.errors.map((e) => el("div", {}, (e.loc || []).join(".") + ": " + (e.msg || JSON.stringify(e)))) },
        { title: "fetched", value: (q) => when(q.fetched_at) },
        { title: "snapshot", value: (q) => (q.snapshot ? el("a", { href: q.snapshot, target: "_blank", rel: "noopener" }, "raw") : "–") },
      ], items, "no quarantined records"));
    },
    async quality() {
      const [jobs, outbox] = await Promise.all([get("/api/quality"), get("/api/outbox")]);
      const blocks = [];
      for (const job of jobs) {
        const runs = job.runs;
        blocks.push(el("h2", {}, job.job));
        if (!runs.length) { blocks.push(el("p", { class: "empty" }, "no profile yet")); continue; }
        const head = runs[0];
        const cols = [{ title: "", value: (r) => r.label }].concat(runs.map((p, i) => ({
          title: "run " + p.run + (p.final ? "" : " (running)"), num: true, value: (r) => r.cells[i],
        })));
        const rows = [];
        for (const [label, key] of [["records", "records"], ["quarantined", "quarantined"], ["pages", "pages"], ["dead", "dead"], ["blocked", "blocked"]]) {
          rows.push({ label, cells: runs.map((p) => num(p[key])) });
        }
        const fields = [...new Set(runs.flatMap((p) => Object.keys(p.fields || {})))].sort();
        const flagged = new Set((head.alerts || []).map((a) => a.field).filter(Boolean));
        for (const f of fields) {
          rows.push({
            label: el("span", { class: flagged.has(f) ? "bad" : null, dataset: { field: f } }, "coverage " + f + (flagged.has(f) ? " !" : "")),
            cells: runs.map((p) => pct(((p.fields || {})[f] || {}).coverage)),
          });
        }
        for (const f of fields) {
          const shares = runs.map((p) => ((p.fields || {})[f] || {}).distinct_share);
          if (shares.some((x) => x !== null && x !== undefined)) rows.push({ label: "distinct " + f, cells: shares.map(pct) });
        }
        for (const f of fields) {
          if ((((head.fields || {})[f]) || {}).median === null || (((head.fields || {})[f]) || {}).median === undefined) continue;
          rows.push({ label: "min / median / max " + f, cells: runs.map((p) => {
            const x = (p.fields || {})[f] || {};
            return num(x.minimum) + " / " + num(x.median) + " / " + num(x.maximum);
          }) });
        }
        blocks.push(table(cols, rows));
        blocks.push(el("h3", {}, "Alerts of run " + head.run));
        blocks.push(table([
          { title: "alert", value: (a) => a.alert },
          { title: "field", value: (a) => a.field || "" },
          { title: "severity", value: (a) => el("span", { class: "state " + (a.severity === "critical" ? "open" : "probing") }, a.severity) },
          { title: "value", num: true, value: (a) => num(a.value) },
          { title: "baseline", num: true, value: (a) => num(a.baseline) },
          { title: "message", value: (a) => a.message },
        ], head.alerts || [], "no alert"));
      }
      blocks.push(el("h2", {}, "Outbox"));
      blocks.push(table([
        { title: "destination", value: (c) => c.label },
        { title: "waiting", num: true, value: (c) => num(c.queued) },
        { title: "in flight", num: true, value: (c) => num(c.leased) },
        { title: "delivered", num: true, value: (c) => num(c.done) },
        { title: "dead", num: true, value: (c) => el("span", { class: c.dead ? "bad" : null }, num(c.dead)) },
        { title: "last error", value: (c) => c.last_error || "" },
      ], outbox.destinations, "nothing sent yet"));
      content.replaceChildren(...blocks);
    },
  };

  async function render() {
    try {
      const alerts = await renderers[page]();
      showAlerts(alerts || (await get("/api/overview")).alerts);
      updated.textContent = "updated " + new Date().toLocaleTimeString();
      updated.className = "";
      main.dataset.rendered = String(Number(main.dataset.rendered || 0) + 1);
    } catch (error) {
      problem(error);
    }
  }

  render();
  setInterval(render, every);
})();
