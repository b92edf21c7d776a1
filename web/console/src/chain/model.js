// A task's chain as the console draws it, built from the chain the API reads back or from
// the task's stream, event by event. Only what the API sent is kept: a step may arrive whole
// or as a summary (no payload, `visibility.summary`), hidden steps never arrive.
//
// A task's stream also relays the events of its sub-agents' tasks (its children, theirs, and
// so on down), each marked with the child task's `depth` and the `parent_step_id` of the call
// that started it. Those build the children's chains in `children`, keyed by chain id, and
// never the task's own: a child's step numbers, status and answer are its own.

export const FINISHED = new Set(["completed", "incomplete", "failed", "cancelled"]);

export function isFinished(status) {
  return FINISHED.has(status);
}

export function initialChain(task) {
  return {
    taskId: task?.id ?? null,
    status: task?.status ?? null,
    steps: [],
    live: {}, // call step id → { attempt, content, reasoning }: an LLM call's reply so far
    progress: {}, // call step id → { message, fraction, reports }: a tool's last report
    metrics: task?.usage ?? null,
    answer: task?.answer ?? null,
    output: task?.output ?? null,
    stopReason: task?.stop_reason ?? null,
    error: task?.error_code ? { code: task.error_code, message: task.error_message } : null,
    warning: null,
    approvals: {}, // approval id → the approval (as the API reads it back, or from events)
    resumed: [], // times the run resumed (after a decision, or on another instance)
    following: false,
    ended: false,
    loaded: false, // the whole chain was read (a finished task)
    children: {}, // chain id → a sub-agent's chain, from relayed events (see `childChain`)
  };
}

// A sub-agent's chain as its relayed events build it: a chain like any other, plus where it
// hangs in the family. It has no `done` of its own (a child's is not relayed): it has ended
// once it completed or failed.
function childChain(data) {
  return {
    ...initialChain({ id: data.task_id }),
    chainId: data.chain_id,
    parentStepId: data.parent_step_id,
    depth: data.depth,
  };
}

// A finished sub-agent's chain as the API reads it back: its task and its chain.
export function loadedChild(task, chain) {
  return {
    ...ownReducer(initialChain(task), ["loaded", chain]),
    chainId: task.chain_id,
    parentStepId: task.parent_step_id,
    depth: task.depth,
    ended: true,
  };
}

// What the page itself dispatches: never a relayed event, whatever its data holds (a task
// read back has a `depth` of its own).
const PAGE_ACTIONS = new Set(["reset", "loaded", "following", "approvals"]);

function isRelayed(type, data) {
  if (PAGE_ACTIONS.has(type) || data === null || typeof data !== "object") return false;
  return data.depth !== undefined && data.depth !== null;
}

// How a child ended, from its chain's last event: its `done`, which says so for a task of its
// own, is not relayed.
function endOf(type, data) {
  if (type === "chain_completed") return data.stop_reason ? "incomplete" : "completed";
  if (type === "chain_failed") return data.error_code === "cancelled" ? "cancelled" : "failed";
  if (type === "task_status" && isFinished(data.state)) return data.state;
  return null;
}

function withChildEvent(state, type, data) {
  if (type === "done") return state; // never relayed, but a child's end is its chain's end
  const known = state.children[data.chain_id] ?? childChain(data);
  const next = ownReducer(known, [type, data]);
  const ended = endOf(type, data);
  const child = ended ? { ...next, status: ended, ended: true } : next;
  return { ...state, children: { ...state.children, [data.chain_id]: child } };
}

// The sub-agent chain started by call step `stepId`, as the stream built it, if it did.
export function childOf(children, stepId) {
  return Object.values(children ?? {}).find((child) => child.parentStepId === stepId) ?? null;
}

function childByTask(children, taskId) {
  return Object.values(children).find((child) => child.taskId === taskId) ?? null;
}

