// Small DOM helpers shared by every page. Everything is built with
// createElement/createTextNode: user data (names, reasons, messages) is
// never parsed as markup, and nothing here needs an inline style or script
// (the Content-Security-Policy allows neither).

const SVG_NS = "http://www.w3.org/2000/svg";

function applyAttributes(el, attrs, svg) {
  if (!attrs) return;
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2).toLowerCase(), value);
    } else if (key === "class") {
      if (svg) el.setAttribute("class", value);
      else el.className = value;
    } else if (key === "dataset") {
      for (const [name, data] of Object.entries(value)) el.dataset[name] = data;
    } else if (!svg && (key === "value" || key === "checked" || key === "disabled" ||
                        key === "selected" || key === "hidden" || key === "open")) {
      el[key] = value;
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
}

function appendChildren(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) appendChildren(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

/** h("a", {href, class, onclick}, "text", node, [more]) → an HTML element. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  applyAttributes(el, attrs, false);
  appendChildren(el, children);
  return el;
}

/** The SVG twin of h(). */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  applyAttributes(el, attrs, true);
  appendChildren(el, children);
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

/** Replaces the children of `el` with `children`. */
export function setChildren(el, ...children) {
  clear(el);
  appendChildren(el, children);
  return el;
}

// ---------------------------------------------------------------- statuses

/** The colour family of any status Ember shows (stacks, resources,
 *  clusters, nodes, actions, instances). */
export function statusKind(status) {
  const text = String(status || "").toUpperCase();
  if (!text) return "muted";
  if (text === "DELETE_COMPLETE" || text === "DELETED" || text.startsWith("INIT") ||
      text === "CANCELLED" || text === "SUSPENDED" || text === "SUSPEND_COMPLETE" ||
      text === "STOPPED" || text === "OFF" || text === "RETAINED") return "muted";
  if (text.includes("FAIL") || text === "ERROR" || text === "CRITICAL") return "failed";
  if (text === "ROLLBACK_COMPLETE") return "warn"; // an update that failed and was undone
  if (text.startsWith("LOCK_COMPLETE") || text.includes("WAITING") || text === "WARNING" ||
      text === "WARN" || text === "HELD" || text === "LOCKED") return "warn";
  if (text.includes("IN_PROGRESS") || text === "BUILDING" || text === "CREATING" ||
      text === "DELETING" || text === "UPDATING" || text === "RECOVERING" ||
      text === "RESIZING" || text === "RUNNING" || text === "READY" || text === "REBOOTING" ||
      text === "CHECKING" || text === "OPERATING" || text === "POWERING-ON" ||
      text === "POWERING-OFF" || text === "WAITING") return "progress";
  if (text.includes("COMPLETE") || text === "ACTIVE" || text === "SUCCEEDED" ||
      text === "ON" || text === "INFO") return "ok";
  return "muted";
}

export function isInProgress(status) {
  return /_IN_PROGRESS$/.test(String(status || ""));
}

/** A coloured badge whose text is exactly the status. */
export function badge(status, attrs = {}) {
  const el = h("span", attrs, status || "—");
  el.classList.add("badge", `status-${statusKind(status)}`);
  return el;
}

/** Updates a badge made by badge() in place. */
export function setBadge(el, status) {
  el.textContent = status || "—";
  el.className = el.className.replace(/\bstatus-\w+/g, "").trim();
  el.classList.add("badge", `status-${statusKind(status)}`);
}

// ---------------------------------------------------------------- time

const absoluteFormat = new Intl.DateTimeFormat(undefined, {
  year: "numeric", month: "short", day: "numeric",
  hour: "2-digit", minute: "2-digit", second: "2-digit",
});

export function parseTime(value) {
  if (value === null || value === undefined || value === "") return null;
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  return Number.isNaN(date.getTime()) ? null : date;
}

export function formatAbsolute(value) {
  const date = parseTime(value);
  return date ? absoluteFormat.format(date) : "—";
}

/** "3 min ago", "in 2 h", for a time near now. */
export function formatRelative(value, now = Date.now()) {
  const date = parseTime(value);
  if (!date) return "—";
  const seconds = Math.round((date.getTime() - now) / 1000);
  const abs = Math.abs(seconds);
  let text;
  if (abs < 10) return "just now";
  if (abs < 60) text = `${abs} s`;
  else if (abs < 3600) text = `${Math.round(abs / 60)} min`;
  else if (abs < 86400) text = `${Math.round(abs / 3600)} h`;
  else if (abs < 86400 * 30) text = `${Math.round(abs / 86400)} d`;
  else return absoluteFormat.format(date);
  return seconds < 0 ? `${text} ago` : `in ${text}`;
}

/** A <time> showing the relative time, the exact one on hover. */
export function timeEl(value) {
  const date = parseTime(value);
  if (!date) return h("span", { class: "muted" }, "—");
  return h("time", { datetime: date.toISOString(), title: absoluteFormat.format(date) },
    formatRelative(date));
}

/** "4:05" or "1:02:03" for a number of seconds (negative → 0:00). */
export function formatCountdown(seconds) {
  const total = Math.max(0, Math.floor(seconds));
  const hours = Math.floor(total / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const secs = String(total % 60).padStart(2, "0");
  return hours > 0 ? `${hours}:${String(minutes).padStart(2, "0")}:${secs}` : `${minutes}:${secs}`;
}

// ---------------------------------------------------------------- messages

/** The API's own message of an error (ApiError or anything else). */
export function messageOf(error) {
  if (!error) return "";
  if (typeof error === "string") return error;
  return error.message || String(error);
}

/** An `.error` element (role=alert) with the message; empty = hidden. */
export function errorBox(error, attrs = {}) {
  const el = h("div", { role: "alert", ...attrs });
  el.classList.add("error");
  showError(el, error);
  return el;
}

export function showError(el, error) {
  const message = messageOf(error);
  el.textContent = message;
  el.hidden = !message;
}

export function notice(text, kind = "info") {
  return h("div", { class: `notice notice-${kind}`, role: "status" }, text);
}

// ---------------------------------------------------------------- icons

const ICONS = {
  lock: "M7 10V7a5 5 0 0 1 10 0v3h1a1 1 0 0 1 1 1v9a1 1 0 0 1-1 1H6a1 1 0 0 1-1-1v-9a1 1 0 0 1 1-1h1zm2 0h6V7a3 3 0 0 0-6 0v3z",
  stack: "M12 2 2 7l10 5 10-5-10-5zm-8.6 9.3L2 12l10 5 10-5-1.4-.7L12 14.8 3.4 11.3zm0 5L2 17l10 5 10-5-1.4-.7L12 19.8l-8.6-3.5z",
  cluster: "M4 4h6v6H4V4zm10 0h6v6h-6V4zM4 14h6v6H4v-6zm10 0h6v6h-6v-6z",
  instance: "M3 5a2 2 0 0 1 2-2h14a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2h-6v2h3v2H8v-2h3v-2H5a2 2 0 0 1-2-2V5zm2 0v10h14V5H5z",
  shield: "M12 2 4 5v6c0 5 3.4 9.7 8 11 4.6-1.3 8-6 8-11V5l-8-3z",
  menu: "M3 6h18v2H3V6zm0 5h18v2H3v-2zm0 5h18v2H3v-2z",
  nested: "M4 4h10v2H6v8H4V4zm4 4h12v12H8V8zm2 2v8h8v-8h-8z",
  hook: "M6 4h4v16H6V4zm8 0h4v16h-4V4z",
  admin: "M3 5h9v2H3V5zm13 0h5v2h-5V5zm-3-2h2v6h-2V3zM3 11h3v2H3v-2zm7 0h11v2H10v-2zM7 9h2v6H7V9zm-4 8h11v2H3v-2zm15 0h3v2h-3v-2zm-3-2h2v6h-2v-6z",
};

export function icon(name, label) {
  const attrs = { class: `icon icon-${name}`, viewBox: "0 0 24 24", width: "16", height: "16",
    focusable: "false" };
  if (label) { attrs.role = "img"; attrs["aria-label"] = label; } else attrs["aria-hidden"] = "true";
  const svg = s("svg", attrs, s("path", { d: ICONS[name] || "", fill: "currentColor" }));
  if (label) svg.appendChild(s("title", {}, label));
  return svg;
}

// ---------------------------------------------------------------- forms

let fieldCounter = 0;

/** A labelled field: the label names the input (for=id). */
export function field(labelText, input, hint) {
  if (!input.id) input.id = `field-${++fieldCounter}`;
  return h("div", { class: "field" },
    h("label", { for: input.id }, labelText),
    input,
    hint ? h("div", { class: "hint" }, hint) : null);
}

/** Reads `key=value` lines (blank lines and `#` comments skipped). */
export function parseKeyValues(text) {
  const result = {};
  const lines = String(text || "").split(/\r?\n/);
  lines.forEach((raw, index) => {
    const line = raw.trim();
    if (!line || line.startsWith("#")) return;
    const at = line.indexOf("=");
    if (at <= 0) throw new Error(`line ${index + 1}: expected key=value, got "${line}"`);
    result[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  });
  return result;
}

export function readFileText(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(new Error(`could not read ${file.name}: ${reader.error}`));
    reader.readAsText(file);
  });
}

/** Disables a button while `work` runs; returns what work returns. */
export async function busy(button, work) {
  const was = button.disabled;
  button.disabled = true;
  button.classList.add("is-busy");
  button.setAttribute("aria-busy", "true");
  try {
    return await work();
  } finally {
    button.classList.remove("is-busy");
    button.removeAttribute("aria-busy");
    button.disabled = was;
  }
}

// ---------------------------------------------------------------- "why not"

/**
 * An action button that can say why it is blocked. `verdict` is what an
 * `…/allowed` call answered ({allowed, reason, blockers}); a blocked button
 * is disabled, has the reasons as its title and shows them beside it
 * (`.why-not`), readable without hovering.
 */
export function actionButton({ id, label, onClick, variant = "", title }) {
  const button = h("button", { type: "button", id, class: `btn ${variant}`.trim(), title, onclick: onClick },
    label);
  const why = h("span", { class: "why-not", id: id ? `${id}-why` : undefined, hidden: true });
  const wrap = h("div", { class: "action" }, button, why);
  wrap.button = button;
  wrap.why = why;
  wrap.setVerdict = (verdict) => setVerdict(wrap, verdict);
  if (id) button.setAttribute("aria-describedby", `${id}-why`);
  return wrap;
}

/** An object page's action buttons, by id: one per operation (`{id, label,
 *  form?}`). A click on the operation with `form` opens that form (through
 *  `toggler`); any other runs `run(operation)` with its button busy, and a
 *  failure shows the API's message in `errors` and calls `onFailure` (the
 *  page asks its "allowed?" verdicts again). */
export function actionButtons({ operations, form, toggler, errors, run, onFailure }) {
  const buttons = new Map();
  for (const operation of operations) {
    const wrap = actionButton({ id: operation.id, label: operation.label, onClick: () => {
      showError(errors, "");
      if (operation.form) { toggler.toggle(form); return; }
      busy(wrap.button, async () => {
        try {
          await run(operation);
        } catch (error) {
          if (error.name !== "AbortError") { showError(errors, error); onFailure(); }
        }
      });
    } });
    buttons.set(operation.id, wrap);
  }
  const opening = operations.find((operation) => operation.form);
  if (opening) toggler.add(buttons.get(opening.id).button, form);
  return buttons;
}

export function blockerMessages(verdict) {
  if (!verdict) return [];
  if (verdict.error) return [messageOf(verdict.error)];
  if (verdict.allowed) return [];
  const messages = (verdict.blockers || []).map((b) => b.message).filter(Boolean);
  if (!messages.length && verdict.reason) messages.push(verdict.reason);
  if (!messages.length) messages.push("not allowed now");
  return [...new Set(messages)];
}

/** verdict: undefined = unknown (enabled), {allowed:true}, {allowed:false,…},
 *  or {error} when asking failed (left enabled: the call will say). */
export function setVerdict(wrap, verdict) {
  const { button, why } = wrap;
  const blocked = verdict && !verdict.error && verdict.allowed === false;
  const messages = blockerMessages(verdict);
  button.disabled = Boolean(blocked) || Boolean(wrap.forceDisabled);
  if (blocked) {
    button.title = messages.join("\n");
    why.textContent = messages.join(" · ");
    why.hidden = false;
    why.classList.toggle("why-break-glass", Boolean(verdict.break_glass_would_pass));
  } else if (verdict && verdict.error) {
    button.removeAttribute("title");
    why.textContent = `could not ask whether this is allowed: ${messages[0]}`;
    why.hidden = false;
  } else {
    button.removeAttribute("title");
    why.textContent = "";
    why.hidden = true;
  }
  wrap.classList.toggle("is-blocked", Boolean(blocked));
}

// ---------------------------------------------------------------- tables

/**
 * A keyed table that updates in place. `columns` is data: each has a
 * `label`, a `cell(row)` returning a Node or text, and optionally `key(row)`
 * — a string that changes exactly when the cell must be redrawn (default:
 * the text the cell shows) — and `className`. A new field is one entry.
 *
 * update(rows) adds, moves, redraws and removes rows by `rowKey(row)`,
 * touching only what changed, so a poll never rebuilds a table.
 */
export function keyedTable({ id, columns, rowKey, rowAttr, rowAttrValue, empty = "Nothing here yet.", caption,
                             onRow, rowClass }) {
  const thead = h("thead", {}, h("tr", {}, columns.map((c) =>
    h("th", { scope: "col", class: c.className }, c.label))));
  const tbody = h("tbody");
  const table = h("table", { id, class: "table" }, caption ? h("caption", { class: "sr-only" }, caption) : null,
    thead, tbody);
  const emptyRow = h("tr", { class: "empty-row" },
    h("td", { colspan: String(columns.length) }, empty));
  const rows = new Map(); // key → {tr, keys: []}
  const wrap = h("div", { class: "table-wrap" }, table);

  function cellKey(column, row) {
    if (column.key) return column.key(row);
    const value = column.cell(row);
    return value instanceof Node ? value.textContent : String(value ?? "");
  }

  function fillCell(td, column, row) {
    clear(td);
    const value = column.cell(row);
    appendChildren(td, [value instanceof Node || value === null || value === undefined ? value : String(value)]);
  }

  function makeRow(key, row) {
    const tr = h("tr");
    if (rowAttr) tr.setAttribute(`data-${rowAttr}`, rowAttrValue ? rowAttrValue(row) : key);
    const keys = columns.map((column) => {
      const td = h("td", { class: column.className });
      if (column.label) td.dataset.label = column.label;
      fillCell(td, column, row);
      tr.appendChild(td);
      return column.key ? column.key(row) : td.textContent;
    });
    if (rowClass) tr.className = rowClass(row) || "";
    if (onRow) onRow(tr, row);
    return { tr, keys, row };
  }

  function update(list) {
    const seen = new Set();
    const fragment = document.createDocumentFragment();
    const order = [];
    for (const row of list) {
      const key = String(rowKey(row));
      if (seen.has(key)) continue;
      seen.add(key);
      let entry = rows.get(key);
      if (!entry) {
        entry = makeRow(key, row);
        rows.set(key, entry);
      } else {
        columns.forEach((column, index) => {
          const next = cellKey(column, row);
          if (next !== entry.keys[index]) {
            fillCell(entry.tr.children[index], column, row);
            entry.keys[index] = column.key ? next : entry.tr.children[index].textContent;
          }
        });
        if (rowClass) entry.tr.className = rowClass(row) || "";
        entry.row = row;
      }
      order.push(entry.tr);
    }
    for (const [key, entry] of rows) {
      if (!seen.has(key)) { entry.tr.remove(); rows.delete(key); }
    }
    // Put rows in order, moving only those out of place (a fresh table:
    // one fragment, one insertion).
    if (!tbody.firstChild || tbody.firstChild === emptyRow) {
      emptyRow.remove();
      for (const tr of order) fragment.appendChild(tr);
      tbody.appendChild(fragment);
    } else {
      let cursor = tbody.firstChild;
      for (const tr of order) {
        if (tr === cursor) { cursor = cursor.nextSibling; continue; }
        tbody.insertBefore(tr, cursor);
      }
    }
    if (!order.length && !emptyRow.parentNode) tbody.appendChild(emptyRow);
    else if (order.length && emptyRow.parentNode) emptyRow.remove();
    return order.length;
  }

  tbody.appendChild(emptyRow);
  return { el: wrap, table, tbody, update, rows, setEmpty: (text) => { emptyRow.firstChild.textContent = text; } };
}

/** A definition list from [label, value] pairs (value: text or Node). */
export function detailList(pairs, attrs = {}) {
  const dl = h("dl", { class: "details", ...attrs });
  for (const [label, value] of pairs) {
    if (value === undefined) continue;
    dl.appendChild(h("dt", {}, label));
    dl.appendChild(h("dd", {}, value === null || value === "" ? h("span", { class: "muted" }, "—") : value));
  }
  return dl;
}

/** Pretty JSON in a <pre>, or the text itself. */
export function jsonBlock(value, attrs = {}) {
  const text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  return h("pre", { class: "code", ...attrs }, text);
}

// ---------------------------------------------------------------- tabs

/**
 * Tabs as buttons (role=tab) over panels that all stay in the document
 * (hidden when not selected), so each panel keeps its state and ids.
 * tabs: [{id, label, panel}] → {el, select(id), onChange}
 */
export function tabs(list, { initial, onChange } = {}) {
  const bar = h("div", { class: "tabs", role: "tablist" });
  const panels = h("div", { class: "tab-panels" });
  const buttons = new Map();
  function select(id, focus) {
    for (const tab of list) {
      const on = tab.id === id;
      const button = buttons.get(tab.id);
      button.setAttribute("aria-selected", on ? "true" : "false");
      button.tabIndex = on ? 0 : -1;
      tab.panel.hidden = !on;
      if (on && focus) button.focus();
    }
    if (onChange) onChange(id);
  }
  list.forEach((tab, index) => {
    const button = h("button", { type: "button", role: "tab", id: `tab-${tab.id}`, class: "tab",
      "aria-controls": `panel-${tab.id}`, onclick: () => select(tab.id) }, tab.label);
    button.addEventListener("keydown", (event) => {
      const step = event.key === "ArrowRight" ? 1 : event.key === "ArrowLeft" ? -1 : 0;
      if (!step) return;
      event.preventDefault();
      select(list[(index + step + list.length) % list.length].id, true);
    });
    buttons.set(tab.id, button);
    bar.appendChild(button);
    tab.panel.id = `panel-${tab.id}`;
    tab.panel.setAttribute("role", "tabpanel");
    tab.panel.setAttribute("aria-labelledby", `tab-${tab.id}`);
    tab.panel.classList.add("tab-panel");
    panels.appendChild(tab.panel);
  });
  select(initial || list[0].id);
  return { el: h("div", { class: "tabset" }, bar, panels), select, buttons };
}

/** A lock banner for a stack's stack_lock, a cluster's maintenance_lock
 *  or an instance's lock fields: holder, reason, level, since, expiry. */
export function lockBanner(lock, { what = "This", extra } = {}) {
  if (!lock) return h("div", { class: "lock-banner-none", hidden: true });
  const who = lock.locked_by_user || lock.holder || "someone";
  const role = lock.locked_by_role ? ` (${lock.locked_by_role})` : "";
  const parts = [
    h("strong", {}, `${what} is locked`),
    lock.level ? h("span", { class: "lock-level" }, ` at level ${lock.level}`) : null,
    " by ", h("span", { class: "lock-holder" }, `${who}${role}`),
    lock.locked_at ? [" since ", timeEl(lock.locked_at)] : null,
    lock.expires_at ? [" · expires ", timeEl(lock.expires_at)] : null,
  ];
  return h("div", { id: "lock-banner", class: "banner banner-warn", role: "status" },
    icon("lock"),
    h("div", {},
      h("div", {}, parts),
      lock.reason ? h("div", { class: "lock-reason" }, `Reason: ${lock.reason}`) : null,
      extra || null));
}

/** Runs `task` every `ms` while the document is visible, one at a time,
 *  until `signal` aborts. Returns {now()} to run it at once. */
export function poll(task, ms, signal) {
  let timer = null;
  let running = false;
  let stopped = false;
  async function tick() {
    timer = null;
    if (stopped) return;
    if (document.visibilityState === "visible" && !running) {
      running = true;
      try { await task(); } catch (error) { if (!signal.aborted) console.warn(error); }
      running = false;
    }
    if (!stopped) timer = setTimeout(tick, typeof ms === "function" ? ms() : ms);
  }
  const onVisible = () => {
    if (document.visibilityState === "visible" && !running && !stopped) {
      clearTimeout(timer);
      tick();
    }
  };
  document.addEventListener("visibilitychange", onVisible);
  signal.addEventListener("abort", () => {
    stopped = true;
    clearTimeout(timer);
    document.removeEventListener("visibilitychange", onVisible);
  });
  timer = setTimeout(tick, typeof ms === "function" ? ms() : ms);
  return {
    now() {
      if (stopped) return;
      clearTimeout(timer);
      tick();
    },
  };
}

/**
 * The maintenance-lock form stacks, clusters and instances share: a reason
 * (#lock-reason), a level when the object has levels (#lock-level), an
 * expiry (#lock-expires) and #lock-submit. `onSubmit({reason, level,
 * expires_in})` throws to show the API's message in #lock-error.
 */
export function lockForm({ title = "Lock for maintenance", levels, onSubmit, onCancel }) {
  const reasonInput = h("input", { id: "lock-reason", required: true, maxlength: "255", autocomplete: "off",
    placeholder: "db maintenance" });
  const level = levels ? h("select", { id: "lock-level" },
    levels.map(([value, label]) => h("option", { value }, label))) : null;
  const expires = h("select", { id: "lock-expires" },
    [["", "never"], ["3600", "in 1 hour"], ["14400", "in 4 hours"], ["86400", "in 1 day"], ["604800", "in 1 week"]]
      .map(([value, label]) => h("option", { value }, label)));
  const submit = h("button", { type: "submit", id: "lock-submit", class: "btn btn-primary" }, "Lock");
  const error = errorBox("", { id: "lock-error" });
  const form = h("form", { class: "card form-card", id: "lock-form", "aria-label": title, novalidate: true,
    onsubmit: (event) => {
      event.preventDefault();
      showError(error, "");
      const reason = reasonInput.value.trim();
      if (!reason) { showError(error, "Say why it is locked (1–255 characters)."); reasonInput.focus(); return; }
      const request = { reason };
      if (level) request.level = level.value;
      if (expires.value) request.expires_in = Number(expires.value);
      busy(submit, async () => {
        try {
          await onSubmit(request);
          form.hidden = true;
          reasonInput.value = "";
        } catch (failure) {
          if (failure.name !== "AbortError") showError(error, failure);
        }
      });
    } },
  h("h2", {}, title),
  h("div", { class: "form-grid" }, field("Reason", reasonInput), level ? field("Level", level) : null,
    field("Expires", expires)),
  error,
  h("div", { class: "form-actions" }, submit,
    h("button", { type: "button", class: "btn btn-quiet", onclick: onCancel }, "Cancel")));
  return form;
}

/** Toggles inline forms opened by buttons: only one open at a time. */
export function formToggler() {
  const entries = [];
  return {
    add(button, form) {
      form.hidden = true;
      button.setAttribute("aria-expanded", "false");
      button.setAttribute("aria-controls", form.id || "");
      entries.push({ button, form });
    },
    close() {
      for (const entry of entries) {
        entry.form.hidden = true;
        entry.button.setAttribute("aria-expanded", "false");
      }
    },
    toggle(form) {
      for (const entry of entries) {
        const open = entry.form === form && entry.form.hidden;
        entry.form.hidden = !open;
        entry.button.setAttribute("aria-expanded", open ? "true" : "false");
        if (open) {
          const first = entry.form.querySelector("input, select, textarea, button.btn-danger");
          if (first) first.focus();
        }
      }
    },
  };
}
