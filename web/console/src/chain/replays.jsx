// Replays and forks of a task: where a task came from, how its replay went (reproduced, or the
// first step where it went another way), and the forms that start a replay or a fork.
import { useState } from "preact/hooks";
import { api } from "../api.js";
import { ErrorNote, Field } from "../components.jsx";
import { shortId } from "../format.js";
import { useAction } from "../hooks.js";
import { Link, navigate } from "../router.jsx";

export function Origin({ task }) {
  if (task.replayed_from) {
    return (
      <Link to={`/tasks/${task.replayed_from}`} data-origin="replay">
        replay of task {shortId(task.replayed_from)}
      </Link>
    );
  }
  if (task.forked_from) {
    return (
      <Link to={`/tasks/${task.forked_from}`} data-origin="fork">
        fork of task {shortId(task.forked_from)} after step {task.fork_step}
      </Link>
    );
  }
  return null;
}

export function ReplayReport({ report }) {
  if (report.reproduced) {
    return (
      <p class="replay-report reproduced" data-replay="reproduced">
        Reproduced step for step: all {report.recorded_steps} recorded steps repeated
        {report.match === "actions" ? " (the agent's actions; model requests not compared)" : ""}.
      </p>
    );
  }
  const d = report.divergence;
  return (
    <div class="replay-report diverged" data-replay="diverged">
      <p>
        <strong>Diverged at step {d.step_number}</strong> after {report.matched_steps} of{" "}
        {report.recorded_steps} recorded steps:{" "}
        {d.replayed === null
          ? `the replay ended where the recording has ${d.recorded}.`
          : d.recorded === null
            ? `the replay went on past the recording's end with ${d.replayed}.`
            : `the recording has ${d.recorded}; the replay made ${d.replayed}.`}
      </p>
      {d.field && (
        <dl class="replay-difference">
          <dt>Field</dt>
          <dd class="mono">{d.field}</dd>
          <dt>Recorded</dt>
          <dd>
            <pre>{d.recorded_value ?? "—"}</pre>
          </dd>
          <dt>Replayed</dt>
          <dd>
            <pre>{d.replayed_value ?? "—"}</pre>
          </dd>
        </dl>
      )}
    </div>
  );
}

// A replay (the task finished) and a fork, started from the task page.
export function ReplayAndFork({ task, steps }) {
  const [agent, setAgent] = useState("");
  const [match, setMatch] = useState("requests");
  const [fromStep, setFromStep] = useState(String(Math.max(1, steps)));
  const [model, setModel] = useState("");
  const [input, setInput] = useState("");
  const [replay, replaying] = useAction(() =>
    api(`/api/v1/tasks/${task.id}/replay`, {
      method: "POST",
      body: { match, ...(agent ? { agent } : {}) },
    }),
  );
  const [fork, forking] = useAction(() =>
    api(`/api/v1/tasks/${task.id}/fork`, {
      method: "POST",
      body: {
        from_step: Number(fromStep),
        ...(agent ? { agent } : {}),
        ...(model ? { model } : {}),
        ...(input ? { input } : {}),
      },
    }),
  );
  const go = async (action) => {
    const accepted = await action();
    if (accepted) navigate(`/tasks/${accepted.task_id}`);
  };
  return (
    <div class="replay-forms">
      <Field label="Agent version" hint="Default: the version the task ran (e.g. support@3).">
        <input value={agent} onInput={(e) => setAgent(e.currentTarget.value)} />
      </Field>
      <form
        class="replay-form"
        aria-label="Replay"
        onSubmit={(e) => {
          e.preventDefault();
          go(replay);
        }}
      >
        <Field label="Compare" hint="What each replayed step must repeat.">
          <select value={match} onChange={(e) => setMatch(e.currentTarget.value)}>
            <option value="requests">everything, model requests included</option>
            <option value="actions">the agent's actions only</option>
          </select>
        </Field>
        <button type="submit" disabled={replaying.busy || !task.finished_at}>
          {replaying.busy ? "Starting…" : "Replay"}
        </button>
        <ErrorNote error={replaying.error} />
      </form>
      <form
        class="fork-form"
        aria-label="Fork"
        onSubmit={(e) => {
          e.preventDefault();
          go(fork);
        }}
      >
        <Field label="Fork after step" hint="Steps up to it are taken as recorded, unbilled.">
          <input
            type="number"
            min="1"
            max={steps || undefined}
            value={fromStep}
            onInput={(e) => setFromStep(e.currentTarget.value)}
          />
        </Field>
        <Field label="Model" hint="Default: the task's.">
          <input value={model} onInput={(e) => setModel(e.currentTarget.value)} />
        </Field>
        <Field label="New input" hint="Default: the task's.">
          <input value={input} onInput={(e) => setInput(e.currentTarget.value)} />
        </Field>
        <button type="submit" disabled={forking.busy}>
          {forking.busy ? "Starting…" : "Fork"}
        </button>
        <ErrorNote error={forking.error} />
      </form>
    </div>
  );
}
