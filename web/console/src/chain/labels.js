// Small readings of a task shared by the task list, the task page and the conversations.
import { duration } from "../format.js";
import { FINISHED as FINISHED_STATES } from "./model.js";

export function agentLabel(task) {
  return task.agent ? `${task.agent.name}@${task.agent.version}` : task.model;
}

// What was asked: the text input, or the last user message of a chat.
export function inputText(task) {
  if (task.input) return task.input;
  const messages = task.messages || [];
  for (let index = messages.length - 1; index >= 0; index -= 1) {
    if (messages[index].role === "user" && messages[index].content) return messages[index].content;
  }
  return "";
}

export function excerpt(text, limit = 90) {
  const flat = (text || "").replace(/\s+/g, " ").trim();
  return flat.length > limit ? `${flat.slice(0, limit - 1)}…` : flat;
}

// Wall time from start to finish (or to now, for a task still running), as text.
export function wallTime(task, now = Date.now()) {
  if (!task.started_at) return "—";
  const end = task.finished_at ? Date.parse(task.finished_at) : now;
  return duration(Math.max(0, end - Date.parse(task.started_at)));
}

const BUDGETS = [
  ["cost_usd", (value) => `$${value}`],
  ["tokens", (value) => `${Number(value).toLocaleString("en-US")} tokens`],
  ["llm_calls", (value) => `${value} LLM calls`],
  ["steps", (value) => `${value} steps`],
  ["duration_s", (value) => `${Number(value).toFixed(1)} s`],
];

// What is left of the task's budgets, or null when it has none.
export function remainingBudget(metrics) {
  const remaining = metrics?.remaining_budget;
  if (!remaining) return null;
  const parts = BUDGETS.filter(([key]) => remaining[key] !== null && remaining[key] !== undefined)
    .map(([key, show]) => show(remaining[key]));
  return parts.length ? parts.join(" · ") : null;
}

// Whether the signed-in caller may cancel `task` now: members cancel their own unfinished
// tasks, tenant (and platform) admins any.
export function mayCancel(session, task) {
  if (!session.can("task:cancel") || FINISHED_STATES.has(task.status)) return false;
  const admin = session.me.roles.some((role) => role === "tenant_admin" || role === "platform_admin");
  return admin || task.user_id === session.me.subject;
}
