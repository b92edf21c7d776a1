// One task: what was asked, where it stands, its answer and usage, and its chain as a live
// timeline — followed from the task's stream while it runs, read whole once it has finished.
import { useEffect, useState } from "preact/hooks";
import { api } from "../api.js";
import { Card, Empty, ErrorNote, Loading, Page, Stat, Status } from "../components.jsx";
import { count, duration, json, shortId, usd, when } from "../format.js";
import { useApi, useAction } from "../hooks.js";
import { Link } from "../router.jsx";
import { useSession } from "../session.js";
import { agentLabel, inputText, mayCancel, remainingBudget, wallTime } from "../chain/labels.js";
import { draftAnswer, familyPendingApprovals, isFinished } from "../chain/model.js";
import { Origin, ReplayAndFork, ReplayReport } from "../chain/replays.jsx";
import { PlanGraph, SearchTree, planGraph, searchTree, strategyNotes } from "../chain/strategy.jsx";
import { Timeline } from "../chain/timeline.jsx";
import { useTaskChain } from "../chain/use-chain.js";
import { EraseButton } from "../erase.jsx";
import "./chain.css";

function Metrics({ task, metrics, live }) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (!live) return undefined;
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, [live]);
  const m = metrics || {};
  const left = remainingBudget(metrics);
  return (
    <div class="stats task-metrics" aria-label="Metrics">
      <Stat label="Steps" value={count(m.total_steps)} />
      <Stat label="LLM calls" value={count(m.llm_calls)} />
      <Stat
        label="Tool calls"
        value={count(m.tool_calls)}
        hint={m.failed_tool_calls ? `${m.failed_tool_calls} failed` : undefined}
      />
      <Stat label="Tokens in" value={count(m.input_tokens)} />
      <Stat label="Tokens out" value={count(m.output_tokens)} />
      <Stat
        label="Cost"
        value={usd(m.total_cost_usd)}
        hint={m.unpriced_calls ? `${m.unpriced_calls} unpriced` : undefined}
      />
      <Stat
        label="Duration"
        value={wallTime(task, now)}
        hint={m.total_duration_ms ? `${duration(m.total_duration_ms)} in calls` : undefined}
      />
      <Stat label="Budget left" value={left ?? "no budget"} />
    </div>
  );
}

function Answer({ task, chain }) {
  const answer = chain.answer ?? task.answer;
  const output = chain.output ?? task.output;
  const failure = chain.error ?? (task.error_code ? { code: task.error_code, message: task.error_message } : null);
  const draft = draftAnswer({ ...chain, answer });
  const stopReason = chain.stopReason ?? task.stop_reason;
  if (answer !== null && answer !== undefined) {
    return (
      <div class="answer" data-answer="final">
        {stopReason && (
          <p class="badge warn">Incomplete: stopped by {stopReason}</p>
        )}
        <p class="answer-text">{answer}</p>
        {output !== null && output !== undefined && <pre>{json(output)}</pre>}
      </div>
    );
  }
  if (failure) {
    return (
      <div class="answer failed" data-answer="error">
        <p>
          <code>{failure.code}</code> {failure.message}
        </p>
      </div>
    );
  }
  if (draft) {
    return (
      <div class="answer drafting" data-answer="draft" aria-live="polite">
        <p class="answer-text typing">{draft}</p>
        <p class="muted small">Being written…</p>
      </div>
    );
  }
  if (isFinished(task.status)) {
    return (
      <p class="muted" data-answer="none">
        No answer.
      </p>
    );
  }
  return (
    <p class="muted" data-answer="waiting">
      Waiting for the answer…
    </p>
  );
}

function CancelButton({ task, onCancelled }) {
  const session = useSession();
  const [cancel, state] = useAction(() =>
    api(`/api/v1/tasks/${task.id}/cancel`, { method: "POST" }),
  );
  if (!mayCancel(session, task)) return null;
  return (
    <>
      <button
        class="danger"
        disabled={state.busy}
        onClick={async () => {
          const cancelled = await cancel();
          if (cancelled) onCancelled(cancelled);
        }}
      >
        {state.busy ? "Cancelling…" : "Cancel task"}
      </button>
      {state.error && <ErrorNote error={state.error} />}
    </>
  );
}

