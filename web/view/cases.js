// auditflow cases pages: the case queue (cases.html) and one case (case.html).
//
// Data comes only from this server's cases API, every call with the user's bearer token in the
// Authorization header (never in a URL). The user types the token into the login field; it is kept
// in the tab's session storage under the same key as the evidence view's (app.js), so one login
// serves the queue, the case and the evidence pages of this tab, and nothing else: no cookie.
//
// The case page offers a button or a form for each action the case's document allows the user now
// (its "allowed" list: the server's rules, not this script's) and sends every action with the
// version of the case it shows (expected_version): when someone else moved the case on since, the
// server answers 409, the page shows its message and reloads the case. Exporting an approved SAR
// files it; the XML comes back as a download.
//
// The first alert's evidence graph is drawn by the evidence view's own script (app.js, loaded
// before this one on the case page): this script only tells it which alert to load
// (window.auditflowView).
(function () {
  "use strict";

  const TOKEN_KEY = "auditflow.analyst-token";  // app.js's: one login for every page of the tab
  const PAGE = 50;
  const STATES = ["new", "assigned", "investigating", "escalated", "closed_no_action", "sar_proposed",
    "sar_approved", "sar_filed", "reopened"];
  const TIERS = ["critical", "normal", "background"];

  const $ = (id) => document.getElementById(id);
  const page = {
    token: null,
    me: null,        // {name, role} of the token
    doc: null,       // the case shown (case.html)
    offset: 0,       // the queue page's first row (cases.html)
    evidenceOf: null,
  };

  // ------------------------------------------------------------------ calls

  class ApiError extends Error {
    constructor(status, detail) {
      super("HTTP " + status + ": " + detail);
      this.status = status;
      this.detail = detail;
    }
  }

  /** A call of this server's API: GET with query params, or POST with a JSON body. */
  async function call(method, path, params, body) {
    const url = new URL("../" + path, document.baseURI);
    for (const [k, v] of Object.entries(params || {})) {
      for (const one of Array.isArray(v) ? v : [v]) url.searchParams.append(k, one);
    }
    const headers = { Accept: "application/json" };
    if (page.token) headers.Authorization = "Bearer " + page.token;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const r = await fetch(url, {
      method: method, headers: headers, body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer",
    });
    if (!r.ok) {
      let detail = r.statusText;
      try { const b = await r.json(); if (b && b.detail !== undefined) detail = b.detail; } catch (_) { /* not JSON */ }
      if (typeof detail !== "string") detail = JSON.stringify(detail);
      throw new ApiError(r.status, detail);
    }
    return r;
  }

  const getJson = async (path, params) => (await call("GET", path, params)).json();

  /** A file the API sends (a SAR's XML, an attachment), saved by the browser as a download. */
  async function download(method, path, body, fallbackName) {
    const r = await call(method, path, null, body);
    const blob = await r.blob();
    const cd = r.headers.get("Content-Disposition") || "";
    const m = /filename="([^"]+)"/.exec(cd);
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = m ? m[1] : fallbackName;
    a.hidden = true;
    document.body.append(a);
    a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 60000);
    return { name: a.download, bytes: blob.size, sha256: r.headers.get("X-SAR-SHA256") };
  }

  // ------------------------------------------------------------------ messages

  function showError(message) {
    $("case-error").textContent = message;
    $("case-error").hidden = false;
  }

  function clearError() {
    $("case-error").hidden = true;
    $("case-error").textContent = "";
  }

  function setStatus(text) {
    $("case-status").textContent = text;
  }

  function el(tag, text, attrs) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = text;
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  }

  function row(cells) {
    const tr = document.createElement("tr");
    for (const c of cells) {
      const td = document.createElement("td");
      if (c instanceof Node) td.append(c); else td.textContent = c === null || c === undefined ? "" : String(c);
      tr.append(td);
    }
    return tr;
  }

  /** Integer US cents (a JSON integer) -> "1,234.56", with integer and string operations only. */
  function centsText(cents) {
    if (!Number.isSafeInteger(cents)) return "(amount beyond exact range)";
    let digits = String(Math.abs(cents)).padStart(3, "0");
    const whole = digits.slice(0, -2).replace(/\B(?=([0-9]{3})+(?![0-9]))/g, ",");
    return (cents < 0 ? "-" : "") + whole + "." + digits.slice(-2);
  }

  const timeText = (t) => (t ? String(t).replace("T", " ").replace(/\.[0-9]+Z$|Z$/, "") : "");

  // ------------------------------------------------------------------ login

  function keepToken(token) {
    page.token = token || null;
    try {
      if (page.token) sessionStorage.setItem(TOKEN_KEY, page.token);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch (_) { /* storage disabled: the token stays in this page's memory */ }
    if (window.auditflowView) window.auditflowView.state.token = page.token;  // the evidence graph's calls
  }

  /** Who the token is (GET /me); a token nobody has is forgotten. */
  async function whoAmI() {
    if (!page.token) {
      page.me = null;
      $("whoami").textContent = "not logged in";
      setStatus("log in with your token (kept for this browser tab only)");
      return null;
    }
    try {
      page.me = await (await call("GET", "me")).json();
      $("whoami").textContent = page.me.name + " (" + page.me.role + ")";
      return page.me;
    } catch (e) {
      page.me = null;
      $("whoami").textContent = "not logged in";
      if (e.status === 401) keepToken(null);
      showError(e.message);
      return null;
    }
  }

  function setUpLogin(onLogin) {
    try { page.token = sessionStorage.getItem(TOKEN_KEY); } catch (_) { page.token = null; }
    if (page.token) $("token").value = page.token;
    $("login").addEventListener("submit", async (evt) => {
      evt.preventDefault();
      clearError();
      keepToken($("token").value.trim());
      if (await whoAmI()) onLogin();
    });
    $("logout").addEventListener("click", () => {
      $("token").value = "";
      keepToken(null);
      page.me = null;
      $("whoami").textContent = "logged out";
      setStatus("logged out: the token is forgotten");
    });
  }

  // ------------------------------------------------------------------ the queue (cases.html)

  function checkboxes(fieldset, name, values) {
    for (const v of values) {
      const label = el("label");
      const box = el("input", null, { type: "checkbox", name: name, value: v, id: name + "-" + v });
      label.append(box, " " + v.replace(/_/g, " "));
      $(fieldset).append(label);
    }
  }

  const checked = (name) => Array.from(document.querySelectorAll("input[name=" + name + "]:checked")).map((b) => b.value);

  function queueParams() {
    const p = { state: checked("state"), priority: checked("priority"), offset: page.offset, limit: PAGE };
    const who = $("filter-assignee").value.trim();
    if (who) p.assignee = who;
    const age = $("filter-min-age").value.trim();
    if (age) p.min_age_days = age;
    return p;
  }

  /** The filters in the address bar's fragment (no token there), so a queue can be bookmarked. */
  function filtersToFragment() {
    const f = new URLSearchParams();
    const p = queueParams();
    for (const k of ["state", "priority"]) for (const v of p[k]) f.append(k, v);
    if (p.assignee) f.set("assignee", p.assignee);
    if (p.min_age_days) f.set("min_age_days", p.min_age_days);
    history.replaceState(null, "", location.pathname + location.search + (f.toString() ? "#" + f : ""));
  }

  function filtersFromFragment() {
    const f = new URLSearchParams(location.hash.slice(1));
    for (const k of ["state", "priority"]) {
      for (const v of f.getAll(k)) { const box = $(k + "-" + v); if (box) box.checked = true; }
    }
    $("filter-assignee").value = f.get("assignee") || "";
    $("filter-min-age").value = f.get("min_age_days") || "";
  }

  async function loadQueue() {
    setStatus("loading the queue…");
    let body;
    try {
      body = await getJson("cases", queueParams());
    } catch (e) {
      $("queue-rows").replaceChildren();
      $("queue-summary").textContent = "";
      showError(e.message);
      setStatus("no queue shown");
      return;
    }
    clearError();
    const rows = body.items.map((c) => {
      const link = el("a", c.case_id, { href: "case.html#case=" + encodeURIComponent(c.case_id), id: "case-link-" + c.case_id });
      const tr = row([link, c.state.replace(/_/g, " "), c.priority, c.subject, c.alerts, c.assignee || "–", c.age_days,
        c.due, c.version]);
      tr.id = "row-" + c.case_id;
      tr.dataset.state = c.state;
      tr.className = "priority-" + c.priority;
      return tr;
    });
    $("queue-rows").replaceChildren(...rows);
    const last = body.offset + body.items.length;
    $("queue-summary").textContent = body.total ? (body.offset + 1) + "–" + last + " of " + body.total
                                                : "no case matches";
    $("page-previous").disabled = body.offset === 0;
    $("page-next").disabled = body.next_offset === null;
    setStatus(body.total + (body.total === 1 ? " case" : " cases") + " in the queue");
  }

  function setUpQueue() {
    checkboxes("filter-state", "state", STATES);
    checkboxes("filter-priority", "priority", TIERS);
    filtersFromFragment();
    $("filters").addEventListener("submit", (evt) => {
      evt.preventDefault();
      page.offset = 0;
      filtersToFragment();
      loadQueue();
    });
    $("clear-filters").addEventListener("click", () => {
      $("filters").reset();
      page.offset = 0;
      filtersToFragment();
      loadQueue();
    });
    $("filter-mine").addEventListener("click", () => {
      if (page.me) $("filter-assignee").value = page.me.name;
      page.offset = 0;
      filtersToFragment();
      loadQueue();
    });
    $("page-previous").addEventListener("click", () => { page.offset = Math.max(0, page.offset - PAGE); loadQueue(); });
    $("page-next").addEventListener("click", () => { page.offset += PAGE; loadQueue(); });
    setUpLogin(loadQueue);
    whoAmI().then((me) => { if (me) loadQueue(); });
  }

  // ------------------------------------------------------------------ one case (case.html)

  const caseId = () => new URLSearchParams(location.hash.slice(1)).get("case");

  async function loadCase() {
    const id = caseId();
    if (!id) { showError("no case: open one from the queue (case.html#case=ID)"); return; }
    $("case-id").textContent = id;
    setStatus("loading " + id + "…");
    try {
      page.doc = await getJson("cases/" + encodeURIComponent(id));
    } catch (e) {
      page.doc = null;
      $("case-actions").replaceChildren();
      showError(e.message);
      setStatus("no case shown");
      return;
    }
    renderCase(page.doc);
    setStatus(id + " at version " + page.doc.version);
  }

  function renderCase(doc) {
    document.title = "auditflow · " + doc.case_id;
    $("case-id").textContent = doc.case_id;
    $("case-state").textContent = doc.state.replace(/_/g, " ");
    $("case-state").dataset.state = doc.state;
    $("case-priority").textContent = doc.priority;
    $("case-subject").textContent = (doc.subject.bank || "") + "/" + doc.subject.account;
    $("case-assignee").textContent = doc.assignee || "nobody yet";
    $("case-due").textContent = doc.due;
    $("case-opened").textContent = timeText(doc.opened_at);
    $("case-version").textContent = String(doc.version);
    renderAlerts(doc);
    renderProposal(doc);
    const notes = doc.timeline.filter((e) => e.kind === "noted");
    $("notes").replaceChildren(...(notes.length ? [] : [el("li", "none", { class: "hint" })]), ...notes.map((e) => {
      const li = el("li");
      li.append(el("span", e.actor + ", " + timeText(e.at) + ": ", { class: "who" }),
                el("span", String(e.text), { class: "note-text" }));
      return li;
    }));
    renderAttachments(doc);
    $("timeline").replaceChildren(...doc.timeline.map((e) => {
      const tr = row([e.seq, timeText(e.at), e.actor + " (" + e.role + ")", e.line]);
      tr.dataset.kind = e.kind;
      return tr;
    }));
    renderActions(doc);
    showEvidence(doc);
  }

  function renderAlerts(doc) {
    $("alert-rows").replaceChildren(...doc.alerts.map((a) => {
      const link = el("a", a.alert_id, { href: "index.html#alert=" + encodeURIComponent(a.alert_id), class: "alert-link" });
      return row([link, timeText(a.time), centsText(a.usd_cents), a.tier || "–",
        typeof a.score === "number" ? a.score.toFixed(2) : "", (a.typologies || []).join(", ") || "–"]);
    }));
  }

  function categoryText(doc, pair) {
    const c = (doc.sar_categories || []).find((x) => x.type_id === pair[0] && x.subtype_id === pair[1]);
    return pair[0] + "/" + pair[1] + (c ? " " + c.text : "");
  }

  function renderProposal(doc) {
    const box = $("proposal");
    box.replaceChildren();
    const p = doc.proposal;
    if (!p) {
      box.append(el("p", doc.state === "investigating" && doc.reason ? "none (the last one was sent back: " + doc.reason + ")"
                                                                    : "none", { class: "hint" }));
      return;
    }
    box.append(el("p", "proposed by " + p.by + " at " + timeText(p.at) + (doc.approved_by ? "; approved by " + doc.approved_by : ""),
                  { id: "proposal-by" }));
    box.append(el("pre", p.narrative, { id: "proposal-narrative" }));
    const ul = el("ul", null, { id: "proposal-categories" });
    for (const c of p.categories) ul.append(el("li", categoryText(doc, c)));
    box.append(ul);
    box.append(el("p", "covers " + p.alert_ids.join(", ")));
    if (doc.filed) box.append(el("p", "filed by " + doc.filed.by + " at " + timeText(doc.filed.at) + ": " +
      doc.filed.file_name + ", sha256 " + doc.filed.xml_sha256, { id: "proposal-filed" }));
  }

  function renderAttachments(doc) {
    $("attachments").replaceChildren(...(doc.attachments.length ? [] : [el("li", "none", { class: "hint" })]),
                                     ...doc.attachments.map((a) => {
      const li = el("li");
      const b = el("button", a.name, { type: "button", class: "link" });
      b.addEventListener("click", () => runDownload("GET", "cases/" + encodeURIComponent(doc.case_id) + "/attachments/" + a.sha256,
                                                    undefined, a.name));
      li.append(b, " " + a.size.toLocaleString("en-US") + " bytes, by " + a.by + ", sha256 " + a.sha256.slice(0, 16) + "…");
      return li;
    }));
  }

  // -- the actions the document allows

  /** One action's form: its fields, its button; sending it posts the action at the version shown. */
  function actionForm(action, title, fields, label, payload) {
    const form = el("form", null, { id: "form-" + action, class: "action", autocomplete: "off" });
    form.append(el("h3", title));
    for (const f of fields) form.append(f);
    const button = el("button", label, { type: "submit", id: "action-" + action });
    form.append(button);
    form.addEventListener("submit", (evt) => {
      evt.preventDefault();
      act(action, payload());
    });
    return form;
  }

  function textField(id, label, rows) {
    const l = el("label", label);
    l.append(el("textarea", null, { id: id, rows: String(rows || 2), required: "" }));
    return l;
  }

  function renderActions(doc) {
    const box = $("case-actions");
    box.replaceChildren();
    const allowed = new Set(doc.allowed);
    const forms = [];
    if (allowed.has("assign")) {
      const me = el("button", "Assign to me", { type: "button", id: "action-assign-me" });
      me.addEventListener("click", () => act("assign", {}));
      const form = el("form", null, { id: "form-assign", class: "action", autocomplete: "off" });
      form.append(el("h3", "Assign"), me);
      if (page.me && page.me.role === "approver") {  // an analyst assigns a case to themself only
        const l = el("label", "or to ");
        l.append(el("input", null, { id: "assign-to", type: "text", size: "12", placeholder: "user name", required: "" }));
        form.append(l, el("button", "Assign", { type: "submit", id: "action-assign-to" }));
        form.addEventListener("submit", (evt) => { evt.preventDefault(); act("assign", { assignee: $("assign-to").value.trim() }); });
      } else {
        form.addEventListener("submit", (evt) => evt.preventDefault());
      }
      forms.push(form);
    }
    if (allowed.has("start")) forms.push(actionForm("start", "Investigate", [], "Start", () => ({})));
    if (allowed.has("escalate")) {
      forms.push(actionForm("escalate", "Escalate", [textField("escalate-reason", "Why ")], "Escalate",
                            () => ({ reason: $("escalate-reason").value })));
    }
    if (allowed.has("propose")) forms.push(proposeForm(doc));
    if (allowed.has("close")) {
      forms.push(actionForm("close", "Close with no SAR", [textField("close-reason", "Why no SAR is filed ")], "Close",
                            () => ({ reason: $("close-reason").value })));
    }
    if (allowed.has("approve")) forms.push(actionForm("approve", "Approve the proposed SAR", [], "Approve", () => ({})));
    if (allowed.has("reject")) {
      forms.push(actionForm("reject", "Send the proposal back", [textField("reject-reason", "What it lacks ")], "Reject",
                            () => ({ reason: $("reject-reason").value })));
    }
    if (allowed.has("file")) {
      const form = el("form", null, { id: "form-export", class: "action" });
      form.append(el("h3", "File the approved SAR"),
                  el("p", "Exporting the XML files it (an entry in the case's log).", { class: "hint" }),
                  el("button", "Export SAR", { type: "submit", id: "action-export" }));
      form.addEventListener("submit", (evt) => { evt.preventDefault(); exportSar(); });
      forms.push(form);
    }
    if (allowed.has("reopen")) {
      forms.push(actionForm("reopen", "Reopen", [textField("reopen-reason", "Why ")], "Reopen",
                            () => ({ reason: $("reopen-reason").value })));
    }
    if (allowed.has("note")) {
      forms.push(actionForm("note", "Add a note", [textField("note-text", "", 3)], "Add note",
                            () => ({ text: $("note-text").value })));
    }
    if (doc.filed) {
      const form = el("form", null, { id: "form-sar", class: "action" });
      const b = el("button", "Download the filed SAR", { type: "button", id: "action-download-sar" });
      b.addEventListener("click", () => runDownload("GET", "cases/" + encodeURIComponent(doc.case_id) + "/sar.xml",
                                                    undefined, doc.case_id + ".sar.xml"));
      form.append(el("h3", "Filed SAR"), b);
      forms.push(form);
    }
    const who = page.me ? page.me.name + " (" + page.me.role + ")" : "you";
    box.append(el("p", forms.length ? who + " may:" : who + " may do nothing on this case now", { id: "allowed-summary" }));
    box.append(...forms);
  }

  function proposeForm(doc) {
    const cats = el("fieldset", null, { id: "propose-categories" });
    cats.append(el("legend", "Activity categories (FinCEN; the evidence's suggestions ticked)"));
    for (const c of doc.sar_categories || []) {
      const l = el("label");
      const box = el("input", null, { type: "checkbox", id: "propose-category-" + c.type_id + "-" + c.subtype_id,
                                      "data-type": String(c.type_id), "data-subtype": String(c.subtype_id) });
      box.checked = !!c.suggested;
      l.append(box, " " + c.code + " " + c.text);
      cats.append(l);
    }
    const alerts = el("fieldset", null, { id: "propose-alerts" });
    alerts.append(el("legend", "Alerts it covers"));
    for (const a of doc.alerts) {
      const l = el("label");
      const box = el("input", null, { type: "checkbox", "data-alert": a.alert_id, id: "propose-alert-" + a.alert_id });
      box.checked = true;
      l.append(box, " " + a.alert_id);
      alerts.append(l);
    }
    return actionForm("propose", "Propose a SAR", [textField("propose-narrative", "Narrative ", 6), cats, alerts],
      "Propose SAR", () => ({
        narrative: $("propose-narrative").value,
        categories: Array.from(cats.querySelectorAll("input:checked")).map((b) => [Number(b.dataset.type), Number(b.dataset.subtype)]),
        alert_ids: Array.from(alerts.querySelectorAll("input:checked")).map((b) => b.dataset.alert),
      }));
  }

  /** Post ``action`` at the version shown; a 409 shows why and reloads the case. */
  async function act(action, payload) {
    const doc = page.doc;
    if (!doc) return;
    setStatus(action + " " + doc.case_id + "…");
    try {
      const r = await call("POST", "cases/" + encodeURIComponent(doc.case_id) + "/" + action, null,
                           Object.assign({}, payload, { expected_version: doc.version }));
      const body = await r.json();
      clearError();
      page.doc = body.case;
      renderCase(page.doc);
      setStatus(body.entry.line + " (" + body.entry.actor + "); now " + page.doc.state.replace(/_/g, " ") +
                ", version " + page.doc.version + "; log entry " + body.log_index + ", signed tree head " +
                body.tree_head.tree_size);
    } catch (e) {
      await refused(e);
    }
  }

  async function refused(e) {
    showError(e.message);
    if (e.status === 409) {  // the case moved on (or does not allow this now): show it as it is
      const message = e.message;
      await loadCase();
      showError(message + " — the case was reloaded");
    } else {
      setStatus("refused");
    }
  }

  async function exportSar() {
    const doc = page.doc;
    setStatus("exporting the SAR of " + doc.case_id + "…");
    try {
      const got = await download("POST", "cases/" + encodeURIComponent(doc.case_id) + "/export-sar",
                                 { expected_version: doc.version }, doc.case_id + ".sar.xml");
      clearError();
      await loadCase();
      setStatus("SAR exported and filed: " + got.name + " (" + got.bytes + " bytes, sha256 " + got.sha256 + ")");
    } catch (e) {
      await refused(e);
    }
  }

  async function runDownload(method, path, body, name) {
    try {
      const got = await download(method, path, body, name);
      clearError();
      setStatus("downloaded " + got.name + " (" + got.bytes + " bytes)");
    } catch (e) {
      showError(e.message);
    }
  }

  /** The first alert's evidence graph, drawn by app.js (once per alert). */
  function showEvidence(doc) {
    const first = doc.alerts[0];
    const view = window.auditflowView;
    if (!first) return;
    $("evidence-link").href = "index.html#alert=" + encodeURIComponent(first.alert_id);
    if (!view || page.evidenceOf === first.alert_id) return;
    page.evidenceOf = first.alert_id;
    $("alert").value = first.alert_id;
    view.state.token = page.token;
    view.load();
  }

  function setUpCase() {
    setUpLogin(loadCase);
    window.addEventListener("hashchange", () => { page.evidenceOf = null; clearError(); loadCase(); });
    whoAmI().then((me) => { if (me) loadCase(); });
  }

  if ($("queue")) setUpQueue();
  if ($("case-header")) setUpCase();
  window.auditflowCases = { page: page, loadCase: loadCase, loadQueue: loadQueue, act: act };
})();
