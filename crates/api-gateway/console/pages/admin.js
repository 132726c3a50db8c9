// #/admin: what an operator looks after — the lifecycle plug-ins with
// their circuit breakers, a project's quota, and the audit trail of locks,
// refusals and break-glass. The API decides who may: a member who opens
// the page sees its 403 message where the plug-ins would be, and reads
// (but cannot change) their own project's quota and records.

import {
  h, timeEl, keyedTable, field, errorBox, showError, busy, poll, formatCountdown, formatAbsolute, parseTime,
} from "../ui.js";
import { api, heat, withQuery, seg, stackRoute } from "../api.js";

const PLUGIN_POLL = 5000;
const AUDIT_PAGE = 50;

/** A plug-in circuit's state → the colour it shows. */
const CIRCUIT_KIND = { CLOSED: "ok", HALF_OPEN: "warn", OPEN: "failed" };

/** An audit record's outcome → the colour it shows. */
const OUTCOME_KIND = { accepted: "ok", refused: "failed", expired: "muted", broke_glass: "warn", observed: "progress" };

/** The audit trail's filters (value "" = any). */
const TARGET_TYPES = [["", "Any type"], ["stack", "stack"], ["cluster", "cluster"], ["node", "node"], ["instance", "instance"]];
const OUTCOMES = [["", "Any outcome"], ["accepted", "accepted"], ["refused", "refused"], ["expired", "expired"],
  ["broke_glass", "broke_glass"], ["observed", "observed"]];
const SINCE = [["", "Any time"], ["3600", "Last hour"], ["86400", "Last 24 hours"], ["604800", "Last 7 days"],
  ["2592000", "Last 30 days"]];

function kindBadge(text, kind, attrs = {}) {
  const el = h("span", attrs, text || "—");
  el.classList.add("badge", `status-${kind || "muted"}`);
  return el;
}

function options(list) {
  return list.map(([value, label]) => h("option", { value }, label));
}

/** "all" in muted text for an empty filter list, else the list. */
function listOrAll(list, what) {
  return list && list.length ? list.join(", ") : h("span", { class: "muted", title: `every ${what}` }, "all");
}

/** The countdown's text to `at` (a circuit's open_until). */
function untilText(at) {
  const left = (at.getTime() - Date.now()) / 1000;
  return left <= 0 ? "cool-down over: the next operation probes" : `probe in ${formatCountdown(left)}`;
}

export async function render(ctx) {
  const { root, session } = ctx;
  const isAdmin = (session.roles || []).includes("admin");
  document.title = "Admin · Ember";

  root.append(
    h("div", { class: "page-header" }, h("div", {}, h("h1", {}, "Admin"),
      h("p", { class: "muted" }, "Lifecycle plug-ins and their circuits, quotas, and the audit trail. ",
        isAdmin ? "Changes here are made as " : "Changing anything here needs the admin role; you are ",
        h("strong", {}, session.user || session.userId || "unknown"), "."))),
    pluginSection(ctx),
    quotaSection(ctx, isAdmin),
    auditSection(ctx, isAdmin));
}

// ---------------------------------------------------------------- plug-ins