export function TaskPage({ params }) {
  const [id] = params;
  const { can, me } = useSession();
  const { data: loaded, error, reload } = useApi(`/api/v1/tasks/${id}`);
  const [task, setTask] = useState(null);
  useEffect(() => {
    if (loaded) setTask(loaded);
  }, [loaded]);
  const readsChain = can("chain:read");
  const { chain, error: chainError, noteApproval } = useTaskChain(task, {
    enabled: readsChain,
    onDone: () => reload(),
  });

  if (error) {
    return (
      <Page title="Task">
        <ErrorNote error={error} />
        <Link to="/tasks">Back to the tasks</Link>
      </Page>
    );
  }
  if (!task) return <Page title="Task"><Loading what="Loading the task" /></Page>;

  const status = (chain.following || chain.ended) && chain.status ? chain.status : task.status;
  const shown = { ...task, status };
  const waiting = isFinished(status) ? [] : familyPendingApprovals(chain);
  // Tenant admins decide on any call; a task's submitter where its agent lets them (the
  // API says which: a refusal shows here as its problem).
  const mayDecide = can("task:approve") || (can("task:create") && task.user_id === me.subject);
  return (
    <Page
      title={
        <>
          Task <span class="mono">{shortId(task.id)}</span>
        </>
      }
      subtitle={
        <span class="task-subtitle">
          <Status value={status} /> <span>{agentLabel(task)}</span>
          {task.agent && <span class="muted">model {task.model}</span>}
          {task.conversation_id && (
            <Link to={`/conversations/${task.conversation_id}`}>
              turn {task.turn} of a conversation
            </Link>
          )}
          <Origin task={task} />
          <span class="muted">created {when(task.created_at)}</span>
        </span>
      }
      actions={
        <>
          {chain.following && (
            <span class="following" role="status">
              <span class="pulse" aria-hidden="true" /> Following live…
            </span>
          )}
          <CancelButton task={shown} onCancelled={(cancelled) => setTask(cancelled)} />
          <EraseButton kind="task" id={task.id} />
        </>
      }
    >
      <div class="grid two task-overview">
        <Card title="Input">
          <pre class="task-input">{inputText(task) || json(task.messages)}</pre>
        </Card>
        <Card title="Answer">
          <Answer task={shown} chain={chain} />
        </Card>
      </div>
      {task.replay_report && (
        <Card title="Replay">
          <ReplayReport report={task.replay_report} />
        </Card>
      )}
      <Card title="Usage">
        <Metrics task={task} metrics={chain.metrics ?? task.usage} live={!isFinished(status)} />
      </Card>
      {waiting.length > 0 && (
        <div class="approval-banner" role="status">
          <strong>
            Waiting for approval of{" "}
            <code>{[...new Set(waiting.map((approval) => approval.tool))].join(", ")}</code>
          </strong>
          : the run goes on once a person decides
          {mayDecide ? " — below, or in " : " in "}
          <Link to="/approvals">the approvals inbox</Link>.
        </div>
      )}
      {chain.warning && (
        <div class="budget-warning" role="status">
          Budget warning: {chain.warning.limits.join(", ")} is 80% used.
          {remainingBudget(chain.warning.metrics) && ` Left: ${remainingBudget(chain.warning.metrics)}.`}
        </div>
      )}
      {readsChain && can("task:create") && isFinished(status) && (
        <details class="card replay-card">
          <summary>Replay or fork this task</summary>
          <ReplayAndFork task={task} steps={chain.steps.length} />
        </details>
      )}
      {readsChain && <Strategy steps={chain.steps} />}
      <Card title="Chain" actions={<span class="mono muted">{shortId(task.chain_id)}</span>}>
        {!readsChain ? (
          <Empty>Your roles do not let you read this task's chain.</Empty>
        ) : (
          <>
            <ErrorNote error={chainError} />
            {chain.steps.length === 0 ? (
              chain.following ? (
                <Loading what="Waiting for the first step" />
              ) : !chain.loaded && !chain.ended ? (
                !chainError && <Loading what="Loading the chain" />
              ) : (
                <Empty>No steps you may see.</Empty>
              )
            ) : (
              <Timeline chain={chain} decide={mayDecide ? noteApproval : undefined} />
            )}
          </>
        )}
      </Card>
    </Page>
  );
}

// How the run reasoned, when its strategy says: `auto`'s choice and fallbacks, a search's tree.
function Strategy({ steps }) {
  const notes = strategyNotes(steps);
  const tree = searchTree(steps);
  const plan = planGraph(steps);
  if (notes.length === 0 && tree.length === 0 && !plan) return null;
  const title = plan ? "Plan" : tree.length ? "Search tree" : "Strategy";
  return (
    <Card
      title={title}
      class="strategy-card"
      actions={plan && plan.revisions > 0 && <span class="badge warn">revised {plan.revisions}×</span>}
    >
      {notes.map((note) => (
        <p key={note.id} class={`strategy-note ${note.event}`} data-strategy-event={note.event}>
          {note.text}
        </p>
      ))}
      {plan && <PlanGraph graph={plan} />}
      {tree.length > 0 && <SearchTree roots={tree} />}
    </Card>
  );
}
