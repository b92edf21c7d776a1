// The tenant's schedules: each with its cron, when it fires next and how many firings it made
// or skipped (the task of an earlier one still running); pausing, resuming and deleting (its
// creator, or a tenant admin); a form to make one; and the tasks a schedule made, linked to
// their pages.
import { useState } from "preact/hooks";
import { api } from "../api.js";
import { Card, Empty, ErrorNote, IdLink, LoadMore, Loading, Page, Status } from "../components.jsx";
import { relative, when } from "../format.js";
import { useAction, usePaged } from "../hooks.js";
import { useSession } from "../session.js";
import "./schedules.css";

const PAGE_SIZE = 50;
const BROWSER_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";

function CreateForm({ onCreated }) {
  const [name, setName] = useState("");
  const [cron, setCron] = useState("0 9 * * 1-5");
  const [timezone, setTimezone] = useState(BROWSER_ZONE);
  const [agent, setAgent] = useState("");
  const [model, setModel] = useState("");
  const [input, setInput] = useState("");
  const [create, state] = useAction((body) => api("/api/v1/schedules", { method: "POST", body }));

  const onSubmit = async (event) => {
    event.preventDefault();
    const task = { input };
    if (agent.trim()) task.agent = agent.trim();
    if (model.trim()) task.model = model.trim();
    const created = await create({ name, cron, timezone, task });
    if (created) {
      setName("");
      setInput("");
      onCreated(created);
    }
  };

  return (
    <Card title="New schedule">
      <form onSubmit={onSubmit} aria-label="New schedule" class="schedule-form">
        <div class="inline-fields">
          <label class="field">
            <span class="field-label">Name</span>
            <input value={name} required onInput={(e) => setName(e.currentTarget.value)} />
          </label>
          <label class="field">
            <span class="field-label">Cron</span>
            <input
              class="mono"
              value={cron}
              required
              aria-describedby="cron-hint"
              onInput={(e) => setCron(e.currentTarget.value)}
            />
          </label>
          <label class="field">
            <span class="field-label">Time zone</span>
            <input value={timezone} required onInput={(e) => setTimezone(e.currentTarget.value)} />
          </label>
          <label class="field">
            <span class="field-label">Agent</span>
            <input
              value={agent}
              placeholder="default"
              onInput={(e) => setAgent(e.currentTarget.value)}
            />
          </label>
          <label class="field">
            <span class="field-label">Model</span>
            <input
              value={model}
              placeholder="the agent's or the default"
              onInput={(e) => setModel(e.currentTarget.value)}
            />
          </label>
        </div>
        <p id="cron-hint" class="muted small">
          Minute hour day month weekday, read in the time zone: <code>*/15 * * * *</code> every
          quarter hour, <code>0 9 * * 1-5</code> at 9:00 on weekdays, or <code>@daily</code>.
        </p>
        <label class="field">
          <span class="field-label">Input</span>
          <textarea
            value={input}
            rows={2}
            required
            placeholder="What should each run do?"
            onInput={(e) => setInput(e.currentTarget.value)}
          />
        </label>
        <ErrorNote error={state.error} />
        <button class="primary" type="submit" disabled={state.busy || !input.trim() || !name.trim()}>
          {state.busy ? "Saving…" : "Create schedule"}
        </button>
      </form>
    </Card>
  );
}

function Actions({ schedule, onChanged, onDeleted }) {
  const [confirming, setConfirming] = useState(false);
  const one = `/api/v1/schedules/${schedule.id}`;
  const [act, state] = useAction(async (verb) => {
    if (verb === "delete") {
      await api(one, { method: "DELETE" });
      onDeleted(schedule);
      return;
    }
    onChanged(await api(`${one}/${verb}`, { method: "POST" }));
  });
  const paused = schedule.status === "paused";
  return (
    <div class="schedule-actions">
      <button class="small" disabled={state.busy} onClick={() => act(paused ? "resume" : "pause")}>
        {paused ? "Resume" : "Pause"}
      </button>
      {confirming ? (
        <span role="group" aria-label={`Confirm deleting ${schedule.name}`}>
          <button class="small danger" disabled={state.busy} onClick={() => act("delete")}>
            Delete for good
          </button>
          <button class="small" onClick={() => setConfirming(false)}>
            Keep
          </button>
        </span>
      ) : (
        <button class="small danger" onClick={() => setConfirming(true)}>
          Delete
        </button>
      )}
      <ErrorNote error={state.error} />
    </div>
  );
}