function pluginSection(ctx) {
  const { signal } = ctx;
  let plugins = [];
  const loadError = errorBox("", { id: "plugins-error" });
  const actionError = errorBox("", { id: "plugin-action-error" });
  const notice = h("div", { class: "action-notice", role: "status", "aria-live": "polite" });
  const count = h("span", { class: "muted small card-subtitle", "aria-live": "polite" });

  /** PATCHes one plug-in and shows what the registry answered. */
  async function change(plugin, button, body, label) {
    await busy(button, async () => {
      showError(actionError, "");
      try {
        const answer = await api(`${heat()}/plugins/${seg(plugin.name)}`, { method: "PATCH", body: { plugin: body }, signal });
        const next = answer && answer.plugin;
        if (next) plugins = plugins.map((p) => (p.name === next.name ? next : p));
        table.update(plugins);
        notice.textContent = `${plugin.name}: ${label}.`;
        setTimeout(() => { if (notice.textContent.startsWith(`${plugin.name}: ${label}`)) notice.textContent = ""; }, 4000);
        tick();
      } catch (error) {
        if (error.name !== "AbortError") showError(actionError, `${plugin.name}: ${error.message}`);
      }
    });
  }

  /** The columns, in the registry's calling order. A new field is one entry. */
  const columns = [
    { label: "Order", className: "num", key: (p) => String(p.ordinal), cell: (p) => String(p.ordinal) },
    {
      label: "Plug-in", className: "col-plugin", key: (p) => `${p.name}|${p.endpoint}`,
      cell: (p) => h("div", { class: "cell-stack" }, h("span", { class: "strong plugin-name" }, p.name),
        h("span", { class: "mono muted plugin-endpoint" }, p.endpoint)),
    },
    {
      label: "Applies to", key: (p) => JSON.stringify([p.operations, p.project_ids]),
      cell: (p) => h("div", { class: "cell-stack" },
        h("span", { class: "plugin-operations" }, h("span", { class: "muted" }, "operations: "), listOrAll(p.operations, "operation")),
        h("span", { class: "plugin-projects" }, h("span", { class: "muted" }, "projects: "), listOrAll(p.project_ids, "project"))),
    },
    {
      label: "On failure", key: (p) => `${p.failure_mode}|${p.timeout_ms}`,
      cell: (p) => h("div", { class: "cell-stack" },
        h("span", { class: `plugin-failure-mode mode-${p.failure_mode}`,
          title: p.failure_mode === "warn" ? "a failure is recorded and the chain goes on" : "a failure stops the operation" },
        p.failure_mode),
        h("span", { class: "muted plugin-timeout" }, `timeout ${p.timeout_ms} ms`)),
    },
    {
      label: "Enabled", key: (p) => String(p.enabled),
      cell: (p) => h("div", { class: "cell-stack" },
        h("span", { class: `plugin-enabled ${p.enabled ? "text-ok" : "muted"}` }, p.enabled ? "enabled" : "disabled"),
        h("button", { type: "button", class: "btn btn-small plugin-enable", "aria-pressed": p.enabled ? "true" : "false",
          title: p.enabled ? "Stop calling this plug-in" : "Call this plug-in again",
          onclick: (event) => change(p, event.currentTarget, { enabled: !p.enabled }, p.enabled ? "disabled" : "enabled") },
        p.enabled ? "Disable" : "Enable")),
    },
    {
      label: "Enforce", key: (p) => String(p.enforce),
      cell: (p) => h("div", { class: "cell-stack" },
        h("span", { class: `plugin-mode ${p.enforce ? "" : "text-progress"}`.trim(),
          title: p.enforce ? "its verdicts stop operations" : "called and recorded, never enforced" },
        p.enforce ? "enforce" : "observe"),
        h("button", { type: "button", class: "btn btn-small plugin-enforce", "aria-pressed": p.enforce ? "true" : "false",
          title: p.enforce ? "Observe: record its verdicts without stopping anything" : "Enforce its verdicts from the next operation",
          onclick: (event) => change(p, event.currentTarget, { enforce: !p.enforce }, p.enforce ? "observe mode" : "enforced") },
        p.enforce ? "Observe" : "Enforce")),
    },
    {
      label: "Circuit", className: "col-circuit", key: (p) => JSON.stringify(p.circuit || null),
      cell: (p) => {
        const c = p.circuit || {};
        const state = c.state || "CLOSED";
        const until = parseTime(c.open_until);
        return h("div", { class: "cell-stack circuit" },
          h("span", { class: "circuit-head" },
            kindBadge(state, CIRCUIT_KIND[state] || "muted", { class: "circuit-state" }),
            h("span", { class: "circuit-failures muted" },
              `${c.consecutive_failures || 0} consecutive failure${c.consecutive_failures === 1 ? "" : "s"}`)),
          c.opened_at ? h("span", { class: "circuit-opened" }, h("span", { class: "muted" }, "opened "), timeEl(c.opened_at)) : null,
          until && state !== "CLOSED"
            ? h("span", { class: "countdown circuit-until", "data-until": until.toISOString(),
              title: `open until ${formatAbsolute(until)}` }, untilText(until))
            : null,
          c.last_failure ? h("span", { class: "circuit-last small" }, h("span", { class: "muted" }, "last failure: "), c.last_failure) : null,
          state !== "CLOSED"
            ? h("button", { type: "button", class: "btn btn-small btn-warn plugin-close-circuit",
              title: "Call the plug-in again from the next operation (once it is mended)",
              onclick: (event) => change(p, event.currentTarget, { close_circuit: true }, "circuit closed") }, "Close circuit")
            : null);
      },
    },
  ];
  const table = keyedTable({ id: "plugins", columns, rowKey: (p) => p.name, rowAttr: "plugin",
    empty: "Loading plug-ins…", caption: "Lifecycle plug-ins, in calling order",
    rowClass: (p) => [p.enabled ? "" : "is-disabled", `circuit-${String((p.circuit && p.circuit.state) || "CLOSED").toLowerCase()}`]
      .filter(Boolean).join(" ") });
  table.table.classList.add("table-stacked");

  function tick() {
    for (const el of table.table.querySelectorAll(".countdown[data-until]")) {
      const text = untilText(new Date(el.dataset.until));
      if (el.textContent !== text) el.textContent = text;
    }
  }
  const ticker = setInterval(tick, 1000);
  ctx.onDispose(() => clearInterval(ticker));

  let forbidden = false;
  async function load() {
    if (forbidden) return;
    try {
      const body = await api(`${heat()}/plugins`, { signal });
      plugins = body.plugins || [];
      table.update(plugins);
      table.setEmpty("No plug-in is registered. Register one with `ember plugin register`.");
      const open = plugins.filter((p) => p.circuit && p.circuit.state !== "CLOSED").length;
      count.textContent = `${plugins.length} registered${open ? `, ${open} circuit${open === 1 ? "" : "s"} not closed` : ""}`;
      showError(loadError, "");
      table.el.hidden = false;
    } catch (error) {
      if (error.name === "AbortError") throw error;
      // A member's 403 will not change while the page is open: say it once.
      if (error.status === 403) forbidden = true;
      table.el.hidden = forbidden;
      plugins = [];
      table.update(plugins);
      table.setEmpty(error.status === 403 ? "Only an admin sees the plug-ins." : "The plug-ins could not be listed.");
      count.textContent = "";
      showError(loadError, error);
    }
  }
  load().catch(() => {});
  poll(load, PLUGIN_POLL, signal);

  return h("section", { id: "admin-plugins", class: "card card-flush admin-section", "aria-labelledby": "plugins-title" },
    h("div", { class: "card-title" }, h("h2", { id: "plugins-title" }, "Lifecycle plug-ins"),
      h("span", { class: "muted small card-subtitle" }, "in calling order · refreshed every 5 s"), count),
    loadError, actionError, notice, table.el);
}

