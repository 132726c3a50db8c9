// #/stacks/{name}/{id}: one stack — status, lock, live progress, topology,
// resources, events, outputs, parameters, template, snapshots, and its
// actions, each asking "allowed?" first and saying why not.

import {
  h, badge, setBadge, timeEl, keyedTable, field, errorBox, showError, busy, parseKeyValues,
  readFileText, isInProgress, poll, actionButton, detailList, jsonBlock, tabs, lockBanner,
  setChildren, statusKind, icon, lockForm,
} from "../ui.js";
import { api, heat, stackPath, stackRoute, withQuery, seg } from "../api.js";
import { createTopology, nestedRef } from "../topology.js";

const FAST = 2000;
const IDLE = 8000;
const EVENTS_SHOWN = 500;
const HOOK = /paused until Hook ([A-Za-z-]+) is cleared/i;

/** The stack's actions. A new one is one entry: its button id, the
 *  operation the dry run knows it by, and what clicking does (a body for
 *  POST …/actions, or a form). */
const ACTIONS = [
  { id: "action-update", op: "update", label: "Update", form: "update" },
  { id: "action-check", op: "check", label: "Check", body: { check: null } },
  { id: "action-suspend", op: "suspend", label: "Suspend", body: { suspend: null } },
  { id: "action-resume", op: "resume", label: "Resume", body: { resume: null } },
  { id: "action-cancel", op: "cancel_update", label: "Cancel update", body: { cancel_update: null } },
  { id: "action-lock", op: "lock", label: "Lock", form: "lock" },
  { id: "action-unlock", op: "unlock", label: "Unlock", body: { unlock: null } },
  { id: "action-delete", op: "delete", label: "Delete", form: "delete", variant: "btn-danger" },
];

/** Operations asked about besides the buttons' (resource and snapshot
 *  actions). */
const OTHER_OPS = ["mark_unhealthy", "snapshot", "restore", "signal"];

/** The breakpoint hook a resource waits at: Heat (and Ember) say so in
 *  the resource's latest event ("CREATE paused until Hook pre-create is
 *  cleared"), as `openstack stack hook poll` reads it. */
function hookOf(resource) {
  if (resource && resource._hook) return resource._hook;
  const match = HOOK.exec((resource && resource.resource_status_reason) || "");
  return match ? match[1].toLowerCase() : null;
}

function actionOf(status) {
  return String(status || "").replace(/_(IN_PROGRESS|COMPLETE|FAILED)$/, "");
}