function withStep(steps, step) {
  if (steps.some((known) => known.id === step.id)) return steps;
  const next = [...steps, step];
  // Steps come in order; a resumed stream could only repeat, never reorder, but keep it sure.
  next.sort((a, b) => a.step_number - b.step_number);
  return next;
}

// An approval as last known: a decision is never undone by news of the approval still
// pending (the read-back and the stream may arrive in either order).
export function mergeApproval(known, incoming) {
  const fields = Object.fromEntries(
    Object.entries(incoming).filter(([, value]) => value !== undefined),
  );
  if (!known) return fields;
  if (fields.status === "pending" && known.status !== "pending") {
    return { ...fields, ...known };
  }
  return { ...known, ...fields };
}

function withApproval(state, approval) {
  return {
    ...state,
    approvals: { ...state.approvals, [approval.id]: mergeApproval(state.approvals[approval.id], approval) },
  };
}

// The approvals of a chain, oldest first.
export function approvalsOf(state) {
  return Object.values(state.approvals).sort(
    (a, b) => Date.parse(a.created_at ?? 0) - Date.parse(b.created_at ?? 0),
  );
}

export function pendingApprovals(state) {
  return approvalsOf(state).filter((approval) => approval.status === "pending");
}

// The approvals the task's run waits for: its own, and its sub-agents' (a child waiting
// holds up the call that started it).
export function familyPendingApprovals(state) {
  return [
    ...pendingApprovals(state),
    ...Object.values(state.children ?? {}).flatMap((child) =>
      child.ended ? [] : pendingApprovals(child),
    ),
  ];
}

// When the run went on after `approval` was decided: the first time it said it resumed
// after the decision; for a chain read back whole (no events), the first step after it.
export function resumedAfter(state, approval) {
  if (approval.status === "pending") return null;
  // The run waits from the moment it asks: a resume after that follows the decision.
  const asked = Date.parse(approval.created_at);
  const said = state.resumed.find((at) => Date.parse(at) >= asked);
  if (said) return { at: said, seen: "event" };
  if (!state.loaded || !approval.decided_at) return null;
  const since = Date.parse(approval.decided_at);
  const next = state.steps.find((step) => Date.parse(step.timestamp) >= since);
  return next ? { at: next.timestamp, seen: "step", step: next.step_number } : null;
}

// The reducer: `action` is [type, data] — a stream event, or "loaded" / "following" /
// "approvals". An event relayed from a sub-agent goes to that sub-agent's chain only.
export function chainReducer(state, [type, data]) {
  if (isRelayed(type, data)) return withChildEvent(state, type, data);
  if (type === "approvals") {
    // Approvals noted on the page: a sub-agent's go to its chain.
    const own = data.filter((approval) => !childByTask(state.children, approval.task_id));
    const children = { ...state.children };
    for (const approval of data) {
      const child = childByTask(children, approval.task_id);
      if (child) children[child.chainId] = ownReducer(child, ["approvals", [approval]]);
    }
    return ownReducer({ ...state, children }, ["approvals", own]);
  }
  return ownReducer(state, [type, data]);
}

