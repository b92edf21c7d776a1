// The service's API as the console calls it: same origin, the signed-in credential as a
// bearer token, problem+json errors as ApiError. Streams follow a task with a stream ticket
// and a plain EventSource, resuming from the last event id when the connection drops.

export const ROOT = document.querySelector('meta[name="omniforge-root"]')?.content ?? "";
const CREDENTIAL = "omniforge.credential";

let credential = sessionStorage.getItem(CREDENTIAL);
let onSignedOut = () => {};

export function setCredential(value) {
  credential = value;
  if (value) sessionStorage.setItem(CREDENTIAL, value);
  else sessionStorage.removeItem(CREDENTIAL);
}

export function hasCredential() {
  return Boolean(credential);
}

export function whenSignedOut(callback) {
  onSignedOut = callback;
}

export class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.type = problem.type || "about:blank";
    this.title = problem.title || "";
    this.errors = problem.errors || [];
    this.permission = problem.permission || null;
  }
}

export function url(path, query) {
  const target = new URL(ROOT + path, location.origin);
  for (const [name, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== "") target.searchParams.set(name, value);
  }
  return target;
}

export async function api(path, { method = "GET", body, query, accept, raw = false, token } = {}) {
  const headers = { Accept: accept || "application/json" };
  const bearer = token ?? credential;
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  const init = { method, headers };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(url(path, query), init);
  if (!response.ok) {
    let problem;
    try {
      problem = await response.json();
    } catch {
      problem = { title: response.statusText };
    }
    const error = new ApiError(response.status, problem);
    if (response.status === 401 && token === undefined && credential) {
      setCredential(null);
      onSignedOut(error);
    }
    throw error;
  }
  if (raw) return response;
  if (response.status === 204) return null;
  return response.json();
}

// A file the API answers (CSV reports), saved by the browser.
export async function download(path, { query, accept, filename }) {
  const response = await api(path, { query, accept, raw: true });
  const blob = await response.blob();
  const disposition = response.headers.get("Content-Disposition") || "";
  const named = /filename="([^"]+)"/.exec(disposition);
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = named ? named[1] : filename;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 0);
}

export const STREAM_EVENTS = [
  "chain_started",
  "task_status",
  "reasoning_step",
  "output_delta",
  "tool_progress",
  "approval_required",
  "approval_decided",
  "budget_warning",
  "chain_completed",
  "chain_failed",
  "done",
];

// Follows a task's stream until `done`: onEvent(type, data, id) for each event, in order, once.
// A dropped connection is resumed by the EventSource itself (Last-Event-ID, same ticket); a
// refused one (the ticket expired) with a new ticket from after the last event seen.
// `output_delta` events are live only and carry no SSE `id:`, so an EventSource reports them
// with the previous event's id: they are never taken for repeats of it (nor move the resume
// position). Returns a function that stops following.
const LIVE_ONLY = new Set(["output_delta"]);

export function follow(taskId, onEvent, { onError = () => {}, onOpen = () => {} } = {}) {
  let source = null;
  let stopped = false;
  let lastId = null;
  let retries = 0;

  async function open() {
    let ticket;
    try {
      ticket = await api(`/api/v1/tasks/${taskId}/stream-ticket`, { method: "POST" });
    } catch (error) {
      if (!stopped) onError(error);
      return;
    }
    if (stopped) return;
    const [path, search] = ticket.stream_url.split("?");
    const target = url(path, {
      ticket: new URLSearchParams(search).get("ticket"),
      after: lastId,
    });
    source = new EventSource(target);
    source.onopen = () => onOpen();
    for (const type of STREAM_EVENTS) {
      source.addEventListener(type, (event) => {
        if (stopped) return;
        retries = 0;
        if (!LIVE_ONLY.has(type)) {
          if (lastId !== null && Number(event.lastEventId) <= Number(lastId)) return;
          lastId = event.lastEventId;
        }
        onEvent(type, JSON.parse(event.data), event.lastEventId);
        if (type === "done") stop();
      });
    }
    source.onerror = () => {
      if (stopped || source.readyState !== EventSource.CLOSED) return;
      // Refused (the ticket is no longer valid, or the task ended with nothing more to
      // send): a new ticket, after a short pause that grows.
      retries += 1;
      if (retries > 5) {
        onError(new Error("the stream could not be resumed"));
        return;
      }
      setTimeout(() => {
        if (!stopped) open();
      }, Math.min(8000, 250 * 2 ** retries));
    };
  }

  function stop() {
    stopped = true;
    source?.close();
  }

  open();
  return stop;
}
