// The one way the console talks to Ember: same-origin fetch with the
// session's token, JSON in and out, and failures turned into the API's own
// message (Heat, Senlin, Keystone and the compute API all answer
// {"error": {"message": …}}; some older shapes put it elsewhere).

const STORAGE_KEY = "ember.console.session";

/** The Senlin microversion the console speaks (1.12+ is needed to cancel
 *  actions; 1.14 is the gateway's newest). */
export const CLUSTERING_VERSION = "clustering 1.14";

export class ApiError extends Error {
  constructor(message, { status = 0, body = null, type = "", method = "", path = "" } = {}) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.body = body;
    this.type = type;
    this.method = method;
    this.path = path;
  }
}

// ---------------------------------------------------------------- session

let current = load();
const listeners = new Set();

function load() {
  try {
    const text = sessionStorage.getItem(STORAGE_KEY);
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}

export function session() {
  return current;
}

export function setSession(value) {
  current = value;
  if (value) sessionStorage.setItem(STORAGE_KEY, JSON.stringify(value));
  else sessionStorage.removeItem(STORAGE_KEY);
  for (const listener of listeners) listener(current);
}

export function onSessionChange(listener) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** Called with the API's message when a call answers 401 (set by app.js). */
let unauthorizedHandler = null;
export function onUnauthorized(handler) {
  unauthorizedHandler = handler;
}

// ---------------------------------------------------------------- errors

/** The message an error body carries, in any of the shapes Ember's APIs
 *  (and the OpenStack ones they copy) use. */
export function errorMessage(body, status, statusText) {
  if (body && typeof body === "object") {
    const error = body.error;
    if (error && typeof error === "object") {
      if (error.message) return String(error.message);
      if (error.explanation) return String(error.explanation);
    }
    if (typeof error === "string" && error) return error;
    if (body.explanation) return String(body.explanation);
    if (body.message) return String(body.message);
    if (body.badRequest && body.badRequest.message) return String(body.badRequest.message);
    if (body.conflictingRequest && body.conflictingRequest.message) return String(body.conflictingRequest.message);
    if (body.title) return String(body.title);
  }
  if (typeof body === "string" && body.trim()) return body.trim().slice(0, 500);
  return `${status} ${statusText || "error"}`.trim();
}

// ---------------------------------------------------------------- calls

/**
 * api(path, {method, body, headers, signal, auth, raw}) → parsed JSON (or
 * null for an empty body). `body` objects are sent as JSON. `auth: false`
 * sends no token and does not treat 401 as "signed out" (sign-in uses it).
 * `raw: true` resolves to {response, body} instead.
 */
export async function api(path, options = {}) {
  const { method = "GET", body, headers = {}, signal, auth = true, raw = false, token } = options;
  const sent = { Accept: "application/json", ...headers };
  const bearer = token || (auth && current && current.token);
  if (bearer) sent["X-Auth-Token"] = bearer;
  if (path.startsWith("/clustering/") && !sent["OpenStack-API-Version"]) {
    sent["OpenStack-API-Version"] = CLUSTERING_VERSION;
  }
  let payload;
  if (body !== undefined) {
    sent["Content-Type"] = "application/json";
    payload = typeof body === "string" ? body : JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, { method, headers: sent, body: payload, signal,
      credentials: "omit", cache: "no-store" });
  } catch (error) {
    if (error && error.name === "AbortError") throw error;
    throw new ApiError(`Ember could not be reached (${method} ${path}): ${error.message || error}`,
      { method, path });
  }
  const text = await response.text();
  let parsed = null;
  if (text) {
    try { parsed = JSON.parse(text); } catch { parsed = text; }
  }
  if (!response.ok) {
    const message = errorMessage(parsed, response.status, response.statusText);
    const type = parsed && parsed.error && parsed.error.type ? parsed.error.type : "";
    const error = new ApiError(message, { status: response.status, body: parsed, type, method, path });
    if (response.status === 401 && auth && !token && unauthorizedHandler) unauthorizedHandler(message);
    throw error;
  }
  return raw ? { response, body: parsed } : parsed;
}

/** Appends a query string built from an object (undefined/null/"" skipped;
 *  arrays repeat the key). */
export function withQuery(path, query) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query || {})) {
    if (value === undefined || value === null || value === "") continue;
    if (Array.isArray(value)) value.forEach((item) => params.append(key, item));
    else params.append(key, String(value));
  }
  const text = params.toString();
  return text ? `${path}${path.includes("?") ? "&" : "?"}${text}` : path;
}

export const seg = encodeURIComponent;

// ---------------------------------------------------------------- identity

function sessionFromToken(token, body) {
  const t = (body && body.token) || {};
  return {
    token,
    user: (t.user && t.user.name) || "",
    userId: (t.user && t.user.id) || "",
    project: (t.project && t.project.name) || "",
    projectId: (t.project && t.project.id) || "",
    roles: (t.roles || []).map((role) => role.name || role.id).filter(Boolean),
    expiresAt: t.expires_at || null,
  };
}

/** Password sign-in through the Keystone front door. */
export async function signInWithPassword({ user, password, project, signal }) {
  const scope = project ? { project: { name: project, domain: { id: "default" } } } : undefined;
  const request = {
    auth: {
      identity: {
        methods: ["password"],
        password: { user: { name: user, domain: { id: "default" }, password } },
      },
      ...(scope ? { scope } : {}),
    },
  };
  const { response, body } = await api("/identity/v3/auth/tokens?nocatalog", {
    method: "POST", body: request, auth: false, raw: true, signal,
  });
  const token = response.headers.get("X-Subject-Token");
  if (!token) throw new ApiError("the gateway answered without an X-Subject-Token header");
  return sessionFromToken(token, body);
}

/** Validates a pasted token (it validates itself) and learns who it is. */
export async function signInWithToken(token, { signal } = {}) {
  const body = await api("/identity/v3/auth/tokens?nocatalog", {
    token, headers: { "X-Subject-Token": token }, signal,
  });
  return sessionFromToken(token, body);
}

/** Revokes the session's token (best effort) and forgets it. */
export async function signOut() {
  const s = current;
  setSession(null);
  if (!s) return;
  try {
    await api("/identity/v3/auth/tokens", {
      method: "DELETE", token: s.token, headers: { "X-Subject-Token": s.token },
    });
  } catch {
    // Signed out locally either way; the token expires on its own.
  }
}

// ---------------------------------------------------------------- URLs

/** The Heat API base of the session's project. */
export function heat() {
  return `/orchestration/v1/${seg((current && current.projectId) || "")}`;
}

export function stackPath(name, id) {
  return `${heat()}/stacks/${seg(name)}/${seg(id)}`;
}

export const SENLIN = "/clustering/v1";
export const COMPUTE = "/compute/v1";

/** A Heat link href (absolute, or a path) → {name, id} of the stack it
 *  names (`…/stacks/{name}/{id}` or the lookup form `…/stacks/{id}`). */
export function stackRefFromHref(href) {
  try {
    const url = new URL(href, location.origin);
    const match = url.pathname.match(/\/stacks\/([^/]+)(?:\/([^/]+))?\/?$/);
    if (!match) return null;
    const first = decodeURIComponent(match[1]);
    return match[2] ? { name: first, id: decodeURIComponent(match[2]) } : { name: null, id: first };
  } catch {
    return null;
  }
}

/** Console route of a stack. */
export function stackRoute(name, id) {
  return id ? `#/stacks/${seg(name)}/${seg(id)}` : `#/stacks/${seg(name)}`;
}