export async function render(ctx) {
  const { root, params, signal } = ctx;

  // A stack addressed by name or id alone: Heat's lookup redirects to the
  // canonical URL, whose name and id become the route.
  if (!params.id) {
    const body = await api(`${heat()}/stacks/${seg(params.name)}`, { signal });
    const found = body && body.stack;
    const query = ctx.query.toString();
    ctx.navigate(`${stackRoute(found.stack_name, found.id)}${query ? `?${query}` : ""}`, { replace: true });
    return;
  }

  const name = params.name;
  const id = params.id;
  const base = stackPath(name, id);

  let stack = null;
  let resources = [];
  let byName = new Map();
  let templateLoad = null;
  let verdicts = {};
  let gone = false;
  let progressTotal = 0;
  let lastResources = 0;
  let lastVerdicts = 0;
  let selected = null;
  let stackPoll = { now() {} };
  let hooks = new Map(); // resource name → hook it is paused at
  /** Nested stacks shown in the topology, by key ("app", "app/db", …):
   *  {ref, stack, resources} — resources null while the first load runs. */
  const expanded = new Map();

  // ------------------------------------------------------------ header
  const statusBadge = badge("", { id: "stack-status" });
  const reason = h("p", { id: "stack-reason", class: "status-reason" });
  const description = h("p", { class: "muted stack-description" });
  const crumbs = h("nav", { class: "breadcrumbs", "aria-label": "Breadcrumb" },
    h("a", { href: "#/stacks" }, "Stacks"), h("span", { class: "crumb-sep", "aria-hidden": "true" }, "/"),
    h("span", { class: "crumb-parent" }), h("span", { "aria-current": "page" }, name));
  const meta = h("div", { class: "meta-row muted" });
  const lockSlot = h("div", { class: "lock-slot" }, lockBanner(null));
  const progressBar = h("div", { class: "progress-bar" });
  const progressText = h("span", { class: "progress-text" });
  const progress = h("div", { id: "progress", class: "progress", role: "progressbar", "aria-valuemin": "0",
    "aria-valuemax": "100", "aria-valuenow": "0", "aria-label": "Operation progress", hidden: true },
  h("div", { class: "progress-track" }, progressBar), progressText);
  const goneNotice = h("div", { class: "gone-slot" });
  const hookSlot = h("div", { class: "lock-slot hook-slot" });

  // ------------------------------------------------------------ actions
  const actionError = errorBox("", { id: "stack-action-error" });
  const actionNotice = h("div", { class: "action-notice", role: "status", "aria-live": "polite" });
  const buttons = new Map();
  const formSlot = h("div", { class: "action-forms" });
  const forms = {
    lock: lockForm({
      title: "Lock the stack for maintenance",
      levels: [["stacks", "stacks — this stack and its nested stacks"], ["all", "all — also lock its instances"]],
      onSubmit: async (request) => {
        await api(`${base}/actions`, { method: "POST", body: { lock: request }, signal });
        closeForms();
        afterChange("Lock");
      },
      onCancel: () => openForm("lock"),
    }),
    update: updateForm(),
    delete: deleteForm(),
  };
  Object.values(forms).forEach((f) => { f.hidden = true; formSlot.appendChild(f); });

  function closeForms() {
    for (const [key, f] of Object.entries(forms)) {
      f.hidden = true;
      buttons.get(ACTIONS.find((a) => a.form === key).id).button.setAttribute("aria-expanded", "false");
    }
  }

  function openForm(which) {
    for (const [key, f] of Object.entries(forms)) {
      const open = key === which && f.hidden;
      f.hidden = !open;
      const button = buttons.get(ACTIONS.find((a) => a.form === key).id).button;
      button.setAttribute("aria-expanded", open ? "true" : "false");
      if (open) {
        const first = f.querySelector("input, select, textarea, button.btn-danger");
        if (first) first.focus();
      }
    }
  }

  for (const action of ACTIONS) {
    const wrap = actionButton({ id: action.id, label: action.label, variant: action.variant,
      onClick: () => {
        showError(actionError, "");
        if (action.form) { openForm(action.form); return; }
        busy(wrap.button, () => run(action.label, () => api(`${base}/actions`,
          { method: "POST", body: action.body, signal })));
      } });
    if (action.form) wrap.button.setAttribute("aria-expanded", "false");
    buttons.set(action.id, wrap);
  }

  function afterChange(label) {
    actionNotice.textContent = `${label}: accepted.`;
    setTimeout(() => { if (actionNotice.textContent.startsWith(label)) actionNotice.textContent = ""; }, 4000);
    stackPoll.now();
    refreshVerdicts();
  }

  /** Runs one change, then refreshes what it may have changed. */
  async function run(label, call, errorEl = actionError) {
    showError(actionError, "");
    showError(errorEl, "");
    try {
      await call();
      actionNotice.textContent = `${label}: accepted.`;
      setTimeout(() => { if (actionNotice.textContent.startsWith(label)) actionNotice.textContent = ""; }, 4000);
      stackPoll.now();
      await refreshVerdicts();
      return true;
    } catch (error) {
      if (error.name === "AbortError") return false;
      showError(errorEl, error);
      refreshVerdicts();
      return false;
    }
  }

  // ------------------------------------------------------------ topology + details
  const topology = createTopology({
    onSelect: (key) => selectResource(key),
    onToggleNested: (key, open) => toggleNested(key, open),
  });
  const nestedError = errorBox("", { id: "nested-error", class: "topology-error" });
  const details = h("section", { id: "resource-details", class: "card details-card", "aria-live": "polite" },
    h("p", { class: "muted" }, "Select a resource in the graph or the table to see its details."));

  // ------------------------------------------------------------ tables
  const resourceTable = keyedTable({
    id: "resources", rowAttr: "resource", rowKey: (r) => r.resource_name, caption: "Resources",
    empty: "Loading resources…",
    rowClass: (r) => (r.resource_name === selected ? "is-selected" : ""),
    columns: [
      {
        label: "Name", key: (r) => `${r.resource_name}|${nestedRef(r) ? "n" : ""}`,
        cell: (r) => {
          const nested = nestedRef(r);
          return h("span", { class: "name-cell" },
            h("button", { type: "button", class: "link-button", onclick: () => selectResource(r.resource_name, true) },
              r.resource_name),
            nested ? h("a", { href: stackRoute(nested.name || nested.id, nested.name ? nested.id : null),
              class: "nested-tag", title: "Open the nested stack" }, icon("nested"), "nested") : null);
        },
      },
      { label: "Type", className: "mono nowrap", key: (r) => r.resource_type, cell: (r) => r.resource_type },
      { label: "Status", key: (r) => r.resource_status, cell: (r) => badge(r.resource_status) },
      {
        label: "Reason", className: "col-wide", key: (r) => `${r.resource_status_reason || ""}|${hookOf(r) || ""}`,
        cell: (r) => {
          const hook = hookOf(r);
          return h("span", { class: "reason-cell" }, r.resource_status_reason || (hook ? `paused at its ${hook} hook` : ""),
            hook ? h("button", { type: "button", class: "btn btn-small clear-hook", "data-hook": hook,
              onclick: (event) => busy(event.currentTarget, () => clearHook(r.resource_name, hook)) },
            icon("hook"), `Clear ${hook}`) : null);
        },
      },
      { label: "Updated", key: (r) => r.updated_time || "", cell: (r) => timeEl(r.updated_time) },
      { label: "Physical ID", className: "mono muted", key: (r) => r.physical_resource_id || "",
        cell: (r) => r.physical_resource_id || "" },
    ],
  });
  const eventTable = keyedTable({
    id: "events", rowAttr: "event", rowKey: (e) => e.id, caption: "Events, newest first",
    empty: "Loading events…",
    columns: [
      { label: "Time", key: (e) => e.id, cell: (e) => timeEl(e.event_time) },
      { label: "Resource", key: (e) => e.id, cell: (e) => e.resource_name },
      { label: "Status", key: (e) => e.id, cell: (e) => badge(e.resource_status) },
      { label: "Reason", className: "col-wide", key: (e) => e.id, cell: (e) => e.resource_status_reason || "" },
    ],
  });
  const outputTable = keyedTable({
    id: "outputs", rowAttr: "output", rowKey: (o) => o.output_key, caption: "Outputs",
    empty: "This stack has no outputs.",
    columns: [
      { label: "Key", className: "mono", cell: (o) => o.output_key },
      {
        label: "Value", className: "col-wide",
        key: (o) => JSON.stringify([o.output_value, o.output_error]),
        cell: (o) => (o.output_error
          ? h("span", { class: "text-failed" }, o.output_error)
          : (typeof o.output_value === "string" ? h("code", { class: "value" }, o.output_value)
            : jsonBlock(o.output_value))),
      },
      { label: "Description", className: "muted", cell: (o) => o.description || "" },
    ],
  });
  const parameterTable = keyedTable({
    id: "parameters", rowAttr: "parameter", rowKey: (p) => p.key, caption: "Parameters",
    empty: "This stack has no parameters.",
    rowClass: (p) => (p.key.startsWith("OS::") ? "is-pseudo" : ""),
    columns: [
      { label: "Name", className: "mono", cell: (p) => p.key },
      { label: "Value", className: "col-wide", cell: (p) => h("code", { class: "value" }, p.value) },
    ],
  });
  const templateView = h("pre", { id: "template", class: "code code-block" }, "Loading the template…");
  const templateError = errorBox("");
  const eventsError = errorBox("", { id: "events-error" });
  const resourcesError = errorBox("", { id: "resources-error" });
  const snapshots = snapshotPanel();

  const tabset = tabs([
    { id: "resources", label: "Resources", panel: h("div", {}, resourcesError, resourceTable.el) },
    { id: "events", label: "Events", panel: h("div", {}, eventsError, eventTable.el) },
    { id: "outputs", label: "Outputs", panel: h("div", {}, outputTable.el) },
    { id: "parameters", label: "Parameters", panel: h("div", {}, parameterTable.el) },
    { id: "template", label: "Template", panel: h("div", {}, templateError, templateView) },
    { id: "snapshots", label: "Snapshots", panel: snapshots.el },
  ], {
    initial: ctx.query.get("tab") || "resources",
    onChange: (tab) => {
      if (tab === "template") loadTemplate();
      if (tab === "snapshots") snapshots.load();
    },
  });

  const headerError = errorBox("", { id: "stack-error" });
  root.append(
    crumbs,
    h("div", { class: "page-header stack-header" },
      h("div", { class: "title-block" },
        h("h1", { class: "title-with-badge" }, h("span", { class: "title-text" }, name), statusBadge),
        reason, description, meta)),
    headerError,
    goneNotice,
    lockSlot,
    hookSlot,
    progress,
    h("div", { class: "actions-bar", role: "group", "aria-label": "Stack actions" },
      [...buttons.values()]),
    actionNotice,
    actionError,
    formSlot,
    h("div", { class: "stack-grid" },
      h("section", { class: "card card-flush topology-card", "aria-label": "Topology" },
        h("div", { class: "card-title" }, h("h2", {}, "Topology"),
          h("span", { class: "muted small card-subtitle" }, "arrow: dependency → dependent"),
          topology.controls),
        nestedError,
        topology.el),
      details),
    h("section", { class: "card card-tabs" }, tabset.el));

  // ------------------------------------------------------------ loading
  function showStack(next) {
    const previous = stack;
    stack = next;
    setBadge(statusBadge, stack.stack_status);
    reason.textContent = stack.stack_status_reason || "";
    reason.className = `status-reason text-${statusKind(stack.stack_status)}`;
    description.textContent = stack.description || stack.template_description || "";
    description.hidden = !description.textContent || description.textContent === "No description";
    setChildren(meta,
      h("span", {}, "Created ", timeEl(stack.creation_time)),
      stack.updated_time ? h("span", {}, "Updated ", timeEl(stack.updated_time)) : null,
      h("span", { class: "mono", title: "stack id" }, stack.id),
      stack.timeout_mins ? h("span", {}, `Timeout ${stack.timeout_mins} min`) : null,
      stack.tags && stack.tags.length ? h("span", {}, `Tags: ${stack.tags.join(", ")}`) : null);
    if (!previous || previous.parent !== stack.parent) showParent(stack.parent);
    const lockKey = JSON.stringify(stack.stack_lock || null);
    if (!previous || JSON.stringify(previous.stack_lock || null) !== lockKey) {
      setChildren(lockSlot, lockBanner(stack.stack_lock, { what: "This stack" }));
    }
    const paramRows = Object.entries(stack.parameters || {}).map(([key, value]) => ({ key, value: String(value) }))
      .sort((a, b) => (a.key.startsWith("OS::") - b.key.startsWith("OS::")) || a.key.localeCompare(b.key));
    parameterTable.update(paramRows);
    outputTable.update(stack.outputs || []);
    if (!previous || previous.stack_status !== stack.stack_status) {
      document.title = `${name} · ${stack.stack_status} · Ember`;
    }
    return !previous || previous.stack_status !== stack.stack_status ||
      previous.updated_time !== stack.updated_time || lockKey !== JSON.stringify(previous.stack_lock || null);
  }

  /** A nested stack's breadcrumb names its parent (one lookup by id). */
  async function showParent(parentId) {
    const parentSlot = crumbs.querySelector(".crumb-parent");
    if (!parentId) { setChildren(parentSlot); return; }
    const link = h("a", { href: stackRoute(parentId), class: "crumb-parent-link" }, "parent stack");
    setChildren(parentSlot, link, h("span", { class: "crumb-sep", "aria-hidden": "true" }, "/"));
    try {
      const body = await api(`${heat()}/stacks/${seg(parentId)}`, { signal });
      const parent = body && body.stack;
      if (parent) {
        link.textContent = parent.stack_name;
        link.setAttribute("href", stackRoute(parent.stack_name, parent.id));
      }
    } catch {
      // The link still works by id.
    }
  }

  async function loadStack() {
    try {
      const body = await api(base, { signal });
      const next = body.stack;
      // The buttons change with the status, not a moment after it: ask
      // "allowed?" again before showing a new status or lock.
      if (stack && (stack.stack_status !== next.stack_status ||
          JSON.stringify(stack.stack_lock || null) !== JSON.stringify(next.stack_lock || null))) {
        await refreshVerdicts();
      }
      showError(headerError, "");
      const changed = showStack(next);
      // Heat still shows a deleted stack by its id, as DELETE_COMPLETE.
      if (body.stack.stack_status === "DELETE_COMPLETE") markGone(null);
      return changed;
    } catch (error) {
      if (error.name === "AbortError") throw error;
      if (error.status === 404) { markGone(error); return false; }
      showError(headerError, error);
      return false;
    }
  }

  function markGone(error) {
    if (gone) return;
    gone = true;
    if (error) {
      setBadge(statusBadge, stack && actionOf(stack.stack_status) === "DELETE" ? "DELETE_COMPLETE"
        : (stack ? stack.stack_status : "NOT_FOUND"));
    }
    progress.hidden = true;
    setChildren(goneNotice, h("div", { class: "banner banner-muted", role: "status" },
      h("div", {}, h("strong", {}, "This stack was deleted. "), error ? error.message : "",
        " ", h("a", { href: "#/stacks" }, "Back to the stacks"), ".")));
    for (const wrap of buttons.values()) { wrap.forceDisabled = true; wrap.button.disabled = true; }
  }

  function showProgress() {
    const inProgress = stack && isInProgress(stack.stack_status) && !gone;
    progress.hidden = !inProgress;
    if (!inProgress) { progressTotal = 0; return; }
    const action = actionOf(stack.stack_status);
    progressTotal = Math.max(progressTotal, resources.length);
    let done;
    if (action === "DELETE") {
      done = progressTotal - resources.filter((r) => r.resource_status !== "DELETE_COMPLETE").length;
    } else {
      done = resources.filter((r) => actionOf(r.resource_status) === action &&
        !isInProgress(r.resource_status)).length;
    }
    const total = progressTotal || 1;
    const percent = Math.round((100 * Math.min(done, total)) / total);
    progressBar.style.width = `${percent}%`;
    progress.setAttribute("aria-valuenow", String(percent));
    progress.setAttribute("aria-valuetext", `${done} of ${progressTotal} resources`);
    progressText.textContent = `${action.toLowerCase()}: ${done} of ${progressTotal} resources done`;
  }

  async function loadResources() {
    try {
      const body = await api(`${base}/resources`, { signal });
      resources = (body.resources || []).slice().sort((a, b) => a.resource_name.localeCompare(b.resource_name));
      lastResources = Date.now();
      showError(resourcesError, "");
      showResources();
      resourceTable.setEmpty("This stack has no resources.");
      showProgress();
      refreshSelectedDetails();
      if (expanded.size) {
        await refreshNested();
        drawTopology();
        refreshSelectedDetails();
      }
    } catch (error) {
      if (error.name === "AbortError") throw error;
      if (error.status === 404) return;
      showError(resourcesError, error);
    }
  }

  function withHooks() {
    return hooks.size ? resources.map((r) => (hooks.has(r.resource_name) ? { ...r, _hook: hooks.get(r.resource_name) } : r))
      : resources;
  }

  function showResources() {
    const shown = withHooks();
    byName = new Map(shown.map((r) => [r.resource_name, r]));
    topology.update(shown, expanded);
    resourceTable.update(shown);
    const paused = [...hooks.entries()].filter(([resourceName]) => byName.has(resourceName));
    setChildren(hookSlot, paused.length ? h("div", { id: "hook-banner", class: "banner banner-warn", role: "status" },
      icon("hook"), h("div", {}, h("strong", {}, `${paused.length} resource${paused.length === 1 ? "" : "s"} paused at a breakpoint: `),
        paused.map(([resourceName, hook], index) => [index ? ", " : "", `${resourceName} (${hook})`]),
        ". Clear a hook from the resource's row or its details.")) : null);
  }

  function drawTopology() {
    topology.update(withHooks(), expanded);
  }

  // ------------------------------------------------------------ nested stacks in the topology
  /** The resource a topology key names: "name" in this stack, "a/name" in
   *  the nested stack of a (as loaded), and so on down; with the stack
   *  that holds it. */
  function resourceAt(key) {
    const parts = String(key).split("/");
    let list = resources;
    let owner = stack;
    let prefix = "";
    for (let index = 0; index < parts.length; index += 1) {
      const found = list.find((r) => r.resource_name === parts[index]);
      if (!found) return null;
      if (index === parts.length - 1) return { resource: index ? found : (byName.get(found.resource_name) || found), stack: owner };
      prefix = prefix ? `${prefix}/${parts[index]}` : parts[index];
      const entry = expanded.get(prefix);
      if (!entry || !entry.resources) return null;
      list = entry.resources;
      owner = entry.stack;
    }
    return null;
  }

  function collapse(key) {
    for (const other of [...expanded.keys()]) {
      if (other === key || other.startsWith(`${key}/`)) expanded.delete(other);
    }
  }

  async function toggleNested(key, open) {
    showError(nestedError, "");
    if (!open) {
      collapse(key);
      drawTopology();
      refreshSelectedDetails();
      return;
    }
    const found = resourceAt(key);
    const ref = found && nestedRef(found.resource);
    if (!ref || expanded.has(key)) return;
    const entry = { ref, stack: null, resources: null };
    expanded.set(key, entry);
    drawTopology();
    await loadNested(key, entry);
    drawTopology();
    refreshSelectedDetails();
  }

  /** The nested stack (Heat's GET of its `nested` link), then its
   *  resources. False (and the API's message shown) when it failed. */
  async function loadNested(key, entry) {
    try {
      const path = entry.ref.name ? stackPath(entry.ref.name, entry.ref.id) : `${heat()}/stacks/${seg(entry.ref.id)}`;
      const body = await api(path, { signal });
      const nestedStack = body.stack;
      const listed = await api(`${stackPath(nestedStack.stack_name, nestedStack.id)}/resources`, { signal });
      if (expanded.get(key) !== entry) return true;
      entry.stack = nestedStack;
      entry.resources = (listed.resources || []).slice().sort((a, b) => a.resource_name.localeCompare(b.resource_name));
      return true;
    } catch (error) {
      if (error.name === "AbortError") return true;
      if (expanded.get(key) !== entry) return true;
      // Never shown, or gone: fold it again; else keep what was shown.
      if (!entry.resources || error.status === 404) collapse(key);
      showError(nestedError, `The nested stack of ${key} could not be shown: ${error.message}`);
      return false;
    }
  }

  /** Every expanded nested stack again (parents first: a replaced nested
   *  stack is followed by its new link). */
  async function refreshNested() {
    const keys = [...expanded.keys()];
    const depth = (key) => key.split("/").length;
    const levels = [...new Set(keys.map(depth))].sort((a, b) => a - b);
    let ok = true;
    for (const level of levels) {
      const results = await Promise.all(keys.filter((key) => depth(key) === level).map((key) => {
        const entry = expanded.get(key);
        if (!entry || !entry.resources) return true; // gone, or its first load still runs
        const found = resourceAt(key);
        const ref = found && nestedRef(found.resource);
        if (!ref) { collapse(key); return true; }
        entry.ref = ref;
        return loadNested(key, entry);
      }));
      if (results.includes(false)) ok = false;
    }
    if (ok) showError(nestedError, "");
  }

  function nestedBusy() {
    for (const entry of expanded.values()) {
      if (entry.stack && isInProgress(entry.stack.stack_status)) return true;
      if ((entry.resources || []).some((r) => isInProgress(r.resource_status))) return true;
    }
    return false;
  }

  function refreshSelectedDetails() {
    if (!selected) return;
    const found = resourceAt(selected);
    if (!found) { if (detailsFor) showDetails(null); return; }
    const r = found.resource;
    if (detailsFor !== `${selected}|${r.resource_status}|${r.resource_status_reason}|${r.updated_time}`) {
      showDetails(selected);
    }
  }

  /** Which resources wait at a hook, from each one's latest event. */
  function recomputeHooks() {
    const next = new Map();
    const seen = new Set();
    for (const event of events) { // newest first
      if (seen.has(event.resource_name)) continue;
      seen.add(event.resource_name);
      const match = HOOK.exec(event.resource_status_reason || "");
      if (match) next.set(event.resource_name, match[1].toLowerCase());
    }
    const changed = next.size !== hooks.size || [...next].some(([k, v]) => hooks.get(k) !== v);
    hooks = next;
    if (changed) showResources();
  }

  async function refreshVerdicts() {
    if (gone) return;
    lastVerdicts = Date.now();
    const ops = [...new Set([...ACTIONS.map((a) => a.op), ...OTHER_OPS])];
    const answers = await Promise.all(ops.map((op) =>
      api(`${base}/actions/${seg(op)}/allowed`, { signal })
        .then((verdict) => [op, verdict])
        .catch((error) => (error.name === "AbortError" ? [op, null] : [op, { error }]))));
    if (signal.aborted) return;
    verdicts = Object.fromEntries(answers);
    for (const action of ACTIONS) buttons.get(action.id).setVerdict(verdicts[action.op]);
    if (markWrap) markWrap.setVerdict(verdicts.mark_unhealthy);
    snapshots.verdicts(verdicts);
  }

  // ------------------------------------------------------------ events
  const events = [];
  const seenEvents = new Set();
  let newestEvent = null;

  async function loadEvents(initial) {
    try {
      let fresh;
      const restart = initial || !newestEvent;
      if (restart) {
        const body = await api(withQuery(`${base}/events`, { sort_dir: "desc", limit: 100 }), { signal });
        fresh = (body.events || []).slice().reverse();
      } else {
        fresh = [];
        for (let page = 0; page < 10; page += 1) {
          const body = await api(withQuery(`${base}/events`, { sort_dir: "asc", marker: newestEvent, limit: 200 }),
            { signal });
          const list = body.events || [];
          fresh.push(...list);
          if (list.length) newestEvent = list[list.length - 1].id;
          if (list.length < 200) break;
        }
      }
      let added = 0;
      for (const event of fresh) {
        if (seenEvents.has(event.id)) continue;
        seenEvents.add(event.id);
        events.unshift(event);
        added += 1;
      }
      if (fresh.length && restart) newestEvent = fresh[fresh.length - 1].id;
      if (events.length > EVENTS_SHOWN) {
        for (const old of events.splice(EVENTS_SHOWN)) seenEvents.delete(old.id);
      }
      if (added || initial) { eventTable.update(events); recomputeHooks(); }
      eventTable.setEmpty("No events yet.");
      showError(eventsError, "");
    } catch (error) {
      if (error.name === "AbortError") throw error;
      if (error.status === 404 && gone) return;
      // The marker event may be gone (events are purged): start again.
      if (error.status === 400 && newestEvent) { newestEvent = null; return; }
      showError(eventsError, error);
    }
  }

  // ------------------------------------------------------------ template
  function loadTemplate() {
    if (!templateLoad) {
      templateLoad = api(`${base}/template`, { signal }).then((body) => {
        templateView.textContent = typeof body === "string" ? body : JSON.stringify(body, null, 2);
        showError(templateError, "");
        return body;
      }).catch((error) => {
        templateLoad = null;
        if (error.name !== "AbortError") {
          templateView.textContent = "";
          showError(templateError, error);
        }
        return null;
      });
    }
    return templateLoad;
  }

  // ------------------------------------------------------------ resource details
  let detailsFor = "";
  let markWrap = null;

  function selectResource(resourceName, fromTable) {
    const previous = selected;
    selected = resourceName;
    if (topology.selected !== resourceName) topology.select(resourceName, { notify: false });
    for (const key of [previous, resourceName]) {
      const entry = key && resourceTable.rows.get(key);
      if (entry) entry.tr.classList.toggle("is-selected", key === selected);
    }
    showDetails(resourceName);
    if (fromTable) details.scrollIntoView({ block: "nearest", behavior: "smooth" });
  }

  async function showDetails(resourceName) {
    if (resourceName && resourceName.includes("/") && !byName.has(resourceName)) {
      showNestedDetails(resourceName);
      return;
    }
    const r = resourceName && byName.get(resourceName);
    if (!r) {
      detailsFor = "";
      markWrap = null;
      setChildren(details, h("p", { class: "muted" }, "Select a resource in the graph or the table to see its details."));
      return;
    }
    detailsFor = `${r.resource_name}|${r.resource_status}|${r.resource_status_reason}|${r.updated_time}`;
    const nested = nestedRef(r);
    const hook = hookOf(r);
    const dependsOn = resources.filter((other) => (other.required_by || []).includes(r.resource_name))
      .map((other) => other.resource_name);
    const detailError = errorBox("", { id: "resource-error" });
    const unhealthyReason = h("input", { id: "unhealthy-reason", placeholder: "why it is broken",
      autocomplete: "off" });
    markWrap = actionButton({ id: "mark-unhealthy", label: "Mark unhealthy", variant: "btn-warn",
      onClick: () => busy(markWrap.button, async () => {
        showError(detailError, "");
        const body = { mark_unhealthy: true };
        if (unhealthyReason.value.trim()) body.resource_status_reason = unhealthyReason.value.trim();
        const ok = await run(`Mark ${r.resource_name} unhealthy`, () =>
          api(`${base}/resources/${seg(r.resource_name)}`, { method: "PATCH", body, signal }), detailError);
        if (ok) loadResources();
      }) });
    markWrap.setVerdict(verdicts.mark_unhealthy);
    const resetButton = r.resource_status === "CHECK_FAILED"
      ? h("button", { type: "button", id: "mark-healthy", class: "btn",
        onclick: (event) => busy(event.currentTarget, async () => {
          const ok = await run(`Reset ${r.resource_name}`, () =>
            api(`${base}/resources/${seg(r.resource_name)}`, { method: "PATCH", body: { mark_unhealthy: false }, signal }), detailError);
          if (ok) loadResources();
        }) }, "Clear the mark")
      : null;
    const attributes = h("div", { class: "attributes" }, h("p", { class: "muted" }, "Loading attributes…"));
    const properties = h("div", { class: "properties" });
    setChildren(details,
      h("div", { class: "details-head" },
        h("h2", {}, r.resource_name), badge(r.resource_status, { id: "resource-status" })),
      r.resource_status_reason ? h("p", { class: `status-reason text-${statusKind(r.resource_status)}` },
        r.resource_status_reason) : null,
      hook ? h("div", { class: "banner banner-warn banner-compact" }, icon("hook"),
        h("span", {}, `Paused at its ${hook} hook.`),
        h("button", { type: "button", id: "clear-hook", class: "btn btn-small", onclick: (event) =>
          busy(event.currentTarget, () => clearHook(r.resource_name, hook)) }, `Clear ${hook} hook`)) : null,
      detailList([
        ["Type", h("span", { class: "mono" }, r.resource_type)],
        ["Physical ID", r.physical_resource_id ? h("span", { class: "mono" }, r.physical_resource_id) : null],
        ["Created", timeEl(r.creation_time)],
        ["Updated", timeEl(r.updated_time)],
        ["Depends on", dependsOn.length ? dependsOn.join(", ") : null],
        ["Required by", (r.required_by || []).length ? r.required_by.join(", ") : null],
        ["Nested stack", nested ? h("a", { href: stackRoute(nested.name || nested.id, nested.name ? nested.id : null),
          id: "nested-link" }, nested.name || nested.id) : undefined],
      ]),
      h("div", { class: "mark-form" },
        field("Reason for marking unhealthy", unhealthyReason),
        h("div", { class: "mark-buttons" }, markWrap, resetButton)),
      detailError,
      h("h3", {}, "Attributes"), attributes,
      h("h3", {}, "Properties ", h("span", { class: "muted small" }, "(as written in the template)")), properties);

    const wanted = detailsFor;
    try {
      const body = await api(`${base}/resources/${seg(r.resource_name)}`, { signal });
      if (detailsFor !== wanted) return;
      const attrs = (body.resource && body.resource.attributes) || {};
      setChildren(attributes, Object.keys(attrs).length ? jsonBlock(attrs, { id: "resource-attributes" })
        : h("p", { class: "muted" }, "No attributes."));
    } catch (error) {
      if (error.name === "AbortError") return;
      setChildren(attributes, errorBox(error));
    }
    const tmpl = await loadTemplate();
    if (detailsFor !== wanted) return;
    const section = tmpl && (tmpl.resources || tmpl.Resources);
    const definition = section && section[r.resource_name];
    const props = definition && (definition.properties || definition.Properties);
    setChildren(properties, props ? jsonBlock(props, { id: "resource-properties" })
      : h("p", { class: "muted" }, definition ? "No properties." : "Not in this stack's template (a member of a group, or a nested resource)."));
  }

  /** A resource of an expanded nested stack: what it is, and a link to
   *  it in its own stack's page (where its actions are). */
  function showNestedDetails(key) {
    const found = resourceAt(key);
    if (!found) { showDetails(null); return; }
    const { resource: r, stack: owner } = found;
    detailsFor = `${key}|${r.resource_status}|${r.resource_status_reason}|${r.updated_time}`;
    markWrap = null;
    const parentKey = key.split("/").slice(0, -1).join("/");
    const ownerRoute = owner ? stackRoute(owner.stack_name, owner.id) : null;
    const nested = nestedRef(r);
    const siblings = (parentKey && expanded.get(parentKey) && expanded.get(parentKey).resources) || [];
    const dependsOn = siblings.filter((other) => (other.required_by || []).includes(r.resource_name))
      .map((other) => other.resource_name);
    setChildren(details,
      h("div", { class: "details-head" },
        h("h2", {}, r.resource_name), badge(r.resource_status, { id: "resource-status" })),
      h("p", { class: "muted small nested-path" }, `In the nested stack of ${parentKey}`),
      r.resource_status_reason ? h("p", { class: `status-reason text-${statusKind(r.resource_status)}` },
        r.resource_status_reason) : null,
      detailList([
        ["Type", h("span", { class: "mono" }, r.resource_type)],
        ["Physical ID", r.physical_resource_id ? h("span", { class: "mono" }, r.physical_resource_id) : null],
        ["Created", timeEl(r.creation_time)],
        ["Updated", timeEl(r.updated_time)],
        ["Depends on", dependsOn.length ? dependsOn.join(", ") : null],
        ["Required by", (r.required_by || []).length ? r.required_by.join(", ") : null],
        ["Stack", ownerRoute ? h("a", { href: ownerRoute, id: "nested-owner-link" }, owner.stack_name) : null],
        ["Nested stack", nested ? h("a", { href: stackRoute(nested.name || nested.id, nested.name ? nested.id : null),
          id: "nested-link" }, nested.name || nested.id) : undefined],
      ]),
      ownerRoute ? h("p", { class: "nested-open" },
        h("a", { href: `${ownerRoute}?resource=${seg(r.resource_name)}`, id: "nested-resource-link", class: "btn btn-small" },
          "Open in its stack"),
        h("span", { class: "muted small" }, " to see its attributes, mark it unhealthy or clear a hook.")) : null);
  }

  async function clearHook(resourceName, hook) {
    const ok = await run(`Clear ${hook} of ${resourceName}`, () =>
      api(`${base}/resources/${seg(resourceName)}/signal`, { method: "POST", body: { unset_hook: hook }, signal }));
    if (ok) loadResources();
  }

  // ------------------------------------------------------------ forms
  function updateForm() {
    const file = h("input", { id: "update-file", type: "file", accept: ".yaml,.yml,.json,.template,text/*" });
    const env = h("input", { id: "update-env", type: "file", accept: ".yaml,.yml,.json,text/*" });
    const files = h("input", { id: "update-files", type: "file", multiple: true });
    const paramsInput = h("textarea", { id: "update-params", rows: "4", spellcheck: "false",
      placeholder: "length=16" });
    const existing = h("input", { id: "update-existing", type: "checkbox", checked: true });
    const preview = h("button", { type: "button", id: "update-preview", class: "btn" }, "Preview changes");
    const submit = h("button", { type: "submit", id: "update-submit", class: "btn btn-primary" }, "Update");
    const error = errorBox("", { id: "update-error" });
    const previewResult = h("div", { id: "update-preview-result", class: "preview-result", hidden: true });

    async function request() {
      const body = { parameters: parseKeyValues(paramsInput.value) };
      const replacing = file.files.length > 0;
      if (replacing) body.template = await readFileText(file.files[0]);
      if (env.files.length) body.environment = await readFileText(env.files[0]);
      if (files.files.length) {
        body.files = {};
        for (const extra of files.files) body.files[extra.name] = await readFileText(extra);
      }
      // PATCH keeps the template (when none is sent) and the parameters not
      // given; PUT replaces both, so it needs a template.
      const method = existing.checked || !replacing ? "PATCH" : "PUT";
      return { method, body };
    }

    preview.addEventListener("click", () => busy(preview, async () => {
      showError(error, "");
      try {
        const { method, body } = await request();
        const answer = await api(`${base}/preview`, { method, body, signal });
        const changes = (answer && answer.resource_changes) || {};
        setChildren(previewResult, h("h3", {}, "What the update would do"),
          detailList(["added", "updated", "replaced", "deleted", "unchanged"].map((kind) => {
            const list = (changes[kind] || []).map((c) => (typeof c === "string" ? c : c.resource_name || JSON.stringify(c)));
            return [kind, list.length ? list.join(", ") : null];
          })));
        previewResult.hidden = false;
      } catch (failure) {
        if (failure.name !== "AbortError") showError(error, failure);
      }
    }));

    const form = h("form", { class: "card form-card", id: "update-form", "aria-label": "Update the stack", novalidate: true,
      onsubmit: (event) => {
        event.preventDefault();
        showError(error, "");
        busy(submit, async () => {
          try {
            const { method, body } = await request();
            const ok = await run("Update", () => api(base, { method, body, signal }), error);
            if (ok) {
              closeForms();
              previewResult.hidden = true;
              templateLoad = null;
              if (!tabPanelHidden("template")) loadTemplate();
            }
          } catch (failure) {
            if (failure.name !== "AbortError") showError(error, failure);
          }
        });
      } },
    h("h2", {}, "Update the stack"),
    h("p", { class: "muted" }, "Leave the template empty to keep the current one and change only parameters."),
    h("div", { class: "form-grid" },
      field("New template file (optional)", file),
      field("Environment file (optional)", env),
      field("Other files (optional)", files),
      field("Parameters", paramsInput, "key=value per line; only what changes."),
      h("div", { class: "field field-check" }, existing,
        h("label", { for: "update-existing" }, "Keep the parameter values not given here (PATCH); unticked with a template: replace everything (PUT)"))),
    error,
    previewResult,
    h("div", { class: "form-actions" }, submit, preview,
      h("button", { type: "button", class: "btn btn-quiet", onclick: () => openForm("update") }, "Cancel")));
    return form;
  }

  function deleteForm() {
    const confirm = h("button", { type: "button", id: "action-delete-confirm", class: "btn btn-danger" },
      `Delete ${name}`);
    const error = errorBox("", { id: "delete-error" });
    confirm.addEventListener("click", () => busy(confirm, async () => {
      const ok = await run("Delete", () => api(base, { method: "DELETE", signal }), error);
      if (ok) closeForms();
    }));
    const form = h("div", { class: "card form-card form-danger", id: "delete-form", role: "group",
      "aria-label": "Confirm delete" },
    h("h2", {}, "Delete this stack?"),
    h("p", {}, "The stack ", h("strong", {}, name), " and every resource it made will be deleted. This cannot be undone."),
    error,
    h("div", { class: "form-actions" }, confirm,
      h("button", { type: "button", class: "btn btn-quiet", onclick: () => openForm("delete") }, "Cancel")));
    return form;
  }

  function tabPanelHidden(tab) {
    const panel = document.getElementById(`panel-${tab}`);
    return !panel || panel.hidden;
  }

  // ------------------------------------------------------------ snapshots
  function snapshotPanel() {
    const nameInput = h("input", { id: "snapshot-name", placeholder: "before-upgrade", autocomplete: "off" });
    const create = actionButton({ id: "snapshot-create", label: "Take snapshot", onClick: () =>
      busy(create.button, async () => {
        showError(error, "");
        try {
          const body = nameInput.value.trim() ? { name: nameInput.value.trim() } : {};
          await api(`${base}/snapshots`, { method: "POST", body, signal });
          nameInput.value = "";
          await load(true);
          stackPoll.now();
          refreshVerdicts();
        } catch (failure) {
          if (failure.name !== "AbortError") showError(error, failure);
        }
      }) });
    const error = errorBox("", { id: "snapshots-error" });
    let restoreVerdict;
    let loaded = false;
    const table = keyedTable({
      id: "snapshots", rowAttr: "snapshot", rowKey: (snap) => snap.id, caption: "Snapshots",
      empty: "No snapshots.",
      columns: [
        { label: "Name", cell: (snap) => snap.name || h("span", { class: "muted" }, "unnamed"), key: (snap) => snap.name || "" },
        { label: "Status", key: (snap) => snap.status, cell: (snap) => badge(snap.status) },
        { label: "Taken", key: (snap) => snap.creation_time || "", cell: (snap) => timeEl(snap.creation_time) },
        {
          label: "", key: (snap) => `${snap.id}|${JSON.stringify(restoreVerdict || null)}`, cell: (snap) => {
            const restore = h("button", { type: "button", class: "btn btn-small snapshot-restore",
              onclick: (event) => busy(event.currentTarget, async () => {
                await run("Restore", () => api(`${base}/snapshots/${seg(snap.id)}/restore`,
                  { method: "POST", signal }), error);
              }) }, "Restore");
            if (restoreVerdict && restoreVerdict.allowed === false) {
              restore.disabled = true;
              restore.title = (restoreVerdict.blockers || []).map((b) => b.message).join("\n") || restoreVerdict.reason || "";
            }
            const remove = h("button", { type: "button", class: "btn btn-small btn-quiet snapshot-delete",
              onclick: (event) => busy(event.currentTarget, async () => {
                try {
                  await api(`${base}/snapshots/${seg(snap.id)}`, { method: "DELETE", signal });
                  await load(true);
                } catch (failure) {
                  if (failure.name !== "AbortError") showError(error, failure);
                }
              }) }, "Delete");
            return h("span", { class: "row-actions" }, restore, remove);
          },
        },
      ],
    });
    async function load(force) {
      if (loaded && !force) return;
      loaded = true;
      try {
        const body = await api(`${base}/snapshots`, { signal });
        table.update(body.snapshots || []);
        showError(error, "");
      } catch (failure) {
        loaded = false;
        if (failure.name !== "AbortError") showError(error, failure);
      }
    }
    const el = h("div", { class: "snapshots" },
      h("div", { class: "inline-form" }, field("Snapshot name", nameInput), create),
      error, table.el);
    return {
      el, load,
      verdicts(all) {
        create.setVerdict(all.snapshot);
        restoreVerdict = all.restore;
        if (loaded) load(true);
      },
    };
  }

  // ------------------------------------------------------------ start
  // A stack that cannot be read at all (another project's, a wrong id):
  // its message, and nothing else.
  try {
    const first = await api(base, { signal });
    showStack(first.stack);
  } catch (error) {
    if (error.name === "AbortError") return;
    setChildren(root, crumbs, errorBox(error, { id: "stack-error" }));
    return;
  }
  if (stack.stack_status === "DELETE_COMPLETE") markGone(null);
  try {
    await Promise.all([loadResources(), loadEvents(true)]);
  } catch (error) {
    if (error.name === "AbortError") return;
    throw error;
  }
  showProgress();
  if (!gone) refreshVerdicts();
  if (ctx.query.get("tab") === "template") loadTemplate();
  if (ctx.query.get("tab") === "snapshots") snapshots.load();
  if (ctx.query.get("resource")) selectResource(ctx.query.get("resource"));

  // The stack (and, while it runs, its resources) every 2 s while an
  // operation is in progress, every 8 s otherwise.
  let polling = false;
  stackPoll = poll(async () => {
    if (gone || polling) return;
    polling = true;
    try {
      const wasRunning = stack && isInProgress(stack.stack_status);
      const changed = await loadStack();
      if (gone) return;
      const running = stack && isInProgress(stack.stack_status);
      if (running || wasRunning || changed || nestedBusy() || Date.now() - lastResources > 30000) await loadResources();
      else showProgress();
      if (Date.now() - lastVerdicts > 30000) refreshVerdicts();
    } finally {
      polling = false;
    }
  }, () => ((stack && isInProgress(stack.stack_status)) || nestedBusy() ? FAST : IDLE), signal);

  // Events every 2 s while the page is open and the browser tab visible.
  poll(() => (gone ? null : loadEvents(false)), FAST, signal);
}
