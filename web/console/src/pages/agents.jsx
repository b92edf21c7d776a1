// Agents: the tenant's agent definitions, each one's versions, and what changed between two
// of them. Callers who may configure agents define new ones, change them (a new version each
// time) and archive them.
import { diffLines } from "diff";
import { useEffect, useMemo, useState } from "preact/hooks";
import { api } from "../api.js";
import { Card, Empty, ErrorNote, Field, Loading, Page, Status } from "../components.jsx";
import { when } from "../format.js";
import { useApi, useAction } from "../hooks.js";
import { Link, navigate } from "../router.jsx";
import { useSession } from "../session.js";
import "./agents.css";

const NAME_PATTERN = "[a-z][a-z0-9_\\-]{0,63}";
const PAGE_SIZE = 200;

// ---------------------------------------------------------------------------------------
// Reading a definition

function toolsText(tools) {
  if (tools === null || tools === undefined) return "every tool the tenant enables";
  if (tools.length === 0) return "none";
  return tools.join(", ");
}

function modelText(agent) {
  return agent.model || "service default";
}

function budgetText(budget) {
  const parts = Object.entries(budget || {}).filter(([, value]) => value !== null && value !== undefined);
  if (parts.length === 0) return "none";
  return parts.map(([name, value]) => `${name} ${value}`).join(", ");
}

// One version's definition as lines of text, the same fields in the same order for every
// version: `key: value` lines, then the instructions as they are. Diffs compare these.
export function serialise(agent) {
  const value = (v, unset = "(default)") => (v === null || v === undefined ? unset : String(v));
  const lines = [
    `description: ${value(agent.description, "(none)").replace(/\s*\n\s*/g, " ")}`,
    `kind: ${value(agent.kind)}`,
    `model: ${value(agent.model, "(service default)")}`,
    `tools: ${agent.tools == null ? "(every tool the tenant enables)" : agent.tools.length ? agent.tools.join(", ") : "(none)"}`,
    `temperature: ${value(agent.temperature)}`,
    `max_iterations: ${value(agent.max_iterations)}`,
    `max_output_tokens: ${value(agent.max_output_tokens)}`,
    `on_limit: ${value(agent.on_limit)}`,
  ];
  const budget = Object.entries(agent.budget || {}).filter(([, v]) => v !== null && v !== undefined);
  if (budget.length === 0) lines.push("budget: (none)");
  for (const [name, limit] of budget) lines.push(`budget.${name}: ${limit}`);
  if (agent.response_format) {
    lines.push("response_format:");
    for (const line of JSON.stringify(agent.response_format, null, 2).split("\n")) lines.push(`  ${line}`);
  } else {
    lines.push("response_format: (none)");
  }
  const metadata = Object.keys(agent.metadata || {}).sort();
  if (metadata.length === 0) lines.push("metadata: (none)");
  for (const key of metadata) lines.push(`metadata.${key}: ${JSON.stringify(agent.metadata[key])}`);
  if (agent.instructions) {
    lines.push("instructions:");
    lines.push(...agent.instructions.replace(/\r\n?/g, "\n").split("\n"));
  } else {
    lines.push("instructions: (the built-in ReAct prompt)");
  }
  return lines.join("\n") + "\n";
}

// ---------------------------------------------------------------------------------------
// The list

export function AgentsPage() {
  const { can } = useSession();
  const [archived, setArchived] = useState(false);
  const [creating, setCreating] = useState(false);
  const agents = useApi("/api/v1/agents", { archived, limit: PAGE_SIZE });
  const mayConfigure = can("agent:configure");

  return (
    <Page
      title="Agents"
      subtitle="Agent definitions of this tenant. Every change makes a new version; tasks run the newest one unless they name a version."
      actions={
        mayConfigure &&
        !creating && (
          <button class="primary" onClick={() => setCreating(true)}>
            New agent
          </button>
        )
      }
    >
      {creating && (
        <NewAgent
          onCancel={() => setCreating(false)}
          onCreated={(agent) => navigate(`/agents/${agent.name}`)}
        />
      )}
      <Card
        title="Definitions"
        actions={
          <label class="agents-toggle">
            <input
              type="checkbox"
              checked={archived}
              onChange={(event) => setArchived(event.currentTarget.checked)}
            />
            Show archived
          </label>
        }
      >
        <ErrorNote error={agents.error} />
        {agents.loading && !agents.data && <Loading what="Loading the agents" />}
        {agents.data && <AgentTable agents={agents.data.items} />}
        {agents.data?.next_cursor && (
          <p class="muted">Only the first {PAGE_SIZE} agents are shown.</p>
        )}
      </Card>
    </Page>
  );
}

