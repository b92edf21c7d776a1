// MCP servers: the tenant's remote MCP servers with their status and tools; register one,
// ask one for its tools again, remove one (/tenants/{tid}/mcp-servers), and the network
// allow-list (/tenants/{tid}/network): the tenant's hosts and public networks, and what
// platform admins opened for it (private addresses), shown but not changed here.
import { Fragment } from "preact";
import { useState } from "preact/hooks";
import { api } from "../api.js";
import { Card, Empty, ErrorNote, Loading } from "../components.jsx";
import { count, when } from "../format.js";
import { useAction, useApi } from "../hooks.js";
import { useSession } from "../session.js";
import { ConfirmButton, FormError, Notice, SettingField, fieldError, useNotice, useTenantSetting } from "./common.jsx";

const TONES = { ok: "good", error: "bad", unknown: "neutral" };

export function McpStatus({ value }) {
  return <span class={`status tone-${TONES[value] || "neutral"}`}>{value}</span>;
}

function headerText(value) {
  if (value && typeof value === "object") return `${value.prefix || ""}{secret ${value.secret}}`;
  return String(value);
}

function ServerDetails({ server }) {
  return (
    <div class="server-details">
      {Object.keys(server.headers).length > 0 && (
        <p>
          <span class="muted">Headers: </span>
          {Object.entries(server.headers).map(([name, value]) => (
            <code key={name} class="header-chip">
              {name}: {headerText(value)}
            </code>
          ))}
        </p>
      )}
      {server.tools.length > 0 ? (
        <table class="compact">
          <thead>
            <tr>
              <th scope="col">Tool</th>
              <th scope="col">Description</th>
              <th scope="col">Runs may use it</th>
              <th scope="col">Roles needed</th>
            </tr>
          </thead>
          <tbody>
            {server.tools.map((tool) => (
              <tr key={tool.name}>
                <td class="mono">{tool.name}</td>
                <td>{tool.description || <span class="muted">—</span>}</td>
                <td>{tool.allowed ? "yes" : <span class="muted">no (not in allowed tools)</span>}</td>
                <td>{tool.required_roles.join(", ") || <span class="muted">any</span>}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <p class="muted">It offered no tools when last asked.</p>
      )}
      {server.skipped_tools.length > 0 && (
        <>
          <h3 class="subhead">Skipped tools</h3>
          <ul class="skipped">
            {server.skipped_tools.map((skipped) => (
              <li key={skipped.tool}>
                <code>{skipped.tool}</code>: {skipped.reason}
              </li>
            ))}
          </ul>
        </>
      )}
    </div>
  );
}

function ServerList({ base, servers, onChanged }) {
  const [open, setOpen] = useState({});
  const [refresh, refreshing] = useAction((id) => api(`${base}/${id}/refresh`, { method: "POST" }));
  const [remove, removing] = useAction((id) => api(`${base}/${id}`, { method: "DELETE" }));
  const [notice, showNotice] = useNotice();

  if (servers.error) return <ErrorNote error={servers.error} />;
  if (!servers.data) return <Loading what="Loading the MCP servers" />;
  const items = servers.data.items;
  return (
    <>
      <ErrorNote error={refreshing.error || removing.error} />
      <Notice text={notice} />
      {items.length === 0 ? (
        <Empty>No MCP server registered. Register one below: its tools become this tenant's tools.</Empty>
      ) : (
        <div class="table-scroll">
          <table class="servers stack-narrow">
            <thead>
              <tr>
                <th scope="col">Server</th>
                <th scope="col">Status</th>
                <th scope="col">Checked</th>
                <th scope="col" class="number">Tools</th>
                <th scope="col" class="number">Skipped</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {items.map((server) => (
                <Fragment key={server.id}>
                  <tr>
                    <td class="stack-full">
                      <strong>{server.name}</strong>
                      <div class="mono muted url">{server.url}</div>
                    </td>
                    <td class="status-cell stack-full">
                      <McpStatus value={server.status} />
                      {server.status_detail && <div class={`status-detail ${server.status === "error" ? "bad" : "muted"}`}>{server.status_detail}</div>}
                    </td>
                    <td class="nowrap" data-label="Checked">
                      {server.checked_at ? when(server.checked_at) : <span class="muted">never</span>}
                    </td>
                    <td class="number" data-label="Tools">
                      {count(server.tools.length)}
                    </td>
                    <td class="number" data-label="Skipped">
                      {count(server.skipped_tools.length)}
                    </td>
                    <td class="row-actions">
                      <button
                        type="button"
                        class="small"
                        aria-expanded={open[server.id] ? "true" : "false"}
                        aria-label={`${open[server.id] ? "Hide" : "Show"} tools of ${server.name}`}
                        onClick={() => setOpen({ ...open, [server.id]: !open[server.id] })}
                      >
                        {open[server.id] ? "Hide tools" : "Tools"}
                      </button>
                      <button
                        type="button"
                        class="small"
                        aria-label={`Refresh ${server.name}`}
                        disabled={refreshing.busy}
                        onClick={async () => {
                          const answer = await refresh(server.id);
                          if (answer) {
                            showNotice(`${server.name}: ${answer.status}.`);
                            onChanged();
                          }
                        }}
                      >
                        Refresh
                      </button>
                      <ConfirmButton
                        label="Remove"
                        ariaLabel={`Remove ${server.name}`}
                        question={`Remove ${server.name}? Its tools stop being offered.`}
                        confirmLabel="Remove server"
                        busy={removing.busy}
                        onConfirm={async () => {
                          const done = await remove(server.id);
                          if (done !== undefined) {
                            showNotice(`${server.name} removed.`);
                            onChanged();
                          }
                        }}
                      />
                    </td>
                  </tr>
                  {open[server.id] && (
                    <tr class="details-row">
                      <td colSpan={6} class="stack-full">
                        <ServerDetails server={server} />
                      </td>
                    </tr>
                  )}
                </Fragment>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}

const EMPTY_HEADER = { name: "", kind: "secret", value: "", secret: "", prefix: "Bearer " };

function RegisterForm({ base, onRegistered }) {
  const { can, me } = useSession();
  const secrets = useApi(can("secret:configure") ? `/api/v1/tenants/${encodeURIComponent(me.tenant.id)}/secrets` : null, { limit: 200 });
  const [form, setForm] = useState({ name: "", url: "", headers: [] });
  const [notice, showNotice] = useNotice();
  const [create, creating] = useAction((body) => api(base, { method: "POST", body }));

  const update = (changes) => setForm((old) => ({ ...old, ...changes }));
  const setHeader = (index, changes) => update({ headers: form.headers.map((row, at) => (at === index ? { ...row, ...changes } : row)) });
  const onSubmit = async (event) => {
    event.preventDefault();
    showNotice(null);
    const headers = {};
    for (const row of form.headers) {
      if (!row.name.trim()) continue;
      headers[row.name.trim()] =
        row.kind === "secret" ? { secret: row.secret.trim(), ...(row.prefix ? { prefix: row.prefix } : {}) } : row.value;
    }
    const answer = await create({ name: form.name.trim(), url: form.url.trim(), headers });
    if (answer) {
      setForm({ name: "", url: "", headers: [] });
      showNotice(
        answer.status === "ok"
          ? `${answer.name} registered: ${answer.tools.length} tool${answer.tools.length === 1 ? "" : "s"}.`
          : `${answer.name} registered, but it could not be asked for its tools (status ${answer.status}).`,
      );
      onRegistered();
    }
  };
  const error = creating.error;
  const headerErrors = (error?.errors || []).filter((p) => p.field.startsWith("body.headers")).map((p) => p.message).join("; ");
  const placed = (field) => ["body.name", "body.url"].includes(field) || field.startsWith("body.headers");

  return (
    <form onSubmit={onSubmit} aria-label="Register an MCP server" noValidate>
      <FormError error={error} placed={placed} />
      <div class="grid two tight">
        <SettingField
          label="Server name"
          hint="Lower-case letters, digits and -, up to 31: its tools become name__tool."
          error={fieldError(error, "body.name")}
          render={(props) => <input {...props} class="mono" autoComplete="off" value={form.name} onInput={(event) => update({ name: event.currentTarget.value })} />}
        />
        <SettingField
          label="Server URL"
          hint="Its streamable-HTTP endpoint, e.g. https://mcp.example.com/mcp."
          error={fieldError(error, "body.url")}
          render={(props) => <input {...props} class="mono" type="url" autoComplete="off" value={form.url} onInput={(event) => update({ url: event.currentTarget.value })} />}
        />
      </div>
      <fieldset class="headers">
        <legend class="field-label">Headers</legend>
        <p class="field-hint">Sent with every request. Credentials belong in a secret: only its name is stored here.</p>
        {form.headers.map((row, index) => (
          <div class="header-row" key={index}>
            <input aria-label={`Header ${index + 1} name`} class="mono" placeholder="Authorization" value={row.name} onInput={(event) => setHeader(index, { name: event.currentTarget.value })} />
            <select aria-label={`Header ${index + 1} kind`} value={row.kind} onChange={(event) => setHeader(index, { kind: event.currentTarget.value })}>
              <option value="secret">From a secret</option>
              <option value="text">Plain text</option>
            </select>
            {row.kind === "secret" ? (
              <>
                <input aria-label={`Header ${index + 1} prefix`} class="mono prefix" placeholder="Prefix" value={row.prefix} onInput={(event) => setHeader(index, { prefix: event.currentTarget.value })} />
                <input aria-label={`Header ${index + 1} secret`} class="mono" placeholder="SECRET_NAME" list="mcp-secret-names" value={row.secret} onInput={(event) => setHeader(index, { secret: event.currentTarget.value })} />
              </>
            ) : (
              <input aria-label={`Header ${index + 1} value`} class="mono wide" value={row.value} onInput={(event) => setHeader(index, { value: event.currentTarget.value })} />
            )}
            <button type="button" class="small" aria-label={`Remove header ${index + 1}`} onClick={() => update({ headers: form.headers.filter((_, at) => at !== index) })}>
              Remove
            </button>
          </div>
        ))}
        <datalist id="mcp-secret-names">
          {(secrets.data?.items || []).map((secret) => (
            <option value={secret.name} key={secret.name} />
          ))}
        </datalist>
        {headerErrors && <span class="field-error">{headerErrors}</span>}
        <button type="button" class="small add-row" onClick={() => update({ headers: [...form.headers, { ...EMPTY_HEADER }] })}>
          Add a header
        </button>
      </fieldset>
      <div class="form-actions">
        <button type="submit" class="primary" disabled={creating.busy || !form.name.trim() || !form.url.trim()}>
          {creating.busy ? "Registering…" : "Register server"}
        </button>
        <Notice text={notice} />
      </div>
    </form>
  );
}

function NetworkCard({ tenantId }) {
  const setting = useTenantSetting(tenantId, "network", (network) => ({
    text: network.allow.join("\n"),
    platform: network.platform_allow,
  }));
  const { loadError, form, setForm, save, saving } = setting;
  const text = form === null ? null : form.text;
  const setText = (value) => setForm({ ...form, text: value });
  const [notice, showNotice] = useNotice();

  const onSubmit = async (event) => {
    event.preventDefault();
    showNotice(null);
    const allow = text
      .split(/[\n,]/)
      .map((entry) => entry.trim())
      .filter(Boolean);
    if (await save({ allow })) showNotice("Network allow-list saved.");
  };
  const messages = (saving.error?.errors || []).map((p) => p.message).join("; ");
  return (
    <Card title="Network allow-list">
      {loadError && <ErrorNote error={loadError} />}
      {!loadError && text === null && <Loading />}
      {text !== null && (
        <form onSubmit={onSubmit} aria-label="Network allow-list" noValidate>
          <FormError error={saving.error} placed={(field) => field.startsWith("body.allow")} />
          <SettingField
            label="Hosts and public networks"
            hint="The hosts http_request may call, and public networks: one per line (api.internal, *.corp.example, 8.8.8.0/24). Private and loopback addresses are opened by platform admins only."
            error={messages && saving.error?.errors?.length ? messages : null}
            render={(props) => <textarea {...props} class="mono" rows={4} value={text} onInput={(event) => setText(event.currentTarget.value)} />}
          />
          <p class="hint">
            Opened by platform admins:{" "}
            {form.platform.length ? <span class="mono">{form.platform.join(", ")}</span> : "nothing"}
          </p>
          <div class="form-actions">
            <button type="submit" disabled={saving.busy}>
              {saving.busy ? "Saving…" : "Save allow-list"}
            </button>
            <Notice text={notice} />
          </div>
        </form>
      )}
    </Card>
  );
}

export function McpSection({ tenantId }) {
  const base = `/api/v1/tenants/${encodeURIComponent(tenantId)}/mcp-servers`;
  const servers = useApi(base);
  return (
    <>
      <Card title="MCP servers" actions={<button type="button" class="small" onClick={servers.reload} disabled={servers.loading}>Reload</button>}>
        <ServerList base={base} servers={servers} onChanged={servers.reload} />
      </Card>
      <div class="grid mcp-bottom">
        <Card title="Register an MCP server">
          <RegisterForm base={base} onRegistered={servers.reload} />
        </Card>
        <NetworkCard tenantId={tenantId} />
      </div>
    </>
  );
}
