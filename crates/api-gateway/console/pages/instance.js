// #/instances/{uuid}: one instance — status, power, its maintenance lock
// (lock/unlock, asking "allowed?" first), power actions and its events.

import {
  h, badge, setBadge, timeEl, keyedTable, errorBox, showError, poll, actionButtons, detailList,
  lockBanner, setChildren, statusKind, lockForm, formToggler, jsonBlock,
} from "../ui.js";
import { api, COMPUTE, seg } from "../api.js";

/** The instance's operations: button id, the operation "allowed?" knows,
 *  and the call it makes. A new one is one entry. */
const OPERATIONS = [
  { id: "action-lock", op: "lock", label: "Lock", form: true },
  { id: "action-unlock", op: "unlock", label: "Unlock", path: "lock", body: { target: false } },
  { id: "power-on", op: "power_on", label: "Power on", path: "states/power", body: { target: "on" } },
  { id: "power-off", op: "power_off", label: "Power off", path: "states/power", body: { target: "off" } },
  { id: "reboot", op: "reboot", label: "Reboot", path: "states/power", body: { target: "reboot" } },
];

export async function render(ctx) {
  const { root, params, signal } = ctx;
  const uuid = params.uuid;
  const base = `${COMPUTE}/instances/${seg(uuid)}`;
  let instance = null;
  let gone = false;
  let refresh = { now() {} };

  const title = h("span", { class: "title-text" }, uuid);
  const statusBadge = badge("", { id: "instance-status" });
  const power = h("span", { id: "instance-power", class: "power" });
  const reason = h("p", { id: "instance-reason", class: "status-reason" });
  const lockSlot = h("div", { class: "lock-slot" }, lockBanner(null));
  const detailsSlot = h("div", { class: "card" });
  const headerError = errorBox("", { id: "instance-error" });
  const actionError = errorBox("", { id: "instance-action-error" });
  const actionNotice = h("div", { class: "action-notice", role: "status", "aria-live": "polite" });
  const toggler = formToggler();
  const lock = lockForm({
    title: "Lock the instance",
    onSubmit: async (request) => {
      await api(`${base}/lock`, { method: "PUT", body: { target: true, ...request }, signal });
      toggler.close();
      accepted("Lock");
    },
    onCancel: () => toggler.toggle(lock),
  });
  const buttons = actionButtons({
    operations: OPERATIONS, form: lock, toggler, errors: actionError,
    run: async (operation) => {
      await api(`${base}/${operation.path}`, { method: "PUT", body: operation.body, signal });
      accepted(operation.label);
    },
    onFailure: () => refreshVerdicts(),
  });

  function accepted(label) {
    actionNotice.textContent = `${label}: accepted.`;
    setTimeout(() => { if (actionNotice.textContent.startsWith(label)) actionNotice.textContent = ""; }, 4000);
    refresh.now();
  }

  const events = keyedTable({
    id: "instance-events", rowKey: (e) => e.id, rowAttr: "event", caption: "Events, newest first", empty: "No events yet.",
    columns: [
      { label: "Time", key: (e) => e.id, cell: (e) => timeEl(e.at) },
      { label: "What", className: "mono", key: (e) => e.id, cell: (e) => e.kind },
      { label: "Status", key: (e) => e.id, cell: (e) => badge(e.status) },
      { label: "Power", key: (e) => e.id, cell: (e) => e.power_state || "" },
      { label: "Reason", className: "col-wide", key: (e) => e.id, cell: (e) => e.reason || "" },
    ],
  });

  root.append(
    h("nav", { class: "breadcrumbs", "aria-label": "Breadcrumb" },
      h("a", { href: "#/instances" }, "Instances"), h("span", { class: "crumb-sep", "aria-hidden": "true" }, "/"),
      h("span", { "aria-current": "page", class: "crumb-current" }, uuid)),
    h("div", { class: "page-header" }, h("div", { class: "title-block" },
      h("h1", { class: "title-with-badge" }, title, statusBadge, power), reason)),
    headerError, lockSlot,
    h("div", { class: "actions-bar", role: "group", "aria-label": "Instance actions" }, [...buttons.values()]),
    actionNotice, actionError, lock,
    detailsSlot,
    h("section", { class: "card card-flush", "aria-labelledby": "instance-events-title" },
      h("div", { class: "card-title" }, h("h2", { id: "instance-events-title" }, "Events")), events.el));

  function show(next) {
    const previous = instance;
    instance = next;
    title.textContent = instance.name;
    setChildren(root.querySelector(".crumb-current"), instance.name);
    setBadge(statusBadge, instance.status);
    const powerKind = statusKind(String(instance.power_state || "").toUpperCase());
    power.className = `power power-${powerKind}`;
    setChildren(power, h("span", { class: "dot", "aria-hidden": "true" }), `power ${instance.power_state || "unknown"}`);
    reason.textContent = instance.status_reason || "";
    reason.className = `status-reason text-${statusKind(instance.status)}`;
    document.title = `${instance.name} · ${instance.status} · Ember`;
    const lockKey = [instance.locked, instance.locked_by, instance.locked_reason, instance.lock_expires_at].join("|");
    if (!previous || [previous.locked, previous.locked_by, previous.locked_reason, previous.lock_expires_at].join("|") !== lockKey) {
      setChildren(lockSlot, lockBanner(instance.locked ? {
        locked_by_user: instance.locked_by_user, locked_by_role: instance.locked_by, locked_at: instance.locked_at,
        reason: instance.locked_reason, expires_at: instance.lock_expires_at,
      } : null, { what: "This instance" }));
    }
    setChildren(detailsSlot, detailList([
      ["UUID", h("span", { class: "mono" }, instance.uuid)],
      ["Flavor", instance.flavor],
      ["Image", instance.image],
      ["Project", instance.project_id],
      ["Owner", instance.user_id],
      ["Created", timeEl(instance.created_at)],
      ["Updated", timeEl(instance.updated_at)],
      ["Metadata", Object.keys(instance.metadata || {}).length ? jsonBlock(instance.metadata) : null],
      ["Networks", (instance.networks || []).length ? jsonBlock(instance.networks) : null],
      ["Command", (instance.command || []).length ? h("code", {}, instance.command.join(" ")) : null],
    ], { id: "instance-details" }));
    return !previous || previous.status !== instance.status || previous.power_state !== instance.power_state ||
      lockKey !== [previous.locked, previous.locked_by, previous.locked_reason, previous.lock_expires_at].join("|");
  }

  async function load() {
    try {
      const body = await api(base, { signal });
      const next = body.instance;
      // The buttons change with the state, not a moment after it.
      if (instance && (instance.status !== next.status || instance.power_state !== next.power_state ||
          instance.locked !== next.locked || instance.locked_by !== next.locked_by)) {
        await refreshVerdicts();
      }
      showError(headerError, "");
      return show(next);
    } catch (error) {
      if (error.name === "AbortError") throw error;
      if (error.status === 404) {
        gone = true;
        showError(headerError, `${error.message} — it may have been deleted.`);
        for (const wrap of buttons.values()) { wrap.forceDisabled = true; wrap.button.disabled = true; }
        return false;
      }
      showError(headerError, error);
      return false;
    }
  }

  async function loadEvents() {
    try {
      const body = await api(`${base}/events`, { signal });
      events.update((body.events || []).slice().reverse());
    } catch (error) {
      if (error.name === "AbortError") throw error;
    }
  }

  async function refreshVerdicts() {
    if (gone) return;
    const answers = await Promise.all(OPERATIONS.map((o) =>
      api(`${base}/allowed?operation=${encodeURIComponent(o.op)}`, { signal })
        .then((v) => [o, v]).catch((error) => [o, error.name === "AbortError" ? null : { error }])));
    if (signal.aborted) return;
    for (const [operation, verdict] of answers) buttons.get(operation.id).setVerdict(verdict);
  }

  try {
    show((await api(base, { signal })).instance);
  } catch (error) {
    if (error.name === "AbortError") return;
    setChildren(root, root.querySelector(".breadcrumbs"), errorBox(error, { id: "instance-error" }));
    return;
  }
  await Promise.all([loadEvents(), refreshVerdicts()]);
  refresh = poll(async () => {
    if (gone) return;
    await load();
    await loadEvents();
  }, () => (instance && statusKind(instance.status) === "progress" ? 1500 : 6000), signal);
}
