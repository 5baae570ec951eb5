// auditflow analyst web view: one alert's evidence as a graph (cytoscape.js).
//
// Data comes only from this server's analyst API, every call with the analyst's bearer token in
// the Authorization header (never in a URL). The analyst types the token into the page's login
// field; it is kept in the tab's session storage (gone when the tab closes, sent nowhere by the
// browser on its own: no cookie) so that a reload or another alert needs no retyping. A token in
// the URL fragment (#alert=ID&token=T, never sent to a server) is still read once and removed
// from the address bar, but the page never asks for it there.
//
// Two views of an alert's evidence: its money trail (the default: the report's ~30 headline
// accounts, the money that came in before the subject to the left, where it went to the right,
// edges labelled with the traced amount, rounded) or the complete trace (every transfer out).
//
// Layout: hop columns. Column 0 holds the alert's root account (the subject), column h the
// accounts reached after h hops (the trail's upstream accounts at -h); typology members the
// evidence did not reach stand in a column before all others; accounts added by expanding a node
// go in the column after it. Within a column, accounts are sorted by id: the same evidence is
// always drawn the same way.
//
// Amounts are exact: the API sends integer units (strings of digits, or JSON integers for the
// neighbourhood's US cents) and a scale, and formatUnits() places the decimal point with string
// operations; no money value is ever a float here.
(function () {
  "use strict";

  const COLUMN_W = 260;
  const ROW_H = 74;
  const TYPOLOGY_COLORS = ["#e8590c", "#2f9e44", "#7048e8", "#1098ad", "#d6336c", "#f08c00", "#5c940d", "#1c7ed6"];

  const state = {
    token: null,     // the login field's, kept in the tab's sessionStorage
    alertId: null,
    evidence: null,  // the last /evidence answer
    expanded: {},    // account id -> true once expanded
    error: null,
  };

  const $ = (id) => document.getElementById(id);

  // ------------------------------------------------------------------ exact money formatting

  /** Integer units (a string of digits or a safe JS integer) and a scale -> "1,234.56". */
  function formatUnits(units, scale) {
    let digits;
    if (typeof units === "number") {
      if (!Number.isSafeInteger(units)) return "(amount beyond exact range)";
      digits = BigInt(units).toString();
    } else {
      digits = String(units);
    }
    if (!/^-?[0-9]+$/.test(digits)) return "(bad amount)";
    let sign = "";
    if (digits[0] === "-") { sign = "-"; digits = digits.slice(1); }
    digits = digits.replace(/^0+(?=[0-9])/, "");
    while (digits.length <= scale) digits = "0" + digits;
    let whole = scale > 0 ? digits.slice(0, digits.length - scale) : digits;
    let frac = scale > 0 ? digits.slice(digits.length - scale) : "";
    if (scale > 6) frac = frac.replace(/0+$/, "").padEnd(6, "0");  // Bitcoin: as the reports write it
    whole = whole.replace(/\B(?=([0-9]{3})+(?![0-9]))/g, ",");
    return sign + whole + (frac ? "." + frac : "");
  }

  function moneyText(m) {
    return m.code + " " + formatUnits(m.units, m.scale);
  }

  function timeText(wire) {
    return wire ? wire.replace("T", " ") : "";
  }

  // ------------------------------------------------------------------ API calls

  class ApiError extends Error {
    constructor(status, detail) {
      super("HTTP " + status + ": " + detail);
      this.status = status;
    }
  }

  async function api(path, params) {
    const url = new URL("../" + path, document.baseURI);
    for (const [k, v] of Object.entries(params || {})) url.searchParams.set(k, v);
    const r = await fetch(url, {
      // no token: no header, and the server's own 401 is what the analyst sees
      headers: state.token ? { Authorization: "Bearer " + state.token, Accept: "application/json" }
                           : { Accept: "application/json" },
      cache: "no-store",
      credentials: "omit",
      referrerPolicy: "no-referrer",
    });
    let body = null;
    try { body = await r.json(); } catch (_) { body = null; }
    if (!r.ok) {
      let detail = body && body.detail !== undefined ? body.detail : r.statusText;
      if (typeof detail !== "string") detail = JSON.stringify(detail);
      throw new ApiError(r.status, detail);
    }
    return body;
  }

  // ------------------------------------------------------------------ messages

  function showError(message) {
    state.error = message;
    const el = $("error");
    el.textContent = message;
    el.hidden = false;
  }

  function clearError() {
    state.error = null;
    $("error").hidden = true;
    $("error").textContent = "";
  }

  function setStatus(text) {
    $("status").textContent = text;
  }

  // ------------------------------------------------------------------ the graph

  const cy = cytoscape({
    container: $("cy"),
    elements: [],
    layout: { name: "preset" },
    minZoom: 0.1,
    maxZoom: 3,
    style: [
      { selector: "node", style: {
        "background-color": "#adb5bd", "border-width": 1, "border-color": "#495057",
        label: "data(label)", "font-size": 11, "text-valign": "bottom", "text-margin-y": 4,
        width: 26, height: 26, color: "#1d2330", "text-background-color": "#fff",
        "text-background-opacity": 0.8, "text-background-padding": 1 } },
      { selector: "node.typology", style: {
        "background-color": "data(color)", "border-width": 3, "border-color": "#c92a2a", width: 32, height: 32 } },
      { selector: "node.root", style: {
        shape: "star", width: 46, height: 46, "background-color": "#1d2330", "border-width": 4,
        "border-color": "#f03e3e", "font-weight": "bold", "font-size": 13 } },
      { selector: "node.hub", style: { shape: "hexagon" } },
      { selector: "node.expanded-node", style: { "border-style": "dashed", "background-color": "#dee2e6" } },
      { selector: "node:selected", style: { "overlay-color": "#1c7ed6", "overlay-opacity": 0.25, "overlay-padding": 6 } },
      { selector: "edge", style: {
        width: 1.5, "line-color": "#868e96", "target-arrow-color": "#868e96", "target-arrow-shape": "triangle",
        "curve-style": "bezier", label: "data(label)", "font-size": 9, "text-rotation": "autorotate",
        "text-background-color": "#fff", "text-background-opacity": 0.85, "text-background-padding": 1,
        color: "#343a40" } },
      { selector: "edge.typology", style: { width: 3, "line-color": "#e8590c", "target-arrow-color": "#e8590c" } },
      { selector: "edge.trail", style: { "font-size": 12, "text-rotation": "none", "text-margin-y": -7 } },
      { selector: "edge.same-column", style: {
        "curve-style": "unbundled-bezier", "control-point-distances": 70, "control-point-weights": 0.5 } },
      { selector: "edge.neighborhood", style: { "line-style": "dashed", "line-color": "#adb5bd", "target-arrow-color": "#adb5bd" } },
    ],
  });

  function shortId(id) {
    return id;  // BANK/ACCOUNT is what analysts search for; keep it whole
  }

  /** Deterministic positions: one column per hop, accounts sorted by id within each. */
  function placeColumns() {
    const cols = new Map();
    cy.nodes().forEach((n) => {
      const c = n.data("column");
      if (!cols.has(c)) cols.set(c, []);
      cols.get(c).push(n);
    });
    for (const [c, nodes] of cols) {
      nodes.sort((a, b) => (a.id() < b.id() ? -1 : a.id() > b.id() ? 1 : 0));
      nodes.forEach((n, i) => n.position({ x: (c + 1) * COLUMN_W, y: (i - (nodes.length - 1) / 2) * ROW_H }));
    }
  }

  /** The whole graph in view, but a small one not blown up past readable size. */
  function fit() {
    cy.fit(undefined, 40);
    if (cy.zoom() > 1.3) { cy.zoom(1.3); cy.center(); }
  }

  /** Edges between two accounts of one column bow out of it instead of running along it. */
  function markSameColumn() {
    cy.edges().forEach((e) => {
      e.toggleClass("same-column", e.source().data("column") === e.target().data("column"));
    });
  }

  function render(ev) {
    cy.elements().remove();
    state.expanded = {};
    const elements = [];
    const hops = ev.nodes.filter((n) => n.hop !== null).map((n) => n.hop);
    const before = (hops.length ? Math.min(0, ...hops) : 0) - 1;  // members the evidence did not reach
    const typologyEvents = new Set();
    ev.typologies.forEach((t) => t.event_ids.forEach((e) => typologyEvents.add(e)));
    for (const n of ev.nodes) {
      const names = n.typologies.map((i) => ev.typologies[i].typology);
      const classes = [];
      if (n.root) classes.push("root");
      if (names.length) classes.push("typology");
      if (n.hub) classes.push("hub");
      elements.push({
        group: "nodes",
        data: {
          id: n.id, label: shortId(n.id), hop: n.hop, root: n.root,
          column: n.column !== undefined ? n.column : (n.hop === null ? before : n.hop),
          hub: n.hub, typologies: names, typologyIndexes: n.typologies,
          color: names.length ? TYPOLOGY_COLORS[n.typologies[0] % TYPOLOGY_COLORS.length] : "#adb5bd",
          expanded: false, source: "evidence",
        },
        classes: classes.join(" "),
      });
    }
    for (const e of ev.edges) {
      elements.push({
        group: "edges",
        data: {
          id: "e:" + e.event_id, source: e.src, target: e.dst, event_id: e.event_id, hop: e.hop,
          timestamp: e.timestamp, units: e.units, scale: e.scale, currency: e.currency, code: e.code,
          amount: moneyText(e), label: e.label || (moneyText(e) + " · " + timeText(e.timestamp)),
          typology: typologyEvents.has(e.event_id), side: e.side || null,
        },
        classes: [typologyEvents.has(e.event_id) ? "typology" : "", ev.view === "trail" ? "trail" : ""].join(" ").trim(),
      });
    }
    cy.add(elements);
    markSameColumn();
    placeColumns();
    fit();
    renderSummary(ev);
  }

  function cell(text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    return td;
  }

  function renderSummary(ev) {
    const a = ev.alert;
    const s = $("summary");
    s.replaceChildren();
    const h = document.createElement("h2");
    h.textContent = a.alert_id;
    s.append(h);
    const t = document.createElement("table");
    const rows = ev.view === "trail" ? [
      ["subject", ev.trail.subject], ["receiver", ev.trail.receiver],
      ["transfer", a.event_id + " at " + timeText(a.timestamp)], ["amount", moneyText(a.amount) + " (" + ev.trail.amount + ")"],
      ["score", a.score.toFixed(2) + " (threshold " + a.threshold.toFixed(2) + ")"],
      ["money trail", ev.trail.accounts + " accounts, " + ev.trail.flows + " flows (" + ev.trail.not_followed +
        " smaller or past the limits, not followed)"],
      ["window", timeText(ev.trail.window_start) + " – " + timeText(ev.trail.window_end)],
      ["shown", ev.nodes.length + " accounts, " + ev.edges.length + " transfers"],
    ] : [
      ["root account", a.account], ["transfer", a.event_id + " at " + timeText(a.timestamp)],
      ["amount", moneyText(a.amount)], ["score", a.score.toFixed(4) + " (threshold " + a.threshold.toFixed(4) + ")"],
      ["trace", ev.trace.trace_id.slice(0, 16) + "… · " + ev.trace.direction + ", ≤" + ev.trace.max_hops + " hops"],
      ["window", timeText(ev.trace.window_start) + " – " + timeText(ev.trace.window_end)],
      ["shown", ev.nodes.length + " accounts, " + ev.edges.length + " transfers"],
    ];
    const unreached = ev.nodes.filter((n) => n.hop === null).length;
    if (unreached) rows.push([ev.view === "trail" ? "off the trail" : "left of the root",
      unreached + " typology members the " + (ev.view === "trail" ? "money trail" : "trace") + " did not reach"]);
    if (ev.omitted.nodes || ev.omitted.edges) rows.push(["left out", ev.omitted.nodes + " accounts, " + ev.omitted.edges + " transfers (result cap)"]);
    if (ev.view !== "trail" && ev.trace.truncated) rows.push(["trace cut", ev.trace.cuts.map((c) => "hop " + c[0] + " " + (c[1] || "") + ": " + c[2] + " (" + c[3] + ")").join("; ")]);
    if (ev.view !== "trail" && ev.trace.hubs.length) rows.push(["hubs (not expanded)", ev.trace.hubs.join(", ")]);
    for (const [k, v] of rows) {
      const tr = document.createElement("tr");
      tr.append(cell(k), cell(v));
      t.append(tr);
    }
    s.append(t);

    const legend = $("legend");
    legend.replaceChildren();
    const lh = document.createElement("h2");
    lh.textContent = ev.typologies.length ? "Typologies (" + ev.typologies.length + ")" : "No typology matched";
    legend.append(lh);
    const root = document.createElement("div");
    root.innerHTML = '<span class="swatch root"></span>';
    root.append("alert's root account (star)");
    legend.append(root);
    ev.typologies.forEach((ty, i) => {
      const d = document.createElement("div");
      d.className = "typology-item";
      const sw = document.createElement("span");
      sw.className = "swatch";
      sw.style.backgroundColor = TYPOLOGY_COLORS[i % TYPOLOGY_COLORS.length];
      d.append(sw, ty.typology + ": " + ty.accounts.length + " accounts, " + ty.event_ids.length + " transfers");
      const p = document.createElement("div");
      p.className = "hint";
      p.textContent = ty.explanation;
      d.append(p);
      legend.append(d);
    });
    $("details").innerHTML = '<p class="hint">Click an account to expand it with its counterparties.</p>';
  }

  // ------------------------------------------------------------------ expanding a node

  async function expand(node) {
    const id = node.id();
    if (state.expanded[id]) { showDetails(node, null); return; }
    setStatus("expanding " + id + "…");
    let page;
    try {
      page = await api("neighborhood", { account: id });
    } catch (e) {
      showError(e.message);
      setStatus("expanding " + id + " failed");
      return;
    }
    clearError();
    state.expanded[id] = true;
    node.data("expanded", true);
    const column = node.data("column") + 1;
    const added = [];
    for (const r of page.items) {
      if (cy.getElementById(r.counterparty).empty()) {
        added.push({ group: "nodes", data: { id: r.counterparty, label: shortId(r.counterparty), hop: null,
          column: column, root: false, hub: false, typologies: [], typologyIndexes: [], color: "#dee2e6",
          expanded: false, source: "neighborhood", via: id }, classes: "expanded-node" });
      }
      const pairs = [];
      if (r.sent > 0) pairs.push([id, r.counterparty, r.sent, r.sent_usd_cents]);
      if (r.received > 0) pairs.push([r.counterparty, id, r.received, r.received_usd_cents]);
      for (const [src, dst, count, cents] of pairs) {
        const eid = "n:" + src + ">" + dst;
        if (!cy.getElementById(eid).empty()) continue;
        const label = count + "× USD " + formatUnits(cents, 2) + " · " + timeText(r.first) +
          (r.first !== r.last ? " – " + timeText(r.last) : "");
        added.push({ group: "edges", data: { id: eid, source: src, target: dst, count: count, usd_cents: cents,
          label: label, first: r.first, last: r.last }, classes: "neighborhood" });
      }
    }
    cy.add(added);
    markSameColumn();
    placeColumns();
    fit();
    showDetails(node, page);
    setStatus("expanded " + id + ": " + page.items.length + " counterparties" + (page.truncated ? " (cut at the cap)" : ""));
  }

  function showDetails(node, page) {
    const d = $("details");
    d.replaceChildren();
    const h = document.createElement("h2");
    h.textContent = node.id();
    d.append(h);
    const info = document.createElement("p");
    const hop = node.data("hop");
    const bits = [];
    if (node.data("root")) bits.push("the alert's root account");
    if (hop !== null && hop !== undefined) bits.push("reached at hop " + hop);
    if (node.data("typologies").length) bits.push("in " + node.data("typologies").join(", "));
    if (node.data("hub")) bits.push("a hub (not expanded by the trace)");
    info.textContent = bits.join("; ") || "added by expanding " + node.data("via");
    d.append(info);
    if (!page) return;
    const t = document.createElement("table");
    const head = document.createElement("tr");
    for (const k of ["counterparty (first – last)", "sent", "received"]) {
      const th = document.createElement("th");
      th.textContent = k;
      head.append(th);
    }
    t.append(head);
    for (const r of page.items) {
      const tr = document.createElement("tr");
      const who = cell(r.counterparty);
      const when = document.createElement("div");
      when.className = "hint";
      when.textContent = timeText(r.first) + (r.first !== r.last ? " – " + timeText(r.last) : "");
      who.append(when);
      tr.append(who,
        cell(r.sent ? r.sent + "× " + formatUnits(r.sent_usd_cents, 2) : "–", "num"),
        cell(r.received ? r.received + "× " + formatUnits(r.received_usd_cents, 2) : "–", "num"));
      t.append(tr);
    }
    d.append(t);
    const note = document.createElement("p");
    note.className = "hint";
    note.textContent = "US dollars, exact cents" + (page.truncated ? "; list cut at the result cap" : "");
    d.append(note);
  }

  cy.on("tap", "node", (evt) => { expand(evt.target); });

  // ------------------------------------------------------------------ loading an alert

  async function load() {
    state.alertId = $("alert").value.trim();
    if (!state.alertId) { showError("give an alert id"); return; }
    setStatus("loading " + state.alertId + "…");
    try {
      const ev = await api("evidence", { alert_id: state.alertId, view: $("view").value });
      clearError();
      state.evidence = ev;
      render(ev);
      setStatus("loaded " + ev.alert.alert_id + ": " + ev.nodes.length + " accounts, " + ev.edges.length +
        " transfers, " + ev.typologies.length + " typology findings");
    } catch (e) {
      state.evidence = null;
      cy.elements().remove();
      $("summary").replaceChildren();
      $("legend").replaceChildren();
      showError(e.message);
      setStatus("no evidence shown");
    }
  }

  async function listAlerts() {
    try {
      const page = await api("alerts", { limit: 100 });
      const dl = $("alerts");
      dl.replaceChildren();
      for (const a of page.items) {
        const o = document.createElement("option");
        o.value = a.alert_id;
        dl.append(o);
      }
      clearError();
      setStatus(page.total + " alerts in the run" + (page.next_offset !== null ? " (first " + page.items.length + " listed)" : ""));
    } catch (e) {
      showError(e.message);
    }
  }

  const TOKEN_KEY = "auditflow.analyst-token";

  /** The login field's token, kept for this tab (or forgotten when the field is empty). */
  function takeToken() {
    state.token = $("token").value.trim() || null;
    try {
      if (state.token) sessionStorage.setItem(TOKEN_KEY, state.token);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch (_) { /* storage disabled: the token stays in memory for this page */ }
  }

  $("load").addEventListener("submit", (evt) => {
    evt.preventDefault();
    takeToken();
    load();
  });
  $("list-alerts").addEventListener("click", () => {
    takeToken();
    listAlerts();
  });
  $("forget").addEventListener("click", () => {
    $("token").value = "";
    takeToken();
    setStatus("token forgotten");
  });

  // a token kept by this tab; #alert=ID&token=T still works once (the token leaves the address bar)
  try { state.token = sessionStorage.getItem(TOKEN_KEY); } catch (_) { state.token = null; }
  const fragment = new URLSearchParams(location.hash.slice(1));
  if (fragment.has("token")) {
    state.token = fragment.get("token");
    fragment.delete("token");
    const rest = fragment.toString();
    history.replaceState(null, "", location.pathname + location.search + (rest ? "#" + rest : ""));
  }
  if (state.token) $("token").value = state.token;
  if (fragment.has("alert")) $("alert").value = fragment.get("alert");
  if (fragment.get("view") === "trace") $("view").value = "trace";
  if (state.token && $("alert").value) load();

  window.auditflowView = { cy: cy, state: state, formatUnits: formatUnits, load: load, expand: expand };
})();
