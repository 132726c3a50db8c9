// #/clusters/{id}: one cluster — sizes, status, lock, remediation budget,
// nodes (with scale-in protection), policies, pending lifecycle actions
// with a live countdown, recent actions and events, and its operations,
// each asking "allowed?" first.

import {
  h, badge, setBadge, timeEl, keyedTable, field, errorBox, showError, busy, poll, actionButtons,
  detailList, lockBanner, setChildren, statusKind, icon, lockForm, formToggler, formatCountdown,
  parseTime, formatAbsolute,
} from "../ui.js";
import { api, SENLIN, withQuery, seg } from "../api.js";

const FAST = 2000;
const IDLE = 6000;
const BUSY = new Set(["INIT", "CREATING", "DELETING", "UPDATING", "RESIZING", "RECOVERING", "CHECKING", "OPERATING"]);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export async function render(ctx) {
  const { root, params, signal } = ctx;
  const id = params.id;
  const base = `${SENLIN}/clusters/${seg(id)}`;

  let cluster = null;
  let nodes = [];
  let nodeById = new Map();
  let pending = [];
  let verdicts = {};
  let lastVerdicts = 0;
  let gone = false;
  /** What the lifecycle-hook service knows of each waiting action, by
   *  token (`GET …/lifecycle-actions`): the deadline as heartbeats moved
   *  it, the transition, the delivery. */
  let waits = new Map();
  /** Deadlines a heartbeat from this page answered, by token: exact, and
   *  newer than the last listing until the next one. */
  const knownDeadlines = new Map();
  let refresh = { now() {} };

  // ------------------------------------------------------------ header
  const statusBadge = badge("", { id: "cluster-status" });
  const title = h("span", { class: "title-text" }, id);
  const reason = h("p", { id: "cluster-reason", class: "status-reason" });
  const sizes = h("div", { id: "cluster-sizes", class: "stat-row" });
  const lockSlot = h("div", { class: "lock-slot" }, lockBanner(null));
  const remediationSlot = h("div", { class: "remediation-slot" });
  const meta = h("div", { class: "meta-row muted" });
  const headerError = errorBox("", { id: "cluster-error" });
  const goneSlot = h("div");

  // ------------------------------------------------------------ actions
  const actionError = errorBox("", { id: "cluster-action-error" });
  const actionNotice = h("div", { class: "action-notice", role: "status", "aria-live": "polite" });
  const queueNote = h("p", { id: "queue-note", class: "queue-note muted", hidden: true });
  const countInput = h("input", { id: "scale-count", type: "number", min: "1", value: "1", inputmode: "numeric",
    class: "input-narrow" });
  const capacityInput = h("input", { id: "resize-capacity", type: "number", min: "0", inputmode: "numeric",
    class: "input-narrow" });
  const count = () => Math.max(1, Math.floor(Number(countInput.value) || 1));

  /** The cluster's operations. A new one is one entry: button id, the
   *  operation "allowed?" knows, and the body POSTed to …/actions. */
  const OPERATIONS = [
    { id: "scale-out", op: "scale_out", label: "Scale out", counted: true, body: () => ({ scale_out: { count: count() } }) },
    { id: "scale-in", op: "scale_in", label: "Scale in", counted: true, body: () => ({ scale_in: { count: count() } }) },
    {
      id: "resize", op: "resize", label: "Resize", body: () => {
        const number = Math.floor(Number(capacityInput.value));
        if (capacityInput.value === "" || !Number.isFinite(number) || number < 0) {
          throw new Error("Give the desired capacity (a whole number) to resize to.");
        }
        return { resize: { adjustment_type: "EXACT_CAPACITY", number, strict: true } };
      },
    },
    { id: "recover", op: "recover", label: "Recover", body: () => ({ recover: {} }) },
    { id: "check", op: "check", label: "Check", body: () => ({ check: {} }) },
    { id: "action-lock", op: "lock", label: "Lock", form: true },
    { id: "action-unlock", op: "unlock", label: "Unlock", body: () => ({ unlock: {} }) },
  ];
  const toggler = formToggler();
  const lock = lockForm({
    title: "Lock the cluster for maintenance",
    levels: [["clusters", "clusters — the cluster's size, members and policies"],
      ["all", "all — also lock each member's instance"]],
    onSubmit: async (request) => {
      await api(`${base}/actions`, { method: "POST", body: { lock: request }, signal });
      toggler.close();
      accepted("Lock");
    },
    onCancel: () => toggler.toggle(lock),
  });
  const buttons = actionButtons({
    operations: OPERATIONS, form: lock, toggler, errors: actionError,
    run: async (operation) => {
      const answer = await api(`${base}/actions`, { method: "POST", body: operation.body(), signal });
      accepted(operation.label, answer && answer.action);
    },
    onFailure: () => refreshVerdicts(),
  });
  countInput.addEventListener("change", () => refreshVerdicts(["scale_out", "scale_in"]));

  function accepted(label, actionId) {
    actionNotice.textContent = `${label}: accepted${actionId ? ` (action ${String(actionId).slice(0, 8)})` : ""}.`;
    setTimeout(() => { if (actionNotice.textContent.startsWith(label)) actionNotice.textContent = ""; }, 5000);
    refresh.now();
    refreshVerdicts();
  }

  // ------------------------------------------------------------ tables
  const nodeTable = keyedTable({
    id: "nodes", rowKey: (n) => n.id, rowAttr: "node", rowAttrValue: (n) => n.name, caption: "Nodes",
    empty: "Loading nodes…",
    columns: [
      { label: "Name", key: (n) => n.name, cell: (n) => h("span", { class: "strong" }, n.name) },
      { label: "Status", key: (n) => n.status, cell: (n) => badge(n.status) },
      { label: "Reason", className: "col-wide", key: (n) => n.status_reason || "", cell: (n) => n.status_reason || "" },
      { label: "Role", key: (n) => n.role || "", cell: (n) => n.role || h("span", { class: "muted" }, "—") },
      { label: "Index", className: "num", key: (n) => String(n.index), cell: (n) => String(n.index) },
      {
        label: "Protected", key: (n) => String(Boolean(n.protected)),
        cell: (n) => h("button", { type: "button", class: `btn btn-small protect-toggle${n.protected ? " is-on" : ""}`,
          "aria-pressed": n.protected ? "true" : "false",
          title: n.protected ? "Protected from scale-in: click to clear" : "Click to protect from scale-in",
          onclick: (event) => toggleProtected(n, event.currentTarget) },
        icon("shield"), n.protected ? "Protected" : "Not protected"),
      },
      {
        label: "Resource", className: "mono muted", key: (n) => n.physical_id || "",
        cell: (n) => (n.physical_id && UUID.test(n.physical_id)
          ? h("a", { href: `#/instances/${seg(n.physical_id)}`, title: "the node's instance" }, n.physical_id.slice(0, 8))
          : n.physical_id || ""),
      },
    ],
  });
  const nodesError = errorBox("", { id: "nodes-error" });

  const lifecycleTable = keyedTable({
    id: "lifecycle", rowKey: (a) => a.id, rowAttr: "lifecycle", caption: "Pending lifecycle actions",
    empty: "No lifecycle action is waiting.",
    columns: [
      {
        label: "Node", key: (a) => `${a.target}|${nodeName(a.target, a)}`,
        cell: (a) => h("span", { class: "strong" }, nodeName(a.target, a)),
      },
      { label: "Transition", key: (a) => transitionOf(a), cell: (a) => h("span", { class: `transition transition-${transitionOf(a)}` }, transitionOf(a)) },
      { label: "Waiting since", key: (a) => waitingSince(a) || "", cell: (a) => timeEl(waitingSince(a)) },
      {
        label: "Deadline", key: (a) => JSON.stringify(deadlineOf(a)),
        cell: (a) => {
          const deadline = deadlineOf(a);
          if (!deadline.at) return h("span", { class: "muted" }, "unknown");
          return h("span", { class: "countdown", "data-deadline": deadline.at.toISOString(),
            "data-estimated": deadline.estimated ? "true" : "false",
            title: `${deadline.estimated ? "Estimated from the hook's timeout: " : ""}${formatAbsolute(deadline.at)}` },
          countdownText(deadline.at, deadline.estimated));
        },
      },
      { label: "On timeout", key: (a) => hookOf(a).default_result || "", cell: (a) => hookOf(a).default_result || "—" },
      {
        label: "", className: "row-actions-cell", key: (a) => a.id,
        cell: (a) => {
          const error = h("span", { class: "row-error error", hidden: true, role: "alert" });
          const complete = (result) => (event) => busy(event.currentTarget, async () => {
            error.hidden = true;
            try {
              await api(`${base}/actions`, { method: "POST", signal,
                body: { complete_lifecycle: { lifecycle_action_token: a.id, lifecycle_action_result: result } } });
              accepted(`Complete ${nodeName(a.target)} with ${result}`);
            } catch (failure) {
              if (failure.name !== "AbortError") { error.textContent = failure.message; error.hidden = false; }
            }
          });
          const heartbeat = (event) => busy(event.currentTarget, async () => {
            error.hidden = true;
            try {
              const answer = await api(`${base}/actions`, { method: "POST", signal,
                body: { record_lifecycle_heartbeat: { lifecycle_action_token: a.id } } });
              if (answer && answer.deadline) knownDeadlines.set(a.id, answer.deadline);
              actionNotice.textContent = `Heartbeat recorded: ${nodeName(a.target)} now waits until ${formatAbsolute(answer && answer.deadline)}.`;
              lifecycleTable.update(pending);
              tick();
            } catch (failure) {
              if (failure.name !== "AbortError") { error.textContent = failure.message; error.hidden = false; }
            }
          });
          return h("span", { class: "row-actions" },
            h("button", { type: "button", class: "btn btn-small btn-primary complete-continue", onclick: complete("CONTINUE"),
              title: transitionOf(a) === "launching" ? "Put the node in service" : "Go on: delete the node" }, "Continue"),
            h("button", { type: "button", class: "btn btn-small complete-abandon", onclick: complete("ABANDON"),
              title: transitionOf(a) === "launching" ? "Delete its resource (retry if the policy says so)"
                : "Keep the node, out of the cluster" }, "Abandon"),
            h("button", { type: "button", class: "btn btn-small btn-quiet heartbeat", onclick: heartbeat,
              title: "Move the deadline by the hook's timeout" }, "Heartbeat"),
            error);
        },
      },
    ],
  });
  const lifecycleError = errorBox("", { id: "lifecycle-error" });

  const policyTable = keyedTable({
    id: "policies", rowKey: (p) => p.policy_id, rowAttr: "policy", rowAttrValue: (p) => p.policy_name,
    caption: "Attached policies", empty: "No policy is attached.",
    columns: [
      { label: "Name", cell: (p) => p.policy_name },
      { label: "Type", className: "mono nowrap", cell: (p) => p.policy_type },
      { label: "Enabled", cell: (p) => (p.enabled ? "yes" : "no") },
      { label: "Priority", className: "num", cell: (p) => String(p.priority) },
    ],
  });
  const actionTable = keyedTable({
    id: "cluster-actions", rowKey: (a) => a.id, rowAttr: "action", caption: "Recent actions",
    empty: "No actions yet.",
    columns: [
      { label: "Action", className: "mono nowrap", cell: (a) => a.action },
      { label: "Target", key: (a) => `${a.target}|${nodeName(a.target, a)}`, cell: (a) => (a.target === id || (cluster && a.target === cluster.id) ? "cluster" : nodeName(a.target, a)) },
      { label: "Status", key: (a) => a.status, cell: (a) => badge(a.status) },
      { label: "Reason", className: "col-wide", cell: (a) => a.status_reason || "" },
      { label: "Created", key: (a) => a.created_at || "", cell: (a) => timeEl(a.created_at) },
      {
        label: "", key: (a) => `${a.id}|${a.status}`, cell: (a) => (["INIT", "READY", "WAITING_LIFECYCLE_COMPLETION"].includes(a.status)
          ? h("button", { type: "button", class: "btn btn-small btn-quiet cancel-action", onclick: (event) =>
            busy(event.currentTarget, async () => {
              try {
                await api(`${SENLIN}/actions/${seg(a.id)}`, { method: "PATCH", body: { action: { status: "CANCELLED" } }, signal });
                accepted(`Cancel ${a.action}`);
              } catch (failure) {
                if (failure.name !== "AbortError") showError(actionsError, failure);
              }
            }) }, "Cancel")
          : ""),
      },
    ],
  });
  const actionsError = errorBox("", { id: "cluster-actions-error" });
  const eventTable = keyedTable({
    id: "cluster-events", rowKey: (e) => e.id, rowAttr: "event", caption: "Recent events", empty: "No events yet.",
    columns: [
      { label: "Time", key: (e) => e.id, cell: (e) => timeEl(e.timestamp || e.generated_at) },
      { label: "Object", key: (e) => e.id, cell: (e) => e.oname || e.obj_name || "" },
      { label: "Action", className: "mono nowrap", key: (e) => e.id, cell: (e) => e.action || "" },
      { label: "Status", key: (e) => e.id, cell: (e) => badge(e.status) },
      { label: "Reason", className: "col-wide", key: (e) => e.id, cell: (e) => e.status_reason || "" },
    ],
  });

  // ------------------------------------------------------------ layout
  root.append(
    h("nav", { class: "breadcrumbs", "aria-label": "Breadcrumb" },
      h("a", { href: "#/clusters" }, "Clusters"), h("span", { class: "crumb-sep", "aria-hidden": "true" }, "/"),
      h("span", { "aria-current": "page", class: "crumb-current" }, id)),
    h("div", { class: "page-header" }, h("div", { class: "title-block" },
      h("h1", { class: "title-with-badge" }, title, statusBadge), reason, meta)),
    headerError, goneSlot, lockSlot,
    h("div", { class: "card" }, sizes, remediationSlot),
    h("div", { class: "actions-bar", role: "group", "aria-label": "Cluster operations" },
      h("div", { class: "action-group" }, h("h2", { class: "group-title" }, "Scale"),
        field("Count", countInput), buttons.get("scale-out"), buttons.get("scale-in")),
      h("div", { class: "action-group" }, h("h2", { class: "group-title" }, "Resize"),
        field("Desired capacity", capacityInput), buttons.get("resize")),
      h("div", { class: "action-group" }, h("h2", { class: "group-title" }, "Health and maintenance"),
        buttons.get("recover"), buttons.get("check"), buttons.get("action-lock"), buttons.get("action-unlock"))),
    queueNote, actionNotice, actionError, lock,
    h("section", { class: "card card-flush", "aria-labelledby": "lifecycle-title" },
      h("div", { class: "card-title" }, h("h2", { id: "lifecycle-title" }, "Pending lifecycle actions"),
        h("span", { class: "muted small" }, "nodes waiting for a lifecycle hook's answer")),
      lifecycleError, lifecycleTable.el),
    h("section", { class: "card card-flush", "aria-labelledby": "nodes-title" },
      h("div", { class: "card-title" }, h("h2", { id: "nodes-title" }, "Nodes")), nodesError, nodeTable.el),
    h("section", { class: "card card-flush", "aria-labelledby": "policies-title" },
      h("div", { class: "card-title" }, h("h2", { id: "policies-title" }, "Policies")), policyTable.el),
    h("section", { class: "card card-flush", "aria-labelledby": "actions-title" },
      h("div", { class: "card-title" }, h("h2", { id: "actions-title" }, "Recent actions")), actionsError, actionTable.el),
    h("section", { class: "card card-flush", "aria-labelledby": "events-title" },
      h("div", { class: "card-title" }, h("h2", { id: "events-title" }, "Events")), eventTable.el));

  // ------------------------------------------------------------ helpers
  function nodeName(nodeId, action) {
    const node = nodeById.get(nodeId);
    if (node) return node.name;
    const inputs = action && action.inputs;
    return (inputs && inputs.node_name) || String(nodeId || "").slice(0, 8);
  }
  function hookOf(action) {
    return (action.inputs && typeof action.inputs === "object" && action.inputs.hook) || {};
  }
  function transitionOf(action) {
    const wait = waits.get(action.id);
    if (wait && wait.lifecycle_transition_type) return wait.lifecycle_transition_type;
    const hook = hookOf(action);
    if (hook.transition) return hook.transition;
    if (action.action === "NODE_CREATE") return "launching";
    if (action.action === "NODE_DELETE") return "terminating";
    return action.action;
  }
  function waitingSince(action) {
    return action.updated_at || action.created_at;
  }
  /** The deadline: a heartbeat's answer from this page, else the
   *  lifecycle-hook service's (exact), else — before the service has the
   *  wait — the wait's start plus the hook's timeout (estimated). */
  function deadlineOf(action) {
    if (knownDeadlines.has(action.id)) return { at: parseTime(knownDeadlines.get(action.id)), estimated: false };
    const wait = waits.get(action.id);
    if (wait && wait.deadline) return { at: parseTime(wait.deadline), estimated: false };
    const timeout = Number(hookOf(action).timeout);
    const since = parseTime(waitingSince(action));
    if (since && timeout > 0) return { at: new Date(since.getTime() + timeout * 1000), estimated: true };
    return { at: null, estimated: true };
  }
  function countdownText(at, estimated) {
    const left = (at.getTime() - Date.now()) / 1000;
    if (left <= 0) return "deadline passed";
    return `${estimated ? "≈ " : ""}${formatCountdown(left)} left`;
  }
  function tick() {
    for (const el of root.querySelectorAll(".countdown[data-deadline]")) {
      const at = new Date(el.dataset.deadline);
      const text = countdownText(at, el.dataset.estimated === "true");
      if (el.textContent !== text) el.textContent = text;
      el.classList.toggle("is-urgent", at.getTime() - Date.now() < 30000);
    }
  }
  const ticker = setInterval(tick, 500);
  ctx.onDispose(() => clearInterval(ticker));

  async function toggleProtected(node, button) {
    await busy(button, async () => {
      try {
        await api(`${SENLIN}/nodes/${seg(node.id)}`, { method: "PATCH", body: { node: { protected: !node.protected } }, signal });
        showError(nodesError, "");
        await loadNodes();
      } catch (error) {
        if (error.name !== "AbortError") showError(nodesError, error);
      }
    });
  }

  function showCluster(next) {
    const previous = cluster;
    cluster = next;
    title.textContent = cluster.name;
    setChildren(ctx.root.querySelector(".crumb-current"), cluster.name);
    setBadge(statusBadge, cluster.status);
    reason.textContent = cluster.status_reason || "";
    reason.className = `status-reason text-${statusKind(cluster.status)}`;
    document.title = `${cluster.name} · ${cluster.status} · Ember`;
    const max = cluster.max_size === -1 ? "∞" : String(cluster.max_size);
    setChildren(sizes,
      stat("Desired", String(cluster.desired_capacity), "desired-capacity"),
      stat("Min", String(cluster.min_size), "min-size"),
      stat("Max", max, "max-size"),
      stat("Nodes", String((cluster.nodes || []).length), "node-count"),
      stat("Profile", cluster.profile_name || cluster.profile_id, "profile"));
    if (capacityInput.value === "" || (previous && String(previous.desired_capacity) === capacityInput.value)) {
      capacityInput.value = String(cluster.desired_capacity);
    }
    setChildren(meta, h("span", {}, "Created ", timeEl(cluster.created_at)),
      cluster.updated_at ? h("span", {}, "Updated ", timeEl(cluster.updated_at)) : null,
      h("span", { class: "mono", title: "cluster id" }, cluster.id));
    const lockKey = JSON.stringify(cluster.maintenance_lock || null);
    if (!previous || JSON.stringify(previous.maintenance_lock || null) !== lockKey) {
      setChildren(lockSlot, lockBanner(cluster.maintenance_lock, { what: "This cluster",
        extra: cluster.maintenance_lock && cluster.maintenance_lock.locked_instances && cluster.maintenance_lock.locked_instances.length
          ? h("div", { class: "muted" }, `${cluster.maintenance_lock.locked_instances.length} instance(s) locked with it`) : null }));
    }
    showRemediation(cluster.remediation);
    return !previous || previous.status !== cluster.status || lockKey !== JSON.stringify(previous.maintenance_lock || null) ||
      previous.desired_capacity !== cluster.desired_capacity;
  }

  function stat(label, value, statId) {
    return h("div", { class: "stat", id: `stat-${statId}` }, h("div", { class: "stat-label" }, label),
      h("div", { class: "stat-value" }, value));
  }

  function showRemediation(budget) {
    if (!budget) { setChildren(remediationSlot); return; }
    const maxRecoveries = budget.max_recoveries ? `${budget.recoveries_in_window} of ${budget.max_recoveries} recoveries used per ${budget.window} s (${budget.remaining} left)`
      : `${budget.recoveries_in_window} recoveries in the last ${budget.window} s (no limit)`;
    setChildren(remediationSlot, h("div", { id: "remediation", class: `remediation${budget.held ? " is-held" : ""}` },
      h("h2", {}, "Remediation budget ", h("span", { class: "muted small" }, `policy ${budget.policy}`)),
      detailList([
        ["Unhealthy", `${budget.unhealthy} of ${budget.members} members (max ${budget.max_unhealthy}${budget.max_unhealthy_count !== undefined ? ` = ${budget.max_unhealthy_count}` : ""})`],
        ["Recoveries", maxRecoveries],
        ["Held", budget.held ? h("span", { class: "text-warn" }, budget.held) : "no: recovery runs"],
      ])));
  }

  // ------------------------------------------------------------ loading
  async function loadCluster() {
    try {
      const body = await api(base, { signal });
      const next = body.cluster;
      // The buttons change with the status, not a moment after it.
      if (cluster && (cluster.status !== next.status || cluster.desired_capacity !== next.desired_capacity ||
          JSON.stringify(cluster.maintenance_lock || null) !== JSON.stringify(next.maintenance_lock || null))) {
        await refreshVerdicts();
      }
      showError(headerError, "");
      return showCluster(next);
    } catch (error) {
      if (error.name === "AbortError") throw error;
      if (error.status === 404) {
        gone = true;
        setChildren(goneSlot, h("div", { class: "banner banner-muted", role: "status" },
          h("div", {}, h("strong", {}, "This cluster no longer exists. "), error.message, " ",
            h("a", { href: "#/clusters" }, "Back to the clusters"), ".")));
        for (const wrap of buttons.values()) { wrap.forceDisabled = true; wrap.button.disabled = true; }
        return false;
      }
      showError(headerError, error);
      return false;
    }
  }

  async function loadNodes() {
    try {
      const body = await api(withQuery(`${SENLIN}/nodes`, { cluster_id: cluster ? cluster.id : id, sort: "index" }), { signal });
      nodes = body.nodes || [];
      nodeById = new Map(nodes.map((n) => [n.id, n]));
      nodeTable.update(nodes);
      nodeTable.setEmpty("This cluster has no nodes.");
      showError(nodesError, "");
    } catch (error) {
      if (error.name === "AbortError") throw error;
      showError(nodesError, error);
    }
  }

  async function loadLifecycle() {
    try {
      const [body, listed] = await Promise.all([
        api(withQuery(`${SENLIN}/actions`, { cluster_id: cluster ? cluster.id : id,
          status: "WAITING_LIFECYCLE_COMPLETION" }), { signal }),
        api(`${base}/lifecycle-actions`, { signal }),
      ]);
      pending = body.actions || [];
      waits = new Map((listed.lifecycle_actions || []).map((wait) => [wait.lifecycle_action_token, wait]));
      // The listing is as new as any heartbeat answered before it.
      knownDeadlines.clear();
      lifecycleTable.update(pending);
      showError(lifecycleError, "");
    } catch (error) {
      if (error.name === "AbortError") throw error;
      showError(lifecycleError, error);
    }
  }

  async function loadSide() {
    const clusterId = cluster ? cluster.id : id;
    const [policies, actions, events] = await Promise.allSettled([
      api(`${base}/policies`, { signal }),
      api(withQuery(`${SENLIN}/actions`, { cluster_id: clusterId, sort: "created_at:desc", limit: 10 }), { signal }),
      api(withQuery(`${SENLIN}/events`, { cluster_id: clusterId, sort: "timestamp:desc", limit: 20 }), { signal }),
    ]);
    if (signal.aborted) return;
    if (policies.status === "fulfilled") policyTable.update(policies.value.cluster_policies || []);
    if (actions.status === "fulfilled") { actionTable.update(actions.value.actions || []); showError(actionsError, ""); }
    else showError(actionsError, actions.reason);
    if (events.status === "fulfilled") eventTable.update(events.value.events || []);
  }

  async function refreshVerdicts(only) {
    if (gone) return;
    lastVerdicts = Date.now();
    const wanted = OPERATIONS.filter((o) => !only || only.includes(o.op));
    const answers = await Promise.all(wanted.map((o) =>
      api(withQuery(`${base}/allowed`, { operation: o.op, count: o.counted ? count() : undefined }), { signal })
        .then((v) => [o, v]).catch((error) => [o, error.name === "AbortError" ? null : { error }])));
    if (signal.aborted) return;
    for (const [operation, verdict] of answers) {
      verdicts[operation.op] = verdict;
      buttons.get(operation.id).setVerdict(verdict);
    }
    // Accepted operations queue behind the cluster's running ones (Senlin's
    // cluster lock): say so, as "allowed?" lists them.
    const queue = ((verdicts.scale_out || verdicts.resize || {}).queued_behind) || [];
    setChildren(queueNote, queue.length
      ? [h("strong", {}, "A new operation would wait for: "),
        queue.map((q, index) => [index ? ", " : "", `${q.action} (${q.status.toLowerCase()}${q.target && q.target !== (cluster && cluster.id) ? ` on ${nodeName(q.target)}` : ""})`])]
      : null);
    queueNote.hidden = !queue.length;
  }

  // ------------------------------------------------------------ start
  // A cluster that cannot be read at all: its message, and nothing else.
  try {
    const first = await api(base, { signal });
    showCluster(first.cluster);
  } catch (error) {
    if (error.name === "AbortError") return;
    setChildren(root, root.querySelector(".breadcrumbs"), errorBox(error, { id: "cluster-error" }));
    return;
  }
  await Promise.all([loadNodes(), loadLifecycle(), loadSide(), refreshVerdicts()]);

  const busyNow = () => cluster && (BUSY.has(cluster.status) || pending.length > 0 ||
    nodes.some((n) => statusKind(n.status) === "progress"));
  let polling = false;
  refresh = poll(async () => {
    if (gone || polling) return;
    polling = true;
    try {
      const changed = await loadCluster();
      if (gone) return;
      await Promise.all([loadNodes(), loadLifecycle(), loadSide()]);
      if (!changed && Date.now() - lastVerdicts > 20000) refreshVerdicts();
    } finally {
      polling = false;
    }
  }, () => (busyNow() ? FAST : IDLE), signal);
}
