// The console's shell: sign-in state, the header and navigation, and a hash
// router that gives each page an AbortSignal — navigating away aborts the
// page's requests and stops its polls and timers.

import { h, icon, setChildren, errorBox, formatRelative } from "./ui.js";
import { session, signOut, onSessionChange, onUnauthorized, setSession } from "./api.js";
import * as signin from "./pages/signin.js";
import * as stacks from "./pages/stacks.js";
import * as stack from "./pages/stack.js";
import * as clusters from "./pages/clusters.js";
import * as cluster from "./pages/cluster.js";
import * as instances from "./pages/instances.js";
import * as instance from "./pages/instance.js";
import * as admin from "./pages/admin.js";

// Routes as data: a pattern of path segments (":x" captures), the page
// module, and the nav section it highlights.
const ROUTES = [
  { pattern: ["signin"], page: signin, section: null, public: true },
  { pattern: ["stacks"], page: stacks, section: "stacks" },
  { pattern: ["stacks", ":name", ":id"], page: stack, section: "stacks" },
  { pattern: ["stacks", ":name"], page: stack, section: "stacks" },
  { pattern: ["clusters"], page: clusters, section: "clusters" },
  { pattern: ["clusters", ":id"], page: cluster, section: "clusters" },
  { pattern: ["instances"], page: instances, section: "instances" },
  { pattern: ["instances", ":uuid"], page: instance, section: "instances" },
  { pattern: ["admin"], page: admin, section: "admin" },
];

const NAV = [
  { section: "stacks", label: "Stacks", href: "#/stacks", icon: "stack" },
  { section: "clusters", label: "Clusters", href: "#/clusters", icon: "cluster" },
  { section: "instances", label: "Instances", href: "#/instances", icon: "instance" },
  // Shown only to a user with the role; the page itself shows the API's
  // answer to anyone who opens it.
  { section: "admin", label: "Admin", href: "#/admin", icon: "admin", role: "admin" },
];

const DEFAULT_ROUTE = "#/stacks";

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [pathPart, queryPart = ""] = raw.split("?");
  const segments = pathPart.split("/").filter(Boolean).map((segment) => {
    try { return decodeURIComponent(segment); } catch { return segment; }
  });
  return { segments, query: new URLSearchParams(queryPart) };
}

function match(segments) {
  for (const route of ROUTES) {
    if (route.pattern.length !== segments.length) continue;
    const params = {};
    const ok = route.pattern.every((part, index) => {
      if (part.startsWith(":")) { params[part.slice(1)] = segments[index]; return true; }
      return part === segments[index];
    });
    if (ok) return { route, params };
  }
  return null;
}

// ---------------------------------------------------------------- shell

const app = document.getElementById("app");
const navLinks = new Map();
const roleItems = []; // [{role, li}]: nav entries for one role
const whoami = h("div", { id: "whoami", class: "whoami" });
const signoutButton = h("button", { type: "button", id: "signout", class: "btn btn-quiet",
  onclick: async () => {
    await signOut();
    navigate("#/signin");
  } }, "Sign out");
const navToggle = h("button", { type: "button", id: "nav-toggle", class: "btn btn-quiet nav-toggle",
  "aria-expanded": "false", "aria-controls": "nav", onclick: () => toggleNav() },
icon("menu"), h("span", { class: "sr-only" }, "Menu"));
const nav = h("nav", { id: "nav", class: "nav", "aria-label": "Main" },
  h("ul", {}, NAV.map((item) => {
    const link = h("a", { href: item.href, class: "nav-link" }, icon(item.icon), h("span", {}, item.label));
    navLinks.set(item.section, link);
    const li = h("li", { "data-section": item.section }, link);
    if (item.role) { li.hidden = true; roleItems.push({ role: item.role, li }); }
    return li;
  })));
const header = h("header", { class: "topbar" },
  navToggle,
  h("a", { href: DEFAULT_ROUTE, class: "brand" }, h("span", { class: "brand-mark", "aria-hidden": "true" }), "Ember"),
  h("div", { class: "topbar-spacer" }),
  whoami,
  signoutButton);
const main = h("main", { id: "main", class: "main", tabindex: "-1" });
const skip = h("a", { href: "#main", class: "skip-link", onclick: (event) => {
  event.preventDefault();
  main.focus();
} }, "Skip to content");

setChildren(app, skip, header, h("div", { class: "layout" }, nav, main));

