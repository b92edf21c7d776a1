// The approvals inbox: tool calls of the tenant's tasks that wait for a person, newest
// first. Each shows what asks (tool, task, when, until when, why) and its arguments as JSON
// to check or edit; approving or denying it takes it off the pending list.
import { useState } from "preact/hooks";
import { Card, Empty, ErrorNote, IdLink, LoadMore, Loading, Page, Status } from "../components.jsx";
import { relative, shortId, when } from "../format.js";
import { usePaged } from "../hooks.js";
import { navigate } from "../router.jsx";
import { useSession } from "../session.js";
import { Decision, DecideForm, editedArguments } from "../approvals/decision.jsx";
import "./approvals.css";

const STATUSES = ["pending", "approved", "denied", "expired"];
const PAGE_SIZE = 50;

function decidedMessage(approval) {
  const verb = { approved: "Approved", denied: "Denied", expired: "Expired" }[approval.status];
  const edited = approval.status === "approved" && editedArguments(approval);
  return `${verb || approval.status} the ${approval.tool} call of task ${shortId(approval.task_id)}${
    edited ? " with edited arguments" : ""
  }.`;
}

function ApprovalItem({ approval, canDecide, onDecided }) {
  const pending = approval.status === "pending";
  return (
    <li
      class={`approval-item ${pending ? "pending" : "decided"}`}
      data-approval-id={approval.id}
      data-task-id={approval.task_id}
      aria-label={`${approval.tool} call of task ${shortId(approval.task_id)}`}
    >
      <header class="approval-head">
        <code class="tool-name">{approval.tool}</code>
        <span class="badge">{approval.tool_type}</span>
        <Status value={approval.status} />
        <span class="approval-task">
          task <IdLink to={`/tasks/${approval.task_id}`} id={approval.task_id} />
        </span>
      </header>
      <dl class="approval-facts">
        <div>
          <dt>Asked</dt>
          <dd>
            <time dateTime={approval.created_at}>{when(approval.created_at)}</time>
          </dd>
        </div>
        <div>
          <dt>{pending ? "Expires" : "Expiry"}</dt>
          <dd>
            {approval.expires_at ? (
              <>
                <time dateTime={approval.expires_at}>{when(approval.expires_at)}</time>
                {pending && <span class="muted"> ({relative(approval.expires_at)})</span>}
              </>
            ) : (
              "never"
            )}
          </dd>
        </div>
      </dl>
      {approval.note && <p class="approval-note">{approval.note}</p>}
      {pending ? (
        canDecide === "any" ? (
          <DecideForm approval={approval} onDecided={onDecided} />
        ) : canDecide === "own" ? (
          <>
            <p class="muted small decide-own">
              You may decide on calls of your own tasks, where their agent lets the task's
              submitter decide.
            </p>
            <DecideForm approval={approval} onDecided={onDecided} />
          </>
        ) : (
          <p class="muted">Your roles do not let you decide on tool calls.</p>
        )
      ) : (
        <Decision approval={approval} />
      )}
    </li>
  );
}

export function ApprovalsPage({ query }) {
  const { can } = useSession();
  const [status, setStatus] = useState(query.get("status") || "pending");
  const list = usePaged("/api/v1/approvals", {
    status: status === "any" ? "" : status,
    limit: PAGE_SIZE,
  });
  // Decided here: id → the approval as the API answered the decision.
  const [decided, setDecided] = useState({});
  const [notices, setNotices] = useState([]);

  const filter = (value) => {
    setStatus(value);
    setDecided({});
    setNotices([]);
    navigate("/approvals", { query: value === "pending" ? undefined : { status: value }, replace: true });
  };
  const onDecided = (approval) => {
    setDecided((old) => ({ ...old, [approval.id]: approval }));
    setNotices((old) => [decidedMessage(approval), ...old].slice(0, 5));
  };

  const approvals = list.items
    .map((approval) => decided[approval.id] ?? approval)
    .filter((approval) => status !== "pending" || approval.status === "pending");

  return (
    <Page
      title="Approvals"
      subtitle="Tool calls of your tenant's tasks that wait for a person's decision, newest first."
    >
      {notices.length > 0 && (
        <ul class="approval-notices" role="status" aria-label="Decisions">
          {notices.map((notice, index) => (
            <li key={`${index}-${notice}`}>{notice}</li>
          ))}
        </ul>
      )}
      <Card
        title={status === "pending" ? "Waiting for a decision" : "Approvals"}
        actions={
          <form
            class="inline-fields filters"
            role="search"
            aria-label="Filter approvals"
            onSubmit={(event) => event.preventDefault()}
          >
            <label class="field">
              <span class="field-label">Status</span>
              <select value={status} onChange={(event) => filter(event.currentTarget.value)}>
                {STATUSES.map((value) => (
                  <option key={value} value={value}>
                    {value}
                  </option>
                ))}
                <option value="any">any status</option>
              </select>
            </label>
            <button
              type="button"
              onClick={() => {
                setDecided({});
                list.reload();
              }}
              disabled={list.loading}
            >
              Refresh
            </button>
          </form>
        }
      >
        <ErrorNote error={list.error} />
        {list.loading && list.items.length === 0 ? (
          <Loading what="Loading the approvals" />
        ) : approvals.length === 0 ? (
          !list.error && (
            <Empty>
              {status === "pending"
                ? "No tool call is waiting for a decision."
                : "No approval has this status."}
            </Empty>
          )
        ) : (
          <ul class="approvals" aria-label="Approvals">
            {approvals.map((approval) => (
              <ApprovalItem
                key={approval.id}
                approval={approval}
                canDecide={can("task:approve") ? "any" : can("task:create") ? "own" : null}
                onDecided={onDecided}
              />
            ))}
          </ul>
        )}
        <LoadMore list={list} />
      </Card>
    </Page>
  );
}