function ScheduleTasks({ schedule }) {
  const list = usePaged(`/api/v1/schedules/${schedule.id}/tasks`, { limit: 20 });
  return (
    <Card title={`Tasks of “${schedule.name}”`}>
      <ErrorNote error={list.error} />
      {list.loading && list.items.length === 0 ? (
        <Loading what="Loading its tasks" />
      ) : list.items.length === 0 ? (
        !list.error && <Empty>No firing has made a task yet.</Empty>
      ) : (
        <ul class="schedule-tasks" aria-label={`Tasks of ${schedule.name}`}>
          {list.items.map((task) => (
            <li key={task.id} data-task-id={task.id}>
              <IdLink to={`/tasks/${task.id}`} id={task.id} /> <Status value={task.status} />{" "}
              <time class="muted" dateTime={task.created_at}>
                {when(task.created_at)}
              </time>
            </li>
          ))}
        </ul>
      )}
      <LoadMore list={list} />
    </Card>
  );
}

export function SchedulesPage() {
  const { can, me } = useSession();
  const list = usePaged("/api/v1/schedules", { limit: PAGE_SIZE });
  const [changed, setChanged] = useState({});
  const [deleted, setDeleted] = useState({});
  const [shown, setShown] = useState(null);
  const manages = can("schedule:manage");
  const managesAny = manages && me.roles.some((r) => r === "tenant_admin" || r === "platform_admin");
  const schedules = list.items
    .filter((schedule) => !deleted[schedule.id])
    .map((schedule) => changed[schedule.id] ?? schedule);

  return (
    <Page
      title="Schedules"
      subtitle="Tasks that run on a cron schedule, each firing as a task of the schedule's creator."
    >
      {manages && (
        <CreateForm
          onCreated={() => {
            setChanged({});
            list.reload();
          }}
        />
      )}
      <Card title="Schedules">
        <ErrorNote error={list.error} />
        {list.loading && list.items.length === 0 ? (
          <Loading what="Loading the schedules" />
        ) : schedules.length === 0 ? (
          !list.error && <Empty>No schedule yet.</Empty>
        ) : (
          <div class="table-scroll">
            <table class="schedules-table" aria-label="Schedules">
              <thead>
                <tr>
                  <th>Name</th>
                  <th>Agent</th>
                  <th>Cron</th>
                  <th>Status</th>
                  <th>Next firing</th>
                  <th class="number">Fired</th>
                  <th class="number">Skipped</th>
                  <th>
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {schedules.map((schedule) => (
                  <tr key={schedule.id} data-schedule-id={schedule.id}>
                    <td>
                      {schedule.name}
                      <span class="runs-as muted small">as {schedule.runs_as}</span>
                      {schedule.last_error && (
                        <span class="cell-error" title={when(schedule.last_error_at)}>
                          {schedule.last_error}
                        </span>
                      )}
                    </td>
                    <td class="mono">{schedule.agent}</td>
                    <td class="nowrap">
                      <code>{schedule.cron}</code> <span class="muted small">{schedule.timezone}</span>
                    </td>
                    <td>
                      <Status value={schedule.status} />
                    </td>
                    <td class="nowrap next-firing">
                      {schedule.next_fire_at ? (
                        <>
                          <time dateTime={schedule.next_fire_at}>{when(schedule.next_fire_at)}</time>{" "}
                          <span class="muted small">({relative(schedule.next_fire_at)})</span>
                        </>
                      ) : (
                        "—"
                      )}
                    </td>
                    <td class="number">{schedule.fired_count}</td>
                    <td
                      class="number"
                      title={
                        schedule.last_skipped_at
                          ? `last skipped ${when(schedule.last_skipped_at)}`
                          : undefined
                      }
                    >
                      {schedule.skipped_count}
                    </td>
                    <td>
                      <div class="schedule-buttons">
                      <button
                        class="small"
                        aria-pressed={shown === schedule.id}
                        onClick={() => setShown(shown === schedule.id ? null : schedule.id)}
                      >
                        Tasks
                      </button>
                      {(managesAny || (manages && schedule.runs_as === me.subject)) && (
                        <Actions
                          schedule={schedule}
                          onChanged={(after) => setChanged((old) => ({ ...old, [after.id]: after }))}
                          onDeleted={(gone) => {
                            setDeleted((old) => ({ ...old, [gone.id]: true }));
                            if (shown === gone.id) setShown(null);
                          }}
                        />
                      )}
                      </div>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
        <LoadMore list={list} />
      </Card>
      {shown && schedules.some((s) => s.id === shown) && (
        <ScheduleTasks key={shown} schedule={schedules.find((s) => s.id === shown)} />
      )}
    </Page>
  );
}
