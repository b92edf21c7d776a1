// The tenant's tasks, newest first: filters by status and agent, pages on demand, a form to
// submit a task (which then opens its live page), and cancelling what still runs.
import { useEffect, useRef, useState } from "preact/hooks";
import { api, follow } from "../api.js";
import { Card, Empty, ErrorNote, IdLink, LoadMore, Loading, Page, Status } from "../components.jsx";
import { count, usd, when } from "../format.js";
import { useAction, useApi, usePaged } from "../hooks.js";
import { navigate } from "../router.jsx";
import { useSession } from "../session.js";
import { agentLabel, excerpt, inputText, mayCancel, wallTime } from "../chain/labels.js";
import { isFinished } from "../chain/model.js";
import "./chain.css";

const STATUSES = [
  "submitted",
  "working",
  "input_required",
  "completed",
  "incomplete",
  "failed",
  "cancelled",
];
const PAGE_SIZE = 25;
// Running tasks of the first page whose streams the list follows to learn when they end. A
// browser opens at most 6 connections to a host over HTTP/1.1: the page keeps the others.
const FOLLOWED = 3;

// The agents a task may name (the newest versions; `default` first), read page by page.
function useAgents() {
  const [agents, setAgents] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    let active = true;
    (async () => {
      const all = [];
      let cursor = null;
      try {
        do {
          const page = await api("/api/v1/agents", { query: { cursor, limit: 200 } });
          all.push(...page.items);
          cursor = page.next_cursor;
        } while (cursor && all.length < 1000);
        if (active) setAgents(all);
      } catch (failure) {
        if (active) setError(failure);
      }
    })();
    return () => {
      active = false;
    };
  }, []);
  return { agents, error };
}

function SubmitForm({ agents }) {
  const [agent, setAgent] = useState("");
  const [model, setModel] = useState("");
  const [input, setInput] = useState("");
  const [streamOutput, setStreamOutput] = useState(true);
  const models = useApi(agent ? null : "/api/v1/models");
  const [submit, state] = useAction((body) => api("/api/v1/tasks", { method: "POST", body }));

  const onSubmit = async (event) => {
    event.preventDefault();
    const body = { input, stream_output: streamOutput };
    if (agent) body.agent = agent;
    else if (model) body.model = model;
    const accepted = await submit(body);
    if (accepted) navigate(`/tasks/${accepted.task_id}`);
  };

  return (
    <Card title="Run a task" class="submit-card">
      <form onSubmit={onSubmit} aria-label="Run a task">
        <div class="inline-fields submit-choices">
          <label class="field">
            <span class="field-label">Agent</span>
            <select value={agent} onChange={(event) => setAgent(event.currentTarget.value)}>
              <option value="">No agent (pick a model)</option>
              {(agents || []).map((item) => (
                <option key={item.name} value={item.name}>
                  {item.name}
                  {item.builtin ? " (built in)" : ` v${item.version}`}
                </option>
              ))}
            </select>
          </label>
          {!agent && (
            <label class="field">
              <span class="field-label">Model</span>
              <select value={model} onChange={(event) => setModel(event.currentTarget.value)}>
                <option value="">The default model</option>
                {(models.data?.items || []).map((item) => (
                  <option key={item.name} value={item.name}>
                    {item.name}
                    {item.default ? " (default)" : ""}
                  </option>
                ))}
              </select>
            </label>
          )}
          <label class="checkbox">
            <input
              type="checkbox"
              checked={streamOutput}
              onChange={(event) => setStreamOutput(event.currentTarget.checked)}
            />
            Stream output
          </label>
        </div>
        <label class="field">
          <span class="field-label">Input</span>
          <textarea
            value={input}
            rows={3}
            placeholder="What should the agent do?"
            onInput={(event) => setInput(event.currentTarget.value)}
            required
          />
        </label>
        <ErrorNote error={state.error} />
        <button class="primary" type="submit" disabled={state.busy || !input.trim()}>
          {state.busy ? "Submitting…" : "Run task"}
        </button>
      </form>
    </Card>
  );
}

function CancelCell({ task, onCancelled }) {
  const [cancel, state] = useAction(() =>
    api(`/api/v1/tasks/${task.id}/cancel`, { method: "POST" }),
  );
  return (
    <>
      <button
        class="small danger"
        disabled={state.busy}
        aria-label={`Cancel task ${task.id.slice(0, 8)}`}
        onClick={async () => {
          const cancelled = await cancel();
          if (cancelled) onCancelled(cancelled);
        }}
      >
        Cancel
      </button>
      {state.error && (
        <span class="cell-error" role="alert">
          {state.error.message}
        </span>
      )}
    </>
  );
}

