// toolkeeper admin UI: the Overview (GET /stats/overview), the console's landing tab. Loaded
// after app.js (api, el, cell, say, show, signedIn, clearViews, fmtTime, fmtDuration, $) and
// chartist.js (Chartist).
// Every chart is a figure with a caption, an accessible name summarising it, the values it draws
// in data attributes and an exact data table; values are written with textContent only.
"use strict";

const Overview = (() => {
  const REFRESH_MS = 10000;  // while the tab is shown and the page visible; never overlapping
  const WINDOWS = { hour: "the last hour", day: "the last day", week: "the last week" };
  // one label every N buckets on the time axes (hour: 60 x 1 min, day: 24 x 1 h, week: 168 x 1 h)
  const LABEL_EVERY = { hour: 10, day: 4, week: 24 };
  // gen: bumped when a token's view is cleared, so an answer asked for under it is not drawn
  const state = { timer: null, busy: false, again: false, parts: null, charts: [], gen: 0 };

  // Chartist writes `style` attributes (setAttribute), which the page's CSP (style-src 'self')
  // refuses; the same declarations go through the CSSOM instead, which the CSP allows
  const chartistAttr = Chartist.Svg.prototype.attr;
  Chartist.Svg.prototype.attr = function (attrs, ns) {
    if (attrs && typeof attrs === "object" && typeof attrs.style === "string") {
      const { style, ...rest } = attrs;
      for (const decl of style.split(";")) {
        const at = decl.indexOf(":");
        if (at > 0) this._node.style.setProperty(decl.slice(0, at).trim(), decl.slice(at + 1).trim());
      }
      return chartistAttr.call(this, rest, ns);
    }
    return chartistAttr.call(this, attrs, ns);
  };

  const exact = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
  function tickFormat(win) {
    return new Intl.DateTimeFormat(undefined, win === "week"
      ? { weekday: "short", day: "numeric" } : { hour: "numeric", minute: "2-digit" });
  }

  function goTo(tab, text) {  // a link to another tab (show() switches it; the hash follows)
    const a = el("a", text);
    a.href = "#" + tab;
    a.addEventListener("click", (ev) => { ev.preventDefault(); show(tab); });
    return a;
  }

  function figure(id, caption) {
    // caption, chart (role=img, named by a summary), an empty state, the exact data table
    const fig = el("figure", null, "ov-figure");
    fig.id = "ov-" + id;
    const cap = el("figcaption", caption);
    const chart = el("div", null, "ov-chart ct-chart");
    chart.setAttribute("role", "img");
    const empty = el("p", null, "hint ov-empty");
    const details = el("details");
    details.appendChild(el("summary", "Data: " + caption.toLowerCase()));
    const table = el("table");
    table.setAttribute("aria-label", caption);
    table.tabIndex = 0;  // it scrolls sideways on a narrow screen (app.css): reachable by keyboard
    const thead = table.createTHead();
    const tbody = table.createTBody();
    details.appendChild(table);
    fig.append(cap, chart, empty, details);
    return { fig, chart, empty, details, thead, tbody, extra: null };
  }

  function head(part, names) {
    const row = document.createElement("tr");
    for (const n of names) row.appendChild(el("th", n)).scope = "col";
    part.thead.replaceChildren(row);
  }

  function row(part, values) {
    const tr = document.createElement("tr");
    for (const v of values) {
      if (v instanceof Node) cell(tr, "").appendChild(v);
      else cell(tr, v);
    }
    part.tbody.appendChild(tr);
  }

  function emptied(part, isEmpty, text, ...links) {
    part.chart.hidden = isEmpty;
    part.details.hidden = isEmpty;
    part.empty.hidden = !isEmpty;
    part.empty.replaceChildren(text);
    for (const [i, l] of links.entries()) part.empty.append(i ? " or " : " ", l);
    if (links.length) part.empty.append(".");
  }

  function draw(make, node, data, options) {  // a new Chartist chart in node (the old one goes)
    if (node.hidden) return;
    const chart = make(node, data, options);
    state.charts.push(chart);
  }

  function build() {
    const body = $("#overview-body");
    const tiles = el("div", null, "ov-tiles");
    const parts = {
      tiles,
      calls: figure("calls", "Calls over time by status"),
      denials: figure("denials", "Denials by reason"),
      approvals: figure("approvals", "Approvals requested and decided"),
      slowest: figure("slowest", "Slowest tools (p50 and p95)"),
      budgets: figure("budgets", "Budgets this period (% spent)"),
    };
    parts.approvals.extra = el("dl", null, "summary ov-wait");
    parts.approvals.chart.after(parts.approvals.extra);
    const grid = el("div", null, "ov-grid");
    grid.append(parts.calls.fig, parts.denials.fig, parts.approvals.fig, parts.slowest.fig);
    parts.grid = grid;  // the budgets figure joins it once a budget has spent something
    body.replaceChildren(tiles, grid);
    return parts;
  }

  function tile(name, count, text, tab, linkText, more) {
    const t = el("div", null, "ov-tile" + (count ? " ov-alert" : ""));
    t.dataset.tile = name;
    t.dataset.count = String(count);
    t.append(el("span", String(count), "ov-count"), el("span", text, "ov-what"));
    if (more) t.appendChild(more);
    t.appendChild(goTo(tab, linkText));
    return t;
  }

  function drawTiles(parts, d) {
    const u = d.unknown_outcomes;
    const oldest = u.oldest ? el("span", "oldest: ", "hint") : null;
    if (oldest) oldest.appendChild(fmtTime(u.oldest));
    const list = el("ul", null, "ov-tools");
    for (const t of d.tools_attention) {
      const li = el("li", t.tool + ": " + [t.status, t.health].filter(Boolean).join(", ")
        + (t.detail ? " — " + t.detail : ""));
      li.dataset.tool = t.tool;
      list.appendChild(li);
    }
    parts.tiles.replaceChildren(
      tile("unknown", u.count, u.count === 1 ? "unknown outcome needs a person"
        : "unknown outcomes need a person", "calls", "Resolve them in Calls", oldest),
      tile("tools", d.tools_attention.length, "tools unhealthy or quarantined", "tools",
        "See them in Tools", d.tools_attention.length ? list : null),
      tile("approvals", d.pending_approvals, d.pending_approvals === 1
        ? "approval pending" : "approvals pending", "approvals", "Decide them in Approvals"));
  }

  function timeLabels(d, win) {
    const fmt = tickFormat(win);
    const every = LABEL_EVERY[win] || 1;
    return d.buckets.map((b, i) => (i % every === 0 ? fmt.format(new Date(b)) : ""));
  }

  function drawCalls(p, d, win) {
    const by = d.calls.by_status;
    const statuses = Object.keys(by);
    p.chart.dataset.series = JSON.stringify(by);
    p.chart.dataset.buckets = JSON.stringify(d.buckets);
    const totals = statuses.map((s) => [s, by[s].reduce((a, b) => a + b, 0)]);
    p.chart.setAttribute("aria-label", d.calls.total + " calls in " + WINDOWS[win]
      + (totals.length ? ": " + totals.map(([s, n]) => n + " " + s).join(", ") : ""));
    emptied(p, d.calls.total === 0, "No calls in " + WINDOWS[win] + " — agents' calls appear "
      + "here as they come; see", goTo("calls", "Calls"),
      el("span", "the guide “The first ten minutes” (docs/guides/first-ten-minutes.md)"));
    head(p, ["time", ...statuses, "total"]);
    p.tbody.replaceChildren();
    d.buckets.forEach((b, i) => {
      const counts = statuses.map((s) => by[s][i]);
      const sum = counts.reduce((a, c) => a + c, 0);
      if (sum) row(p, [exact.format(new Date(b)), ...counts, sum]);
    });
    row(p, ["all " + WINDOWS[win].replace("the ", ""), ...totals.map(([, n]) => n), d.calls.total]);
    draw((n, data, o) => new Chartist.BarChart(n, data, o), p.chart, {
      labels: timeLabels(d, win),
      series: statuses.map((s) => ({ name: s, className: "ov-s-" + s, data: by[s] })),
    }, { stackBars: true, height: "220px", axisY: { onlyInteger: true }, axisX: { showGrid: false } });
    legend(p, totals);
  }

  function legend(p, totals) {  // the colour of each series, with its total
    let ul = p.fig.querySelector("ul.ov-legend");
    if (!ul) { ul = el("ul", null, "ov-legend"); p.chart.after(ul); }
    ul.hidden = p.chart.hidden;
    ul.replaceChildren(...totals.map(([s, n]) => {
      const li = el("li", null, "ov-s-" + s);
      li.append(el("span", null, "ov-swatch"), s + (n === "" ? "" : " " + n));
      return li;
    }));
  }

  function drawDenials(p, d, win) {
    const reasons = d.denials.map((x) => x.reason || "(no reason)");
    const counts = d.denials.map((x) => x.count);
    p.chart.dataset.denials = JSON.stringify(Object.fromEntries(reasons.map((r, i) => [r, counts[i]])));
    p.chart.setAttribute("aria-label", "Denials in " + WINDOWS[win] + " by reason: "
      + (reasons.length ? reasons.map((r, i) => r + " " + counts[i]).join(", ") : "none"));
    emptied(p, !d.denials.length, "No call was denied in " + WINDOWS[win] + ". A denial's "
      + "reason shows here; each denied call is in", goTo("calls", "Calls"));
    head(p, ["reason", "denied calls"]);
    p.tbody.replaceChildren();
    reasons.forEach((r, i) => row(p, [r, counts[i]]));
    draw((n, data, o) => new Chartist.BarChart(n, data, o), p.chart,
      { labels: reasons, series: [{ name: "denied", className: "ov-s-denied", data: counts }] },
      { horizontalBars: true, reverseData: true, height: Math.max(120, 34 * reasons.length) + "px",
        axisY: { offset: 130 }, axisX: { onlyInteger: true } });
  }

  function drawApprovals(p, d, win) {
    const a = d.approvals;
    p.chart.dataset.series = JSON.stringify({ requested: a.requested, decided: a.decided });
    p.chart.dataset.wait = JSON.stringify(a.wait_ms);
    const decidedTotal = a.decided.reduce((x, y) => x + y, 0);
    p.chart.setAttribute("aria-label", a.requested_total + " approvals requested and "
      + decidedTotal + " decided in " + WINDOWS[win] + "; waited p50 " + fmtDuration(a.wait_ms.p50)
      + ", p95 " + fmtDuration(a.wait_ms.p95) + ", max " + fmtDuration(a.wait_ms.max));
    emptied(p, a.requested_total === 0 && decidedTotal === 0, "No approval was requested in "
      + WINDOWS[win] + ". Calls that need a person wait in", goTo("approvals", "Approvals"));
    const dl = p.extra;
    dl.replaceChildren();
    dl.hidden = p.chart.hidden;
    const pairs = [["approved", a.approved], ["denied", a.denied], ["expired", a.expired],
      ["pending", a.pending], ["waited p50", fmtDuration(a.wait_ms.p50)],
      ["waited p95", fmtDuration(a.wait_ms.p95)], ["waited at most", fmtDuration(a.wait_ms.max)]];
    for (const [k, v] of pairs) {
      dl.append(el("dt", k), el("dd", String(v)));
      dl.lastChild.dataset.key = k;
    }
    head(p, ["time", "requested", "decided"]);
    p.tbody.replaceChildren();
    d.buckets.forEach((b, i) => {
      if (a.requested[i] || a.decided[i]) row(p, [exact.format(new Date(b)), a.requested[i], a.decided[i]]);
    });
    row(p, ["all " + WINDOWS[win].replace("the ", ""), a.requested_total, decidedTotal]);
    draw((n, data, o) => new Chartist.LineChart(n, data, o), p.chart, {
      labels: timeLabels(d, win),
      series: [{ name: "requested", className: "ov-s-requested", data: a.requested },
        { name: "decided", className: "ov-s-decided", data: a.decided }],
    }, { height: "200px", showPoint: false, lineSmooth: false, axisY: { onlyInteger: true },
      axisX: { showGrid: false } });
    legend(p, [["requested", a.requested_total], ["decided", decidedTotal]]);
  }

  function drawSlowest(p, d, win) {
    const tools = d.slowest_tools;
    p.chart.dataset.tools = JSON.stringify(tools);
    p.chart.setAttribute("aria-label", "Slowest tools in " + WINDOWS[win] + " by p95: "
      + (tools.length ? tools.map((t) => t.tool + " p50 " + fmtDuration(t.p50_ms) + ", p95 "
        + fmtDuration(t.p95_ms)).join("; ") : "none"));
    emptied(p, !tools.length, "No tool ran in " + WINDOWS[win] + "; the time each tool takes "
      + "shows here once agents call them. The tools are in", goTo("tools", "Tools"));
    head(p, ["tool", "calls", "p50", "p95"]);
    p.tbody.replaceChildren();
    for (const t of tools) row(p, [t.tool, t.calls, fmtDuration(t.p50_ms), fmtDuration(t.p95_ms)]);
    draw((n, data, o) => new Chartist.BarChart(n, data, o), p.chart, {
      labels: tools.map((t) => t.tool),
      series: [{ name: "p50", className: "ov-s-p50", data: tools.map((t) => t.p50_ms) },
        { name: "p95", className: "ov-s-p95", data: tools.map((t) => t.p95_ms) }],
    }, { horizontalBars: true, reverseData: true, seriesBarDistance: 10, chartPadding: { right: 30 },
      height: Math.max(120, 44 * tools.length) + "px", axisY: { offset: 110 },
      axisX: { labelInterpolationFnc: (v) => fmtDuration(v) } });
    legend(p, [["p50", ""], ["p95", ""]]);
  }

  function spent(b) {  // the fuller of the call and the cost budget, in % (may pass 100)
    return Math.round(100 * Math.max(b.max_calls ? b.calls / b.max_calls : 0,
      b.max_cost ? b.cost / b.max_cost : 0));
  }

  function drawBudgets(p, grid, d) {  // each budget key's spend this period (not the window)
    const rows = d.budgets;
    if (!rows.length) { p.fig.remove(); return; }  // a tenant without budgets sees no panel
    if (!p.fig.isConnected) grid.append(p.fig);
    const label = (b) => b.budget + (b.subject ? " (" + b.subject + ")" : "");
    p.chart.dataset.budgets = JSON.stringify(rows);
    p.chart.setAttribute("aria-label", "Budgets this period: " + rows.map((b) =>
      label(b) + " " + spent(b) + "% spent, " + b.state).join("; "));
    head(p, ["budget", "layer", "period", "calls", "cost", "spent", "state", "resets"]);
    p.tbody.replaceChildren();
    for (const b of rows) {
      row(p, [label(b), b.layer, b.period, b.calls + (b.max_calls ? " / " + b.max_calls : ""),
        b.cost + (b.max_cost ? " / " + b.max_cost : ""), spent(b) + "%", b.state,
        fmtTime(b.resets_at)]);
    }
    draw((n, data, o) => new Chartist.BarChart(n, data, o), p.chart, {
      labels: rows.map(label),
      series: [{ name: "spent", className: "ov-s-budget", data: rows.map(spent) }],
    }, { horizontalBars: true, reverseData: true, high: 100, low: 0, axisY: { offset: 130 },
      height: Math.max(120, 34 * rows.length) + "px" });
  }

  function render(d, win) {
    const parts = state.parts || (state.parts = build());
    for (const c of state.charts.splice(0)) c.detach();
    $("#overview").dataset.window = d.window;
    $("#overview").dataset.generatedAt = d.generated_at;
    drawTiles(parts, d);
    drawCalls(parts.calls, d, win);
    drawDenials(parts.denials, d, win);
    drawApprovals(parts.approvals, d, win);
    drawSlowest(parts.slowest, d, win);
    drawBudgets(parts.budgets, parts.grid, d);
    const upd = $("#overview-updated");
    upd.replaceChildren("Updated ", fmtTime(d.generated_at), "; refreshes every "
      + REFRESH_MS / 1000 + " s while shown.");
  }

  function shown() {
    return !$("#overview").hidden && document.visibilityState === "visible" && signedIn();
  }

  async function load() {
    // one request at a time: a window chosen meanwhile is asked for when this one is back
    if (state.busy) { state.again = true; return "loading…"; }
    state.busy = true;
    const win = $("#overview-window").value;
    const gen = state.gen;
    try {
      const d = await api("GET", "/stats/overview?window=" + encodeURIComponent(win));
      // the token may have been forgotten or the window changed while it was asked for
      if (gen !== state.gen || $("#overview").hidden || win !== $("#overview-window").value) return "";
      render(d, win);
      return "overview of " + WINDOWS[win] + ": " + d.calls.total + " calls";
    } finally {
      state.busy = false;
      if (state.again) { state.again = false; load().then(say, (e) => say(e.message, true)); }
    }
  }

  function stop() {
    clearTimeout(state.timer);
    state.timer = null;
  }

  function schedule() {
    stop();
    if (shown()) state.timer = setTimeout(tick, REFRESH_MS);
  }

  function tick() {
    state.timer = null;
    if (!shown()) return;  // another tab, a hidden page or no token: no more refreshes
    // the status line is a live region: a refresh speaks only to replace an error it showed
    load().then((text) => { if (text && $("#status").className === "error") say(text); },
      (e) => say(e.message, true)).finally(schedule);
  }

  function clear() {  // what one token was shown goes with it (clearViews below)
    stop();
    state.gen += 1;
    for (const c of state.charts.splice(0)) c.detach();
    state.parts = null;
    $("#overview-body").replaceChildren();
    $("#overview-updated").replaceChildren();
    delete $("#overview").dataset.window;
    delete $("#overview").dataset.generatedAt;
  }

  const clearOtherViews = clearViews;  // app.js's: every other view
  clearViews = function () { clear(); clearOtherViews(); };

  views.overview = async () => {
    try { return await load(); } finally { schedule(); }
  };

  document.addEventListener("DOMContentLoaded", () => {
    $("#overview-window").addEventListener("change", () => {
      load().then((text) => { if (text) say(text); }, (e) => say(e.message, true)).finally(schedule);
    });
  });

  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState !== "visible") stop();
    else if (shown()) tick();
  });

  return { refreshMs: REFRESH_MS };
})();