// ---------------------------------------------------------------- quotas

function quotaSection(ctx, isAdmin) {
  const { signal, session } = ctx;
  let shownProject = "";
  const projectInput = h("input", { id: "quota-project", value: session.projectId || "", autocomplete: "off",
    spellcheck: "false", placeholder: "project id" });
  const loadButton = h("button", { type: "submit", id: "quota-load", class: "btn" }, "Show");
  const error = errorBox("", { id: "quotas-error" });
  const notice = h("div", { id: "quotas-notice", class: "action-notice", role: "status", "aria-live": "polite" });
  const heading = h("span", { class: "muted small card-subtitle", id: "quota-shown" });

  function quotaPath(project) {
    return `/orchestration/v1/${seg(project)}/quotas`;
  }

  function said(text) {
    notice.textContent = text;
    setTimeout(() => { if (notice.textContent === text) notice.textContent = ""; }, 5000);
  }

  /** PUTs one change to the shown project's quota and shows the answer. */
  async function put(button, change, text) {
    await busy(button, async () => {
      showError(error, "");
      try {
        const body = await api(quotaPath(shownProject), { method: "PUT", body: { quota: change }, signal });
        show(body);
        said(text);
      } catch (failure) {
        if (failure.name !== "AbortError") showError(error, failure);
      }
    });
  }

  function saveLimit(limit, input, button) {
    const text = input.value.trim();
    const value = Number(text);
    if (!text || !Number.isInteger(value)) {
      showError(error, `${limit.name}: give the limit as a whole number.`);
      input.focus();
      return;
    }
    put(button, { limits: { [limit.name]: value } }, `${limit.name}: set to ${value} for project ${shownProject}.`);
  }

  const columns = [
    { label: "Limit", className: "mono", key: (l) => l.name, cell: (l) => l.name },
    {
      label: "Value", className: isAdmin ? "quota-limit-cell" : "num", key: (l) => `${l.limit}|${l.overridden}`,
      cell: (l) => {
        if (!isAdmin) return h("span", { class: "quota-limit" }, String(l.limit));
        const input = h("input", { type: "number", step: "1", class: "quota-value input-narrow", value: String(l.limit),
          inputmode: "numeric", "aria-label": `Limit for ${l.name}` });
        const save = h("button", { type: "button", class: "btn btn-small quota-save",
          onclick: () => saveLimit(l, input, save) }, "Save");
        input.addEventListener("keydown", (event) => {
          if (event.key === "Enter") { event.preventDefault(); saveLimit(l, input, save); }
        });
        return h("span", { class: "quota-edit" }, input, save);
      },
    },
    {
      label: "Used", className: "num", key: (l) => String(l.used ?? ""),
      cell: (l) => (l.used === null || l.used === undefined ? "" : h("span", { class: "quota-used" }, String(l.used))),
    },
    {
      label: "Source", key: (l) => String(Boolean(l.overridden)),
      cell: (l) => h("span", { class: "quota-source" },
        l.overridden ? h("span", { class: "strong" }, "set for this project") : h("span", { class: "muted" }, "default"),
        isAdmin && l.overridden
          ? h("button", { type: "button", class: "btn btn-small btn-quiet quota-reset",
            title: "Back to the configured default",
            onclick: (event) => put(event.currentTarget, { reset: [l.name] }, `${l.name}: back to the default for project ${shownProject}.`) },
          "Reset to default")
          : null),
    },
  ];
  const table = keyedTable({ id: "quotas", columns, rowKey: (l) => l.name, rowAttr: "limit",
    empty: "Loading the quota…", caption: "The project's limits" });
  table.table.classList.add("table-stacked");

  function show(body) {
    const quota = (body && body.quota) || {};
    shownProject = quota.project_id || shownProject;
    heading.textContent = `project ${shownProject}`;
    table.update(quota.limits || []);
    table.setEmpty("This project has no limits.");
  }

  async function load() {
    const project = projectInput.value.trim() || session.projectId || "";
    showError(error, "");
    try {
      const body = await api(quotaPath(project), { signal });
      shownProject = project;
      show(body);
    } catch (failure) {
      if (failure.name === "AbortError") return;
      table.update([]);
      table.setEmpty("The quota could not be read.");
      heading.textContent = "";
      showError(error, failure);
    }
  }

  const form = h("form", { class: "inline-form quota-form", "aria-label": "Which project", novalidate: true,
    onsubmit: (event) => { event.preventDefault(); busy(loadButton, load); } },
  field("Project", projectInput), loadButton,
  isAdmin ? null : h("p", { class: "muted small quota-note" }, "Only an admin can change limits."));
  load();

  return h("section", { id: "admin-quotas", class: "card card-flush admin-section", "aria-labelledby": "quotas-title" },
    h("div", { class: "card-title" }, h("h2", { id: "quotas-title" }, "Quotas"), heading),
    form, error, notice, table.el);
}