function AgentTable({ agents }) {
  if (agents.length === 0) return <Empty>No agents yet.</Empty>;
  return (
    <table class="agents-table">
      <thead>
        <tr>
          <th>Name</th>
          <th>Description</th>
          <th class="number">Version</th>
          <th>Model</th>
          <th>Tools</th>
          <th>Status</th>
          <th>Updated</th>
        </tr>
      </thead>
      <tbody>
        {agents.map((agent) => (
          <tr key={agent.name}>
            <td>
              <Link to={`/agents/${agent.name}`} class="mono">
                {agent.name}
              </Link>
              {agent.builtin && <span class="agents-tag">built in</span>}
            </td>
            <td class="agents-description">{agent.description || <span class="muted">—</span>}</td>
            <td class="number">v{agent.latest_version}</td>
            <td class="mono">{modelText(agent)}</td>
            <td>{toolsText(agent.tools)}</td>
            <td>
              <Status value={agent.status} />
            </td>
            <td class="agents-when">{when(agent.version_created_at)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

// ---------------------------------------------------------------------------------------
// The definition form (new agent, and a new version of one)

function formOf(agent) {
  return {
    name: agent?.name ?? "",
    description: agent?.description ?? "",
    instructions: agent?.instructions ?? "",
    model: agent?.model ?? "",
    allTools: agent?.tools == null,
    tools: agent?.tools ?? [],
    temperature: agent?.temperature ?? "",
    max_iterations: agent?.max_iterations ?? "",
  };
}

// The definition fields the form holds, as the API takes them (null: unset, the default).
function definitionOf(form) {
  const number = (text) => (text === "" || text === null ? null : Number(text));
  return {
    description: form.description.trim() || null,
    instructions: form.instructions.trim() ? form.instructions : null,
    model: form.model || null,
    tools: form.allTools ? null : form.tools,
    temperature: number(form.temperature),
    max_iterations: number(form.max_iterations),
  };
}

function same(a, b) {
  return JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
}

function DefinitionForm({ initial, isNew, submitLabel, busy, error, onSubmit, onCancel }) {
  const [form, setForm] = useState(() => formOf(initial));
  const models = useApi("/api/v1/models");
  const tools = useApi("/api/v1/tools");
  const set = (name) => (event) => {
    const target = event.currentTarget;
    setForm((old) => ({ ...old, [name]: target.type === "checkbox" ? target.checked : target.value }));
  };
  const toggleTool = (tool) => (event) => {
    const on = event.currentTarget.checked;
    setForm((old) => ({
      ...old,
      tools: on ? [...old.tools.filter((t) => t !== tool), tool] : old.tools.filter((t) => t !== tool),
    }));
  };
  const defaultModel = models.data?.items.find((m) => m.default)?.name;
  const modelNames = models.data?.items.map((m) => m.name) ?? [];
  // A model or tool the definition names that this tenant no longer offers stays choosable.
  if (form.model && !modelNames.includes(form.model)) modelNames.push(form.model);
  const toolNames = tools.data?.items.map((t) => t.name) ?? [];
  for (const tool of form.tools) if (!toolNames.includes(tool)) toolNames.push(tool);
  const describe = Object.fromEntries((tools.data?.items ?? []).map((t) => [t.name, t.description]));

  const submit = (event) => {
    event.preventDefault();
    onSubmit(form);
  };

  return (
    <form class="agent-form" onSubmit={submit}>
      <ErrorNote error={error} />
      <div class="agent-form-grid">
        <div>
          {isNew && (
            <Field label="Name" hint="Lower case letters, digits, - and _; it cannot change later.">
              <input
                name="name"
                value={form.name}
                onInput={set("name")}
                pattern={NAME_PATTERN}
                required
                autocomplete="off"
                placeholder="support"
              />
            </Field>
          )}
          <Field label="Description">
            <input name="description" value={form.description} onInput={set("description")} />
          </Field>
          <Field label="Instructions" hint="The system prompt. Empty: the built-in ReAct prompt.">
            <textarea name="instructions" rows={9} value={form.instructions} onInput={set("instructions")} />
          </Field>
        </div>
        <div>
          <Field label="Model">
            <select name="model" value={form.model} onChange={set("model")}>
              <option value="">Service default{defaultModel ? ` (${defaultModel})` : ""}</option>
              {modelNames.map((name) => (
                <option key={name} value={name}>
                  {name}
                </option>
              ))}
            </select>
          </Field>
          <fieldset class="agent-tools">
            <legend class="field-label">Tools</legend>
            <label class="agent-check">
              <input type="checkbox" checked={form.allTools} onChange={set("allTools")} />
              Every tool this tenant enables
            </label>
            <ErrorNote error={tools.error} />
            <div class="agent-tool-list" aria-disabled={form.allTools}>
              {toolNames.map((tool) => (
                <label key={tool} class="agent-check">
                  <input
                    type="checkbox"
                    checked={form.allTools || form.tools.includes(tool)}
                    disabled={form.allTools}
                    onChange={toggleTool(tool)}
                  />
                  <span class="mono">{tool}</span>
                  {describe[tool] && <span class="muted agent-tool-hint">{describe[tool]}</span>}
                </label>
              ))}
              {tools.data && toolNames.length === 0 && <p class="muted">No tools are enabled.</p>}
            </div>
          </fieldset>
          <div class="inline-fields">
            <Field label="Temperature">
              <input
                name="temperature"
                type="number"
                min="0"
                max="2"
                step="0.05"
                value={form.temperature}
                onInput={set("temperature")}
                placeholder="default"
              />
            </Field>
            <Field label="Max iterations">
              <input
                name="max_iterations"
                type="number"
                min="1"
                max="200"
                step="1"
                value={form.max_iterations}
                onInput={set("max_iterations")}
                placeholder="default"
              />
            </Field>
          </div>
        </div>
      </div>
      <div class="actions agent-form-actions">
        <button class="primary" type="submit" disabled={busy}>
          {busy ? "Saving…" : submitLabel}
        </button>
        <button type="button" onClick={onCancel} disabled={busy}>
          Cancel
        </button>
      </div>
    </form>
  );
}

function NewAgent({ onCancel, onCreated }) {
  const [create, state] = useAction(async (form) => {
    const definition = Object.fromEntries(
      Object.entries(definitionOf(form)).filter(([, value]) => value !== null),
    );
    return api("/api/v1/agents", { method: "POST", body: { name: form.name.trim(), ...definition } });
  });
  return (
    <Card title="New agent">
      <DefinitionForm
        isNew
        submitLabel="Create agent"
        busy={state.busy}
        error={state.error}
        onCancel={onCancel}
        onSubmit={async (form) => {
          const agent = await create(form);
          if (agent) onCreated(agent);
        }}
      />
    </Card>
  );
}

// ---------------------------------------------------------------------------------------
// One agent

export function AgentPage({ params }) {
  const name = params[0];
  const { can } = useSession();
  const agent = useApi(`/api/v1/agents/${name}`);
  const versions = useApi(`/api/v1/agents/${name}/versions`, { limit: PAGE_SIZE });
  const [editing, setEditing] = useState(false);
  const [notice, setNotice] = useState(null);
  const [pair, setPair] = useState(null); // {from, to} chosen by the person

  const current = agent.data;
  const latest = current?.latest_version;
  const chosen = pair ?? (latest > 1 ? { from: latest - 1, to: latest } : null);
  const mayChange = can("agent:configure") && current && !current.builtin && current.status === "active";

  const [update, updating] = useAction(async (changes) =>
    api(`/api/v1/agents/${name}`, { method: "PATCH", body: changes }),
  );
  const [archive, archiving] = useAction(async () => api(`/api/v1/agents/${name}`, { method: "DELETE" }));

  const saveVersion = async (form) => {
    const wanted = definitionOf(form);
    const changes = Object.fromEntries(
      Object.entries(wanted).filter(([field, value]) => !same(value, current[field])),
    );
    if (Object.keys(changes).length === 0) {
      setNotice("Nothing changed: no new version was made.");
      setEditing(false);
      return;
    }
    const updated = await update(changes);
    if (!updated) return;
    setEditing(false);
    if (updated.version === current.latest_version) {
      setNotice("Nothing changed: no new version was made.");
    } else {
      setNotice(`Version ${updated.version} saved. Tasks naming “${name}” run it from now on.`);
      setPair({ from: current.latest_version, to: updated.version });
    }
    agent.reload();
    versions.reload();
  };

  if (agent.error) {
    return (
      <Page title={name} subtitle={<Link to="/agents">← All agents</Link>}>
        <ErrorNote error={agent.error} />
      </Page>
    );
  }
  if (!current) {
    return (
      <Page title={name}>
        <Loading what="Loading the agent" />
      </Page>
    );
  }

  return (
    <Page
      title={
        <span class="agent-title">
          <span class="mono">{current.name}</span> <Status value={current.status} />
        </span>
      }
      subtitle={
        <>
          <Link to="/agents">← All agents</Link>
          <span class="muted"> · version {current.version} of {current.latest_version}</span>
          {current.description && <span class="muted"> · {current.description}</span>}
        </>
      }
      actions={
        mayChange &&
        !editing && (
          <>
            <button class="primary" onClick={() => (setNotice(null), setEditing(true))}>
              Edit → new version
            </button>
            <ArchiveButton name={name} busy={archiving.busy} onArchive={async () => {
              await archive();
              setNotice(null);
              agent.reload();
            }} />
          </>
        )
      }
    >
      <ErrorNote error={archiving.error} />
      {notice && (
        <p class="agent-notice" role="status">
          {notice}
        </p>
      )}
      {current.builtin && (
        <p class="agent-notice muted">
          The built-in agent uses the service's defaults and every tool the tenant enables. It cannot be changed or
          archived: define an agent of your own instead.
        </p>
      )}
      {current.status === "archived" && (
        <p class="agent-notice muted">
          Archived {when(current.archived_at)}: it runs no new tasks. Its past tasks and versions stay readable.
        </p>
      )}
      {editing && (
        <Card title={`Edit → version ${current.latest_version + 1}`}>
          <DefinitionForm
            initial={current}
            submitLabel="Save new version"
            busy={updating.busy}
            error={updating.error}
            onCancel={() => setEditing(false)}
            onSubmit={saveVersion}
          />
        </Card>
      )}
      <Definition agent={current} />
      <div class="grid agent-history-grid">
        <History
          versions={versions}
          latest={latest}
          chosen={chosen}
          onCompare={(from, to) => setPair({ from, to })}
        />
        <Changes name={name} latest={latest} chosen={chosen} versions={versions} onChoose={setPair} />
      </div>
    </Page>
  );
}

function ArchiveButton({ name, busy, onArchive }) {
  const [asking, setAsking] = useState(false);
  if (!asking) {
    return (
      <button class="danger" onClick={() => setAsking(true)}>
        Archive
      </button>
    );
  }
  return (
    <div class="agent-confirm" role="group" aria-label="Confirm archiving">
      <span>Archive “{name}”? New tasks naming it will be refused.</span>
      <button class="danger" disabled={busy} onClick={onArchive}>
        {busy ? "Archiving…" : "Archive agent"}
      </button>
      <button onClick={() => setAsking(false)} disabled={busy}>
        Keep it
      </button>
    </div>
  );
}

function Definition({ agent }) {
  const rows = [
    ["Model", <span class="mono">{modelText(agent)}</span>],
    ["Tools", toolsText(agent.tools)],
    ["Kind", agent.kind],
    ["Temperature", agent.temperature ?? <span class="muted">default</span>],
    ["Max iterations", agent.max_iterations ?? <span class="muted">default</span>],
    ["Max output tokens", agent.max_output_tokens ?? <span class="muted">default</span>],
    ["On a limit", agent.on_limit === "answer" ? "answer with what it has" : "fail"],
    ["Budget per task", budgetText(agent.budget)],
    ["Version", `${agent.version} by ${agent.version_created_by ?? "the service"}, ${when(agent.version_created_at)}`],
    ["Created", `${when(agent.created_at)} by ${agent.created_by ?? "the service"}`],
  ];
  const metadata = Object.keys(agent.metadata || {});
  return (
    <div class="grid agent-definition">
      <Card title="Instructions">
        {agent.instructions ? (
          <pre class="agent-instructions">{agent.instructions}</pre>
        ) : (
          <p class="muted">None: the built-in ReAct prompt.</p>
        )}
        {agent.response_format && (
          <>
            <h3 class="agent-subhead">Response format</h3>
            <pre>{JSON.stringify(agent.response_format, null, 2)}</pre>
          </>
        )}
      </Card>
      <Card title="Definition">
        <dl class="agent-facts">
          {rows.map(([label, value]) => (
            <div key={label}>
              <dt>{label}</dt>
              <dd>{value}</dd>
            </div>
          ))}
          {metadata.length > 0 && (
            <div>
              <dt>Metadata</dt>
              <dd>
                <pre>{JSON.stringify(agent.metadata, null, 2)}</pre>
              </dd>
            </div>
          )}
        </dl>
      </Card>
    </div>
  );
}

function History({ versions, latest, chosen, onCompare }) {
  return (
    <Card title="Version history">
      <ErrorNote error={versions.error} />
      {versions.loading && !versions.data && <Loading what="Loading the versions" />}
      {versions.data && (
        <table class="agent-versions" aria-label="Version history">
          <thead>
            <tr>
              <th>Version</th>
              <th>Created</th>
              <th>
                <span class="visually-hidden">Compare</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {versions.data.items.map((version) => (
              <tr
                key={version.version}
                class={chosen && (chosen.from === version.version || chosen.to === version.version) ? "chosen" : ""}
              >
                <td class="agent-version">
                  v{version.version}
                  {version.version === latest && <span class="agents-tag">latest</span>}
                </td>
                <td>
                  <div>{when(version.version_created_at)}</div>
                  <div class="mono muted agent-by" title={version.version_created_by ?? undefined}>
                    by {version.version_created_by ?? "the service"}
                  </div>
                </td>
                <td class="number">
                  {version.version > 1 && (
                    <button
                      class="small"
                      aria-label={`Compare version ${version.version} with version ${version.version - 1}`}
                      onClick={() => onCompare(version.version - 1, version.version)}
                    >
                      Diff
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {versions.data?.next_cursor && <p class="muted">The {PAGE_SIZE} newest versions are listed.</p>}
    </Card>
  );
}

function useVersion(name, version) {
  return useApi(version ? `/api/v1/agents/${name}/versions/${version}` : null);
}

function Changes({ name, latest, chosen, versions, onChoose }) {
  const from = useVersion(name, chosen?.from);
  const to = useVersion(name, chosen?.to);
  const numbers = versions.data?.items.map((v) => v.version) ?? [];
  if (latest && !numbers.includes(latest)) numbers.unshift(latest);
  const pick = (which) => (event) => onChoose({ ...chosen, [which]: Number(event.currentTarget.value) });

  if (!chosen) {
    return (
      <Card title="Changes">
        <Empty>Only one version so far: nothing to compare yet.</Empty>
      </Card>
    );
  }
  const ready = from.data && to.data && from.data.version === chosen.from && to.data.version === chosen.to;
  return (
    <Card
      title="Changes"
      actions={
        <div class="inline-fields agent-pickers">
          <Field label="From version">
            <select value={chosen.from} onChange={pick("from")}>
              {numbers.map((n) => (
                <option key={n} value={n}>
                  v{n}
                </option>
              ))}
            </select>
          </Field>
          <Field label="To version">
            <select value={chosen.to} onChange={pick("to")}>
              {numbers.map((n) => (
                <option key={n} value={n}>
                  v{n}
                </option>
              ))}
            </select>
          </Field>
        </div>
      }
    >
      <ErrorNote error={from.error || to.error} />
      {!ready && !from.error && !to.error && <Loading what="Loading the versions" />}
      {ready && (
        <DefinitionDiff
          before={serialise(from.data)}
          after={serialise(to.data)}
          label={`Changes from version ${chosen.from} to version ${chosen.to}`}
        />
      )}
    </Card>
  );
}

// ---------------------------------------------------------------------------------------
// The diff

const CONTEXT = 3;

function diffRows(before, after) {
  const rows = [];
  let old = 0;
  let now = 0;
  for (const part of diffLines(before, after)) {
    const kind = part.added ? "added" : part.removed ? "removed" : "same";
    const lines = part.value.replace(/\n$/, "").split("\n");
    for (const text of lines) {
      if (kind !== "added") old += 1;
      if (kind !== "removed") now += 1;
      rows.push({ kind, text, old: kind === "added" ? null : old, now: kind === "removed" ? null : now });
    }
  }
  return rows;
}

// Runs of unchanged lines longer than twice the context fold, but for the context lines
// next to a change.
function folded(rows, open) {
  const out = [];
  let index = 0;
  while (index < rows.length) {
    if (rows[index].kind !== "same") {
      out.push(rows[index]);
      index += 1;
      continue;
    }
    let end = index;
    while (end < rows.length && rows[end].kind === "same") end += 1;
    const run = rows.slice(index, end);
    const head = index === 0 ? 0 : CONTEXT;
    const tail = end === rows.length ? 0 : CONTEXT;
    if (run.length > head + tail + 1 && !open.has(index)) {
      out.push(...run.slice(0, head));
      out.push({ kind: "fold", at: index, hidden: run.length - head - tail });
      out.push(...run.slice(run.length - tail));
    } else {
      out.push(...run);
    }
    index = end;
  }
  return out;
}

function DefinitionDiff({ before, after, label }) {
  const rows = useMemo(() => diffRows(before, after), [before, after]);
  const [open, setOpen] = useState(new Set());
  useEffect(() => setOpen(new Set()), [before, after]);
  const added = rows.filter((r) => r.kind === "added").length;
  const removed = rows.filter((r) => r.kind === "removed").length;
  if (added + removed === 0) return <Empty>The two versions define the same agent.</Empty>;
  return (
    <>
      <p class="diff-summary">
        <span class="diff-count added">+{added}</span> <span class="diff-count removed">−{removed}</span>{" "}
        <span class="muted">lines</span>
      </p>
      <div class="diff-scroll">
        <table class="diff" aria-label={label}>
          <thead class="visually-hidden">
            <tr>
              <th>Line before</th>
              <th>Line after</th>
              <th>Change</th>
              <th>Text</th>
            </tr>
          </thead>
          <tbody>
            {folded(rows, open).map((row, index) =>
              row.kind === "fold" ? (
                <tr key={`fold-${row.at}`} class="diff-fold">
                  <td colSpan={4}>
                    <button class="link" onClick={() => setOpen(new Set([...open, row.at]))}>
                      Show {row.hidden} unchanged line{row.hidden === 1 ? "" : "s"}
                    </button>
                  </td>
                </tr>
              ) : (
                <tr key={index} class={`diff-line ${row.kind}`}>
                  <td class="diff-number">{row.old ?? ""}</td>
                  <td class="diff-number">{row.now ?? ""}</td>
                  <td class="diff-marker" aria-label={row.kind === "same" ? "unchanged" : row.kind}>
                    {row.kind === "added" ? "+" : row.kind === "removed" ? "-" : " "}
                  </td>
                  <td class="diff-text">
                    {row.kind === "added" ? (
                      <ins>{row.text}</ins>
                    ) : row.kind === "removed" ? (
                      <del>{row.text}</del>
                    ) : (
                      <span>{row.text}</span>
                    )}
                  </td>
                </tr>
              ),
            )}
          </tbody>
        </table>
      </div>
    </>
  );
}