// What an event (or read-back) does to the one chain it belongs to.
function ownReducer(state, [type, data]) {
  switch (type) {
    case "reset": // another task (or the same one, anew)
      return initialChain(data);
    case "loaded": // a finished chain read whole: GET /tasks/{id}/chain
      return {
        ...state,
        steps: [...data.steps].sort((a, b) => a.step_number - b.step_number),
        metrics: data.metrics ?? state.metrics,
        loaded: true,
      };
    case "following":
      return { ...state, following: data };
    case "task_status":
      return {
        ...state,
        status: data.state,
        resumed: data.resumed ? [...state.resumed, data.timestamp] : state.resumed,
      };
    case "approvals": // GET /tasks/{id}/approvals
      return {
        ...state,
        approvals: data.reduce(
          (known, approval) => ({ ...known, [approval.id]: mergeApproval(known[approval.id], approval) }),
          state.approvals,
        ),
      };
    case "approval_required":
      return withApproval(state, {
        id: data.approval_id,
        task_id: data.task_id,
        chain_id: data.chain_id,
        step_id: data.step_id,
        tool: data.tool_name,
        tool_type: data.tool_type,
        visibility: data.visibility,
        arguments: data.arguments,
        note: data.note,
        created_at: data.timestamp,
        expires_at: data.expires_at,
        status: "pending",
      });
    case "approval_decided":
      return withApproval(state, {
        id: data.approval_id,
        task_id: data.task_id,
        chain_id: data.chain_id,
        step_id: data.step_id,
        tool: data.tool_name,
        tool_type: data.tool_type,
        status: data.decision,
        decided_by: data.decided_by,
        reason: data.reason,
        decided_arguments: data.arguments,
        decided_at: data.timestamp,
      });
    case "reasoning_step":
      return { ...state, steps: withStep(state.steps, data.step), metrics: data.metrics };
    case "output_delta": {
      const known = state.live[data.step_id];
      // A retried call streams again from the start, with the next attempt.
      const base =
        known && known.attempt === data.attempt
          ? known
          : { attempt: data.attempt, content: "", reasoning: "" };
      const field = data.kind === "reasoning" ? "reasoning" : "content";
      return {
        ...state,
        live: { ...state.live, [data.step_id]: { ...base, [field]: base[field] + data.delta } },
      };
    }
    case "tool_progress": {
      const known = state.progress[data.step_id];
      return {
        ...state,
        progress: {
          ...state.progress,
          [data.step_id]: {
            message: data.message,
            fraction: data.fraction,
            reports: (known?.reports ?? 0) + 1,
          },
        },
      };
    }
    case "budget_warning":
      return { ...state, warning: data, metrics: data.metrics };
    case "chain_completed":
      return {
        ...state,
        answer: data.answer,
        output: data.output,
        stopReason: data.stop_reason,
        metrics: data.metrics,
      };
    case "chain_failed":
      return {
        ...state,
        error: { code: data.error_code, message: data.error_message, details: data.details },
        metrics: data.metrics,
      };
    case "done":
      return { ...state, status: data.final_state, following: false, ended: true };
    default:
      return state;
  }
}

export function isLLMCall(step) {
  const call = step.tool_call;
  return Boolean(call) && (call.tool_type === "llm" || call.tool_name === "llm");
}

// The timeline: each step in order, a tool call carrying the result that completes it.
// A result whose call the reader does not see (or not whole) stands alone.
export function timeline(steps) {
  const results = new Map();
  for (const step of steps) {
    if (step.tool_result) results.set(step.tool_result.correlation_id, step);
  }
  const paired = new Set();
  const entries = [];
  for (const step of steps) {
    if (step.tool_call) {
      const result = results.get(step.tool_call.correlation_id) ?? null;
      if (result) paired.add(result.id);
      entries.push({ step, result });
    } else {
      entries.push({ step, result: null });
    }
  }
  return entries.filter(({ step }) => !paired.has(step.id));
}

// The answer as it is being written: the reply of the newest LLM call the reader sees whole,
// while it streams, and once it ended without asking for tools (until the chain's answer
// comes). A call that ends with tool calls was not the answer; the next one may be.
export function draftAnswer(state) {
  if (state.answer !== null && state.answer !== undefined) return null;
  const results = new Map();
  for (const step of state.steps) {
    if (step.tool_result) results.set(step.tool_result.correlation_id, step.tool_result);
  }
  for (let index = state.steps.length - 1; index >= 0; index -= 1) {
    const step = state.steps[index];
    if (!isLLMCall(step)) continue;
    const result = results.get(step.tool_call.correlation_id);
    if (result) {
      const reply = result.result;
      const asked = Array.isArray(reply?.tool_calls) && reply.tool_calls.length > 0;
      return result.success && !asked && typeof reply?.content === "string" ? reply.content : null;
    }
    return state.live[step.id]?.content || null;
  }
  return null;
}