function toggleNav(open) {
  const next = open === undefined ? !document.body.classList.contains("nav-open") : open;
  document.body.classList.toggle("nav-open", next);
  navToggle.setAttribute("aria-expanded", next ? "true" : "false");
}

function renderWho(s) {
  setChildren(whoami);
  const signedIn = Boolean(s);
  document.body.classList.toggle("signed-out", !signedIn);
  signoutButton.hidden = !signedIn;
  whoami.hidden = !signedIn;
  for (const { role, li } of roleItems) li.hidden = !(signedIn && (s.roles || []).includes(role));
  if (!signedIn) return;
  whoami.append(
    h("span", { class: "who-user" }, s.user || s.userId || "unknown user"),
    h("span", { class: "who-sep", "aria-hidden": "true" }, " @ "),
    h("span", { class: "who-project", title: s.projectId ? `project id ${s.projectId}` : undefined },
      s.project || s.projectId || "no project"),
    s.roles && s.roles.length
      ? h("span", { class: "who-roles" }, s.roles.map((role) => h("span", { class: "role" }, role)))
      : null);
}

// ---------------------------------------------------------------- routing

let active = null; // {controller, disposers}
let pendingMessage = "";
let lastPath = "";

export function navigate(hash, { replace = false } = {}) {
  if (location.hash === hash) { route(); return; }
  if (replace) { history.replaceState(null, "", hash); route(); } else location.hash = hash;
}

function dispose() {
  if (!active) return;
  active.controller.abort();
  for (const fn of active.disposers) {
    try { fn(); } catch { /* a disposer failing must not keep the next page from showing */ }
  }
  active = null;
}

async function route() {
  const { segments, query } = parseHash();
  if (!segments.length) { navigate(DEFAULT_ROUTE, { replace: true }); return; }
  const found = match(segments);
  const s = session();
  if (found && !found.route.public && !s) {
    const back = `#/${segments.map(encodeURIComponent).join("/")}`;
    navigate(`#/signin?next=${encodeURIComponent(back)}`, { replace: true });
    return;
  }
  dispose();
  toggleNav(false);
  const controller = new AbortController();
  active = { controller, disposers: [] };
  for (const [section, link] of navLinks) {
    const on = found && found.route.section === section;
    link.classList.toggle("active", Boolean(on));
    if (on) link.setAttribute("aria-current", "page"); else link.removeAttribute("aria-current");
  }
  document.body.dataset.page = found ? found.route.pattern[0] : "missing";
  const root = h("div", { class: "page" });
  setChildren(main, root);
  if (found && lastPath !== segments.join("/")) window.scrollTo(0, 0);
  lastPath = segments.join("/");
  if (!found) {
    root.append(h("h1", {}, "Not found"), h("p", {}, "No page here. ",
      h("a", { href: DEFAULT_ROUTE }, "Back to stacks"), "."));
    return;
  }
  const ctx = {
    root,
    params: found.params,
    query,
    signal: controller.signal,
    onDispose: (fn) => active && active.controller === controller && active.disposers.push(fn),
    navigate,
    session: s,
    takeMessage: () => { const m = pendingMessage; pendingMessage = ""; return m; },
  };
  try {
    await found.route.page.render(ctx);
  } catch (error) {
    if (controller.signal.aborted || (error && error.name === "AbortError")) return;
    root.append(errorBox(error));
  }
}

// A 401 anywhere: forget the token and ask to sign in again, saying why.
onUnauthorized((message) => {
  if (!session()) return;
  pendingMessage = `You were signed out: ${message}`;
  const { segments } = parseHash();
  const back = segments[0] === "signin" ? "" : `#/${segments.map(encodeURIComponent).join("/")}`;
  setSession(null);
  navigate(back ? `#/signin?next=${encodeURIComponent(back)}` : "#/signin");
});

// Relative times ("3 min ago") stay true while a page is open.
setInterval(() => {
  if (document.visibilityState !== "visible") return;
  const now = Date.now();
  for (const el of main.querySelectorAll("time[datetime]")) {
    const text = formatRelative(el.getAttribute("datetime"), now);
    if (el.textContent !== text) el.textContent = text;
  }
}, 20000);

onSessionChange(renderWho);
renderWho(session());
window.addEventListener("hashchange", route);
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && document.body.classList.contains("nav-open")) toggleNav(false);
});
route();
