// One approval of a tool call, as the inbox and the chain view show it: the form that decides
// it (its arguments as JSON to check or edit before approving, a reason, Approve / Deny) and
// what was decided (approved, with edited arguments, denied or expired; by whom, why).
import { useState } from "preact/hooks";
import { api } from "../api.js";
import { ErrorNote } from "../components.jsx";
import { json, when } from "../format.js";
import { useAction } from "../hooks.js";
import "./decision.css";

// The arguments as typed: { value } when the text is a JSON object, else { problem }.
export function parseArguments(text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { problem: `Not valid JSON: ${error.message}` };
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return { problem: "The arguments must be a JSON object." };
  }
  return { value };
}

// JSON with the keys of every object sorted: two values are the same when these are equal.
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    const keys = Object.keys(value).sort();
    return `{${keys.map((key) => `${JSON.stringify(key)}:${canonical(value[key])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

export function sameArguments(left, right) {
  return canonical(left) === canonical(right);
}

// Whether the call ran (or was let run) with other arguments than the ones it asked for.
export function editedArguments(approval) {
  const decided = approval.decided_arguments;
  if (decided === null || decided === undefined) return null;
  if (approval.arguments && sameArguments(decided, approval.arguments)) return null;
  return decided;
}

const VERBS = { approved: "Approved", denied: "Denied", expired: "Expired" };

// What was decided, for an approval that is no longer pending.
export function Decision({ approval }) {
  if (approval.status === "pending") return null;
  const edited = approval.status === "approved" ? editedArguments(approval) : null;
  const verb = VERBS[approval.status] || approval.status;
  return (
    <div class={`decision decision-${approval.status}`} data-decision={approval.status}>
      <p class="decision-text">
        <strong>{verb}</strong>
        {edited && " with edited arguments"}
        {approval.decided_by ? (
          <>
            {" by "}
            <span class="mono decided-by">{approval.decided_by}</span>
          </>
        ) : (
          approval.status === "expired" && " unanswered"
        )}
        {approval.decided_at && (
          <span class="muted">
            {" "}
            at <time dateTime={approval.decided_at}>{when(approval.decided_at)}</time>
          </span>
        )}
      </p>
      {approval.reason && (
        <p class="decision-reason">
          Reason: <q>{approval.reason}</q>
        </p>
      )}
      {edited && (
        <div class="decided-arguments">
          <span class="muted small">The call ran with:</span>
          <pre>{json(edited)}</pre>
        </div>
      )}
    </div>
  );
}

// Approve (with the arguments as edited, when they were) or deny `approval`; `onDecided`
// gets the updated approval the API answers.
export function DecideForm({ approval, onDecided }) {
  const original = approval.arguments;
  const [text, setText] = useState(original === null || original === undefined ? "" : json(original));
  const [reason, setReason] = useState("");
  const parsed = original === null || original === undefined ? null : parseArguments(text);
  const [decide, state] = useAction((body) =>
    api(`/api/v1/tasks/${approval.task_id}/approvals/${approval.id}`, { method: "POST", body }),
  );
  const problemId = `arguments-problem-${approval.id}`;

  const send = async (decision) => {
    const body = { decision };
    if (decision === "approve" && parsed?.value && !sameArguments(parsed.value, original)) {
      body.arguments = parsed.value;
    }
    if (reason.trim()) body.reason = reason.trim();
    const updated = await decide(body);
    if (updated) onDecided?.(updated);
  };

  return (
    <form
      class="decide"
      aria-label={`Decide on the ${approval.tool} call`}
      onSubmit={(event) => event.preventDefault()}
    >
      {parsed === null ? (
        <p class="arguments-hidden muted">
          Your roles do not let you see this call's arguments. Approving runs it with them as
          they are.
        </p>
      ) : (
        <div class="field">
          <label class="field-control">
            <span class="field-label">Arguments (JSON)</span>
            <textarea
              class="arguments-editor"
              rows={Math.min(12, Math.max(3, text.split("\n").length))}
              value={text}
              spellcheck={false}
              aria-invalid={parsed.problem ? "true" : "false"}
              aria-describedby={parsed.problem ? problemId : undefined}
              onInput={(event) => setText(event.currentTarget.value)}
            />
          </label>
          {parsed.problem ? (
            <span class="field-problem" id={problemId} role="alert">
              {parsed.problem}
            </span>
          ) : (
            <span class="field-hint">
              {sameArguments(parsed.value, original)
                ? "Edit them to run the call with other arguments."
                : "Edited: approving runs the call with these arguments."}
            </span>
          )}
        </div>
      )}
      {approval.input_schema && (
        <details class="schema">
          <summary>Argument schema</summary>
          <pre>{json(approval.input_schema)}</pre>
        </details>
      )}
      <label class="field">
        <span class="field-label">Reason (optional)</span>
        <input
          type="text"
          value={reason}
          maxLength={1000}
          placeholder="Why — the model is told when the call is denied"
          onInput={(event) => setReason(event.currentTarget.value)}
        />
      </label>
      <ErrorNote error={state.error} />
      <div class="actions">
        <button
          type="button"
          class="primary"
          disabled={state.busy || Boolean(parsed?.problem)}
          onClick={() => send("approve")}
        >
          Approve
        </button>
        <button type="button" class="danger" disabled={state.busy} onClick={() => send("deny")}>
          Deny
        </button>
        {state.busy && <span class="muted">Sending…</span>}
      </div>
    </form>
  );
}
