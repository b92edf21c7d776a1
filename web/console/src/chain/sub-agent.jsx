// A sub-agent's chain, nested under the call that started it: the child's steps in the same
// timeline (its own sub-agents nested in turn), where it stands, its answer or failure and
// what its family used. While the parent runs it is built from the events the parent's stream
// relays and is open; once the call has a result it starts closed, and the child's chain is
// read when first opened: the call's result already says how the child ended and what it
// used, and a chain that fans out to many sub-agents (each maybe delegating again) costs no
// reads for the children nobody opens.
import { useEffect, useState } from "preact/hooks";
import { api } from "../api.js";
import { ErrorNote, Loading, Status } from "../components.jsx";
import { count, usd } from "../format.js";
import { Link } from "../router.jsx";
import { childOf, loadedChild } from "./model.js";
import { Timeline } from "./timeline.jsx";

const PREFIX = "agent__";

// The agent a sub-agent tool calls: its tool is the agent's name behind a prefix.
export function agentName(toolName) {
  return toolName.startsWith(PREFIX) ? toolName.slice(PREFIX.length) : toolName;
}

// The child's chain as read back: null until first opened, then {child} or {error}.
function useReadChild(taskId, wanted) {
  const [read, setRead] = useState(null);
  const needed = Boolean(wanted && taskId && !read);
  useEffect(() => {
    if (!needed) return undefined;
    let active = true;
    Promise.all([api(`/api/v1/tasks/${taskId}`), api(`/api/v1/tasks/${taskId}/chain`)])
      .then(([task, chain]) => active && setRead({ child: loadedChild(task, chain) }))
      .catch((error) => active && setRead({ error }));
    return () => {
      active = false;
    };
  }, [needed, taskId]);
  return read;
}

// What the child's family used: its chain's totals once known, else what the call's result
// says of it.
function ChildUsage({ child, result }) {
  const metrics = child?.metrics;
  const figures = metrics
    ? {
        llm_calls: metrics.llm_calls,
        tokens: [metrics.input_tokens, metrics.output_tokens],
        cost: metrics.total_cost_usd,
      }
    : result
      ? {
          llm_calls: result.llm_calls,
          tokens: [result.input_tokens, result.output_tokens],
          cost: result.cost_usd,
        }
      : null;
  if (!figures) return null;
  return (
    <span class="sub-agent-usage muted">
      <span data-child-usage="llm_calls">
        {count(figures.llm_calls ?? 0)} LLM {figures.llm_calls === 1 ? "call" : "calls"}
      </span>
      {figures.tokens[0] !== null && figures.tokens[0] !== undefined && (
        <span data-child-usage="tokens">
          {count(figures.tokens[0])} in · {count(figures.tokens[1])} out tokens
        </span>
      )}
      {figures.cost !== null && figures.cost !== undefined && (
        <span data-child-usage="cost">{usd(figures.cost)}</span>
      )}
    </span>
  );
}

function ChildEnd({ child, result }) {
  if (child?.answer !== null && child?.answer !== undefined) {
    return (
      <div class="sub-agent-answer" data-child-answer="final">
        <span class="sub-agent-answer-label">Answer</span>
        {child.stopReason && <span class="badge warn">stopped by {child.stopReason}</span>}
        <p class="answer-text">{child.answer}</p>
      </div>
    );
  }
  // The child's own failure where known; else what the call's result says of it.
  const failure =
    child?.error ??
    (result && !result.success ? { code: result.error_code, message: result.error } : null);
  if (!failure) return null;
  return (
    <div class="sub-agent-answer failed" data-child-answer="error">
      <span class="sub-agent-answer-label">Failed</span>
      <p>
        {failure.code && <code>{failure.code}</code>} {failure.message}
      </p>
    </div>
  );
}

// Under the `sub_agent` call `step` (completed by `result`, once it is): `family` holds the
// chains the stream relayed, `running` whether the parent's stream is still being followed.
export function SubAgent({ step, result, family, running, decide }) {
  const outcome = result?.tool_result ?? null;
  const streamed = childOf(family, step.id);
  const taskId = streamed?.taskId ?? outcome?.child_task_id ?? null;
  const chainId = streamed?.chainId ?? outcome?.child_chain_id ?? null;
  const [open, setOpen] = useState(!outcome);
  const read = useReadChild(outcome?.child_task_id, open && !streamed?.steps.length);
  // The call was refused before a child was started: its result alone says why.
  if (!taskId && outcome) return null;
  const child = streamed?.steps.length ? streamed : (read?.child ?? streamed);
  const status =
    child?.status ?? (outcome ? (outcome.success ? "completed" : "failed") : "working");
  const name = agentName(step.tool_call.tool_name);
  const childRunning = running && !child?.ended && !outcome;
  return (
    <div
      class="sub-agent"
      role="group"
      aria-label={`Sub-agent ${name}`}
      data-child-chain={chainId ?? ""}
      data-child-task={taskId ?? ""}
      data-child-status={status}
    >
      <details open={open} onToggle={(event) => setOpen(event.currentTarget.open)}>
        <summary class="sub-agent-head">
          <span class="sub-agent-kind">Sub-agent</span>
          <code class="sub-agent-name">{name}</code>
          <Status value={status} />
          {childRunning && <span class="pulse" aria-hidden="true" />}
          <ChildUsage child={child} result={outcome} />
        </summary>
        <div class="sub-agent-body">
          {read?.error && <ErrorNote error={read.error} />}
          {child?.steps.length ? (
            <Timeline
              chain={child}
              family={family}
              running={childRunning}
              decide={decide}
              label={`Steps of sub-agent ${name}`}
            />
          ) : read?.error ? null : !outcome ? (
            <Loading what="Waiting for its first step" />
          ) : !read ? (
            <Loading what="Loading its chain" />
          ) : (
            <p class="muted">No steps you may see.</p>
          )}
          <ChildEnd child={child} result={outcome} />
          {taskId && (
            <p class="sub-agent-link small">
              <Link to={`/tasks/${taskId}`}>Open the task of sub-agent {name}</Link>
            </p>
          )}
        </div>
      </details>
    </div>
  );
}