export function TasksPage({ query }) {
  const session = useSession();
  const { can } = session;
  const [status, setStatus] = useState(query.get("status") || "");
  const [agent, setAgent] = useState(query.get("agent") || "");
  const { agents, error: agentsError } = useAgents();
  const list = usePaged("/api/v1/tasks", { status, agent, limit: PAGE_SIZE });
  const reload = useRef(list.reload);
  reload.current = list.reload;
  const [changed, setChanged] = useState({});
  // id → the state a followed task's stream last told (working, input_required…).
  const [states, setStates] = useState({});

  const filter = (name, value) => {
    const next = { status, agent, [name]: value };
    if (name === "status") setStatus(value);
    else setAgent(value);
    const search = Object.fromEntries(Object.entries(next).filter(([, v]) => v));
    navigate("/tasks", { query: Object.keys(search).length ? search : undefined, replace: true });
  };

  // While tasks of the first page run, the page follows the streams of the newest of them and
  // reads the list again when one ends: no timer. (Not once more pages are shown: reading
  // the first page anew would drop them; Refresh does it on demand.)
  const paged = list.items.length > PAGE_SIZE;
  const running = list.items
    .slice(0, PAGE_SIZE)
    .filter((task) => !isFinished(task.status))
    .slice(0, FOLLOWED)
    .map((task) => task.id)
    .join(",");
  useEffect(() => {
    if (!running || paged) return undefined;
    const stops = running.split(",").map((id) =>
      follow(id, (type, data) => {
        if (type === "task_status") setStates((old) => ({ ...old, [id]: data.state }));
        if (type === "done") reload.current();
      }),
    );
    return () => stops.forEach((stop) => stop());
  }, [running, paged]);

  const tasks = list.items.map((task) => {
    const mine = changed[task.id];
    if (mine && (isFinished(mine.status) || !isFinished(task.status))) return mine;
    const told = states[task.id];
    return told && !isFinished(task.status) && !isFinished(told) ? { ...task, status: told } : task;
  });
  const canCancel = can("task:cancel");

  return (
    <Page title="Tasks" subtitle="Every task of your tenant, newest first.">
      {can("task:create") && <SubmitForm agents={agents} />}
      <Card
        title="Tasks"
        actions={
          <form class="inline-fields filters" role="search" aria-label="Filter tasks" onSubmit={(event) => event.preventDefault()}>
            <label class="field">
              <span class="field-label">Status</span>
              <select value={status} onChange={(event) => filter("status", event.currentTarget.value)}>
                <option value="">Any status</option>
                {STATUSES.map((value) => (
                  <option key={value} value={value}>
                    {value}
                  </option>
                ))}
              </select>
            </label>
            <label class="field">
              <span class="field-label">Agent</span>
              <select
                value={agent}
                onChange={(event) => filter("agent", event.currentTarget.value)}
              >
                <option value="">Any agent</option>
                {(agents || []).map((item) => (
                  <option key={item.name} value={item.name}>
                    {item.name}
                  </option>
                ))}
              </select>
            </label>
            <button type="button" onClick={() => list.reload()} disabled={list.loading}>
              Refresh
            </button>
          </form>
        }
      >
        <ErrorNote error={agentsError} />
        <ErrorNote error={list.error} />
        {list.loading && tasks.length === 0 ? (
          <Loading what="Loading the tasks" />
        ) : tasks.length === 0 && !list.error ? (
          <Empty>
            {status || agent ? "No task matches these filters." : "No task yet. Run one above."}
          </Empty>
        ) : (
          tasks.length > 0 && (
            <div class="table-scroll">
              <table class="tasks-table stack-narrow" aria-label="Tasks">
                <thead>
                  <tr>
                    <th>Task</th>
                    <th>Status</th>
                    <th>Agent</th>
                    <th>Input</th>
                    <th class="number">Tokens</th>
                    <th class="number">Cost</th>
                    <th>Created</th>
                    <th class="number">Duration</th>
                    {canCancel && <th><span class="visually-hidden">Actions</span></th>}
                  </tr>
                </thead>
                <tbody>
                  {tasks.map((task) => (
                    <tr key={task.id} data-task-id={task.id}>
                      <td>
                        <IdLink to={`/tasks/${task.id}`} id={task.id} />
                      </td>
                      <td>
                        <Status value={task.status} />
                      </td>
                      <td class="mono">{agentLabel(task)}</td>
                      <td class="input-cell stack-full" title={inputText(task)}>
                        {excerpt(inputText(task), 70)}
                      </td>
                      <td class="number" data-label="Tokens">
                        {count(task.usage.total_tokens)}
                      </td>
                      <td class="number" data-label="Cost">
                        {usd(task.usage.total_cost_usd)}
                      </td>
                      <td class="nowrap">{when(task.created_at)}</td>
                      <td class="number nowrap" data-label="Duration">
                        {wallTime(task)}
                      </td>
                      {canCancel && (
                        <td class="nowrap stack-end">
                          {mayCancel(session, task) && (
                            <CancelCell
                              task={task}
                              onCancelled={(cancelled) =>
                                setChanged((old) => ({ ...old, [cancelled.id]: cancelled }))
                              }
                            />
                          )}
                        </td>
                      )}
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )
        )}
        <LoadMore list={list} />
      </Card>
    </Page>
  );
}