// ---------------------------------------------------------------- audit

function auditSection(ctx, isAdmin) {
  const { signal, session } = ctx;
  let records = [];
  let marker = null;
  let generation = 0;
  const targetType = h("select", { id: "audit-target-type" }, options(TARGET_TYPES));
  const outcome = h("select", { id: "audit-outcome" }, options(OUTCOMES));
  const since = h("select", { id: "audit-since" }, options(SINCE));
  const target = h("input", { id: "audit-target", type: "search", autocomplete: "off", spellcheck: "false",
    placeholder: "name or id" });
  // Asking for every project's records is the API's to refuse (403 for a
  // member, with its message): the box stays usable.
  const all = h("input", { id: "audit-all", type: "checkbox" });
  const refresh = h("button", { type: "button", id: "audit-refresh", class: "btn" }, "Refresh");
  const more = h("button", { type: "button", id: "audit-more", class: "btn", hidden: true }, "Load more");
  const error = errorBox("", { id: "audit-error" });
  const count = h("span", { class: "count muted", "aria-live": "polite" });

  function targetCell(r) {
    const label = r.target_name || r.target_id;
    const own = r.project_id === session.projectId;
    let href = null;
    if (own && r.target_type === "stack" && r.target_name && r.target_id) href = stackRoute(r.target_name, r.target_id);
    else if (own && r.target_type === "cluster" && r.target_id) href = `#/clusters/${seg(r.target_id)}`;
    else if (own && r.target_type === "instance" && r.target_id) href = `#/instances/${seg(r.target_id)}`;
    return h("span", { class: "audit-target", title: r.target_id || undefined },
      h("span", { class: "muted" }, `${r.target_type} `),
      href ? h("a", { href }, label) : h("span", {}, label));
  }

  const columns = [
    { label: "When", className: "nowrap", key: (r) => r.at || "", cell: (r) => timeEl(r.at) },
    {
      label: "Who", key: (r) => `${r.user_id}|${r.project_id}`,
      cell: (r) => h("div", { class: "cell-stack" }, h("span", { class: "mono audit-user" }, r.user_id || "—"),
        r.project_id !== session.projectId
          ? h("span", { class: "mono muted small audit-project", title: "project" }, `in ${r.project_id}`) : null),
    },
    { label: "Target", key: (r) => `${r.target_type}|${r.target_name}|${r.target_id}`, cell: targetCell },
    { label: "Operation", className: "nowrap", key: (r) => r.operation || "", cell: (r) => r.operation || "" },
    {
      label: "Outcome", key: (r) => r.outcome || "",
      cell: (r) => kindBadge(r.outcome, OUTCOME_KIND[r.outcome] || "muted", { class: "audit-outcome" }),
    },
    {
      label: "Reason · blocker", className: "col-wide", key: (r) => `${r.reason}|${r.blocker}`,
      cell: (r) => h("div", { class: "cell-stack" },
        r.reason ? h("span", { class: "audit-reason" }, r.reason) : null,
        r.blocker ? h("span", { class: "audit-blocker muted small" }, r.blocker) : null),
    },
    {
      label: "Request", className: "mono muted nowrap", key: (r) => r.request_id || "",
      cell: (r) => (r.request_id ? h("span", { class: "audit-request", title: r.request_id }, r.request_id.slice(0, 8)) : ""),
    },
  ];
  const table = keyedTable({ id: "audit", columns, rowKey: (r) => r.id, rowAttr: "audit",
    empty: "Loading the audit trail…", caption: "Audit records, newest first" });
  table.table.classList.add("table-stacked");

  // "Since" is fixed when the list starts, so "load more" pages the same list.
  let sinceAt;
  function query(from) {
    return {
      target_type: targetType.value,
      outcome: outcome.value,
      target: target.value.trim(),
      since: sinceAt,
      all_projects: all.checked ? "true" : undefined,
      limit: AUDIT_PAGE,
      marker: from || undefined,
    };
  }

  async function loadPage(from) {
    const body = await api(withQuery(`${heat()}/audit`, query(from)), { signal });
    const list = body.audit_records || [];
    return { list, next: list.length >= AUDIT_PAGE ? list[list.length - 1].id : null };
  }

  function show() {
    table.update(records);
    more.hidden = !marker;
    count.textContent = `${records.length} record${records.length === 1 ? "" : "s"}${marker ? " loaded" : ""}`;
    table.setEmpty("No record matches.");
  }

  async function reload() {
    const mine = ++generation;
    const seconds = Number(since.value);
    sinceAt = seconds ? new Date(Date.now() - seconds * 1000).toISOString() : undefined;
    showError(error, "");
    try {
      const page = await loadPage(null);
      if (mine !== generation) return;
      records = page.list;
      marker = page.next;
      show();
    } catch (failure) {
      if (failure.name === "AbortError" || mine !== generation) return;
      records = [];
      marker = null;
      table.update(records);
      more.hidden = true;
      count.textContent = "";
      table.setEmpty("The audit trail could not be read.");
      showError(error, failure);
    }
  }

  more.addEventListener("click", () => busy(more, async () => {
    const mine = generation;
    try {
      const page = await loadPage(marker);
      if (mine !== generation) return;
      const known = new Set(records.map((r) => r.id));
      records = records.concat(page.list.filter((r) => !known.has(r.id)));
      marker = page.next;
      showError(error, "");
      show();
    } catch (failure) {
      if (failure.name !== "AbortError") showError(error, failure);
    }
  }));
  refresh.addEventListener("click", () => busy(refresh, reload));
  for (const control of [targetType, outcome, since, all]) control.addEventListener("change", reload);
  let typing = null;
  target.addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(reload, 350); });
  ctx.onDispose(() => clearTimeout(typing));
  reload();

  return h("section", { id: "admin-audit", class: "card card-flush admin-section", "aria-labelledby": "audit-title" },
    h("div", { class: "card-title" }, h("h2", { id: "audit-title" }, "Audit trail"),
      h("span", { class: "muted small card-subtitle" }, "locks, unlocks, refusals, expiries, break-glass and observed verdicts; newest first")),
    h("div", { class: "inline-form audit-filters" },
      field("Target type", targetType), field("Outcome", outcome), field("Since", since), field("Target", target),
      h("div", { class: "field-check audit-all" }, all, h("label", { for: "audit-all" }, "All projects"),
        isAdmin ? null : h("span", { class: "muted small" }, "(admins)")),
      h("div", { class: "toolbar-spacer" }), count, refresh),
    error, table.el,
    h("div", { class: "more audit-more" }, more));
}
