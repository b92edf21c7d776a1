// API keys: the tenant's keys (never their secrets), a new key whose secret is shown once,
// and revoking one (/api-keys: always the caller's own tenant).
import { useRef, useState } from "preact/hooks";
import { api } from "../api.js";
import { Card, Empty, ErrorNote, LoadMore, Loading, Status } from "../components.jsx";
import { count, usd, when } from "../format.js";
import { useAction, usePaged } from "../hooks.js";
import { useSession } from "../session.js";
import {
  ConfirmButton,
  FormError,
  Notice,
  QUOTA_GROUPS,
  QuotaInputs,
  SettingField,
  fieldError,
  fromText,
  useNotice,
} from "./common.jsx";

const ROLES = [
  { name: "tenant_admin", hint: "Everything within the tenant" },
  { name: "member", hint: "Runs tasks, reads chains as visibility allows" },
  { name: "viewer", hint: "Reads tasks and chains, filtered" },
  { name: "auditor", hint: "Reads everything as it happened, costs and audit log" },
];
const KEY_QUOTA_FIELDS = QUOTA_GROUPS.flatMap((group) => group.fields)
  .filter((field) => !field.tenantOnly)
  .map((field) => ({ ...field, hint: undefined }));

// A key's times to the minute (last use is kept to the minute anyway), the year only when it
// is not this one; the full time on hover.
function shortWhen(iso) {
  const date = new Date(iso);
  const options = { month: "short", day: "2-digit", hour: "2-digit", minute: "2-digit" };
  if (date.getFullYear() !== new Date().getFullYear()) options.year = "numeric";
  return date.toLocaleString("en-GB", options);
}

function limitsText(quotas) {
  if (!quotas) return null;
  const parts = [];
  if (quotas.submissions_per_minute) parts.push(`${count(quotas.submissions_per_minute)} submissions/min`);
  if (quotas.llm_calls_per_minute) parts.push(`${count(quotas.llm_calls_per_minute)} LLM calls/min`);
  if (quotas.tokens_per_minute) parts.push(`${count(quotas.tokens_per_minute)} tokens/min`);
  if (quotas.tokens_per_hour) parts.push(`${count(quotas.tokens_per_hour)} tokens/h`);
  if (quotas.cost_per_hour_usd) parts.push(`${usd(quotas.cost_per_hour_usd)}/h`);
  if (quotas.cost_per_day_usd) parts.push(`${usd(quotas.cost_per_day_usd)}/day`);
  return parts.length ? parts.join(" · ") : null;
}

function NewSecret({ created, onDismiss }) {
  const input = useRef(null);
  const [copied, setCopied] = useState(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(created.secret);
      setCopied("Copied to the clipboard.");
    } catch {
      input.current?.select();
      const done = document.execCommand?.("copy");
      setCopied(done ? "Copied to the clipboard." : "Selected: press Ctrl+C (⌘C) to copy it.");
    }
  };
  return (
    <section class="card new-secret" role="region" aria-label="New API key">
      <h2>Key “{created.name}” created</h2>
      <p class="warning">
        <strong>Copy this key now.</strong> It is shown only this once: the service keeps only a hash of it, and
        neither the console nor the API can show it again. If you lose it, revoke it and create another.
      </p>
      <div class="secret-row">
        <input
          ref={input}
          readOnly
          class="mono"
          aria-label="New API key secret"
          value={created.secret}
          onFocus={(event) => event.currentTarget.select()}
        />
        <button type="button" class="primary" onClick={copy}>
          Copy
        </button>
        <button type="button" onClick={onDismiss}>
          Done, I have saved it
        </button>
      </div>
      <Notice text={copied} />
      <p class="muted small-text">
        Use it as <code>Authorization: Bearer {created.prefix}…</code>; the audit log names it{" "}
        <code>api-key:{created.prefix}</code>.
      </p>
    </section>
  );
}

function CreateKeyForm({ onCreated }) {
  const { me } = useSession();
  const roles = me.roles.includes("platform_admin") ? [{ name: "platform_admin", hint: "Every tenant" }, ...ROLES] : ROLES;
  const blank = { name: "", roles: ["member"], expires: "", quotas: {} };
  const [form, setForm] = useState(blank);
  const [create, creating] = useAction((body) => api("/api/v1/api-keys", { method: "POST", body }));
  const update = (changes) => setForm((old) => ({ ...old, ...changes }));

  const onSubmit = async (event) => {
    event.preventDefault();
    const body = { name: form.name, roles: form.roles };
    if (form.expires) {
      const moment = new Date(form.expires);
      body.expires_at = Number.isNaN(moment.getTime()) ? form.expires : moment.toISOString();
    }
    const quotas = {};
    for (const field of KEY_QUOTA_FIELDS) {
      const value = fromText(form.quotas[field.name] || "", field.kind);
      if (value !== null) quotas[field.name] = value;
    }
    if (Object.keys(quotas).length) body.quotas = quotas;
    const answer = await create(body);
    if (answer) {
      setForm(blank);
      onCreated(answer);
    }
  };
  const error = creating.error;
  const placed = (field) =>
    ["body.name", "body.roles", "body.expires_at"].includes(field) || field.startsWith("body.roles.") || KEY_QUOTA_FIELDS.some((f) => field === `body.quotas.${f.name}`);
  const rolesError = (error?.errors || []).filter((p) => p.field === "body.roles" || p.field.startsWith("body.roles.")).map((p) => p.message).join("; ");
  const hasQuotaError = (error?.errors || []).some((p) => p.field.startsWith("body.quotas"));

  return (
    <form onSubmit={onSubmit} aria-label="Create an API key" noValidate>
      <FormError error={error} placed={placed} />
      <SettingField
        label="Key name"
        hint="What the key is for: ci-pipeline, reporting…"
        error={fieldError(error, "body.name")}
        render={(props) => <input {...props} autoComplete="off" maxLength={100} value={form.name} onInput={(event) => update({ name: event.currentTarget.value })} />}
      />
      <fieldset class={`roles ${rolesError ? "has-error" : ""}`}>
        <legend class="field-label">Roles</legend>
        {roles.map((role) => (
          <label class="check" key={role.name}>
            <input
              type="checkbox"
              checked={form.roles.includes(role.name)}
              onChange={(event) =>
                update({
                  roles: event.currentTarget.checked ? [...form.roles, role.name] : form.roles.filter((name) => name !== role.name),
                })
              }
            />
            <span class="mono">{role.name}</span>
            <span class="muted"> — {role.hint}</span>
          </label>
        ))}
        <span class="field-hint">Together at most what your own roles allow.</span>
        {rolesError && <span class="field-error">{rolesError}</span>}
      </fieldset>
      <SettingField
        label="Expires"
        hint="Optional, in your local time; empty: until revoked."
        error={fieldError(error, "body.expires_at")}
        render={(props) => <input {...props} type="datetime-local" value={form.expires} onInput={(event) => update({ expires: event.currentTarget.value })} />}
      />
      <details class="key-limits" open={hasQuotaError}>
        <summary>Limits for this key (optional)</summary>
        <p class="field-hint">On top of the tenant's: e.g. a cost per day as the key's daily budget.</p>
        <QuotaInputs
          fields={KEY_QUOTA_FIELDS}
          values={form.quotas}
          onInput={(name, value) => update({ quotas: { ...form.quotas, [name]: value } })}
          error={error}
          prefix="body.quotas."
        />
      </details>
      <div class="form-actions">
        <button type="submit" class="primary" disabled={creating.busy || !form.name.trim() || form.roles.length === 0}>
          {creating.busy ? "Creating…" : "Create key"}
        </button>
      </div>
    </form>
  );
}

export function KeysSection() {
  const { me } = useSession();
  const [showRevoked, setShowRevoked] = useState(false);
  const list = usePaged("/api/v1/api-keys", { include_revoked: showRevoked ? "true" : "false" });
  const [created, setCreated] = useState(null);
  const [notice, showNotice] = useNotice();
  const [revoke, revoking] = useAction((id) => api(`/api/v1/api-keys/${id}`, { method: "DELETE" }));

  return (
    <>
      {created && <NewSecret created={created} onDismiss={() => setCreated(null)} />}
      <div class="grid keys-grid">
        <Card
          title="API keys"
          actions={
            <label class="check inline">
              <input type="checkbox" checked={showRevoked} onChange={(event) => setShowRevoked(event.currentTarget.checked)} />
              Show revoked keys
            </label>
          }
        >
          <ErrorNote error={revoking.error} />
          <Notice text={notice} />
          {list.error && <ErrorNote error={list.error} />}
          {list.loading && list.items.length === 0 && !list.error && <Loading what="Loading the keys" />}
          {!list.loading && !list.error && list.items.length === 0 && <Empty>No API keys{showRevoked ? "" : " in use"}.</Empty>}
          {list.items.length > 0 && (
            <div class="table-scroll">
              <table class="keys stack-narrow">
                <thead>
                  <tr>
                    <th scope="col">Name and prefix</th>
                    <th scope="col">Roles</th>
                    <th scope="col">Status</th>
                    <th scope="col">Created</th>
                    <th scope="col">Expires</th>
                    <th scope="col">Last used</th>
                    <th scope="col">
                      <span class="visually-hidden">Actions</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {list.items.map((key) => {
                    const mine = me.api_key?.id === key.id;
                    const limits = limitsText(key.quotas);
                    return (
                      <tr key={key.id}>
                        <td class="stack-full">
                          <div class="nowrap">
                            <strong>{key.name}</strong>
                            {mine && <span class="status tone-active tag">this session</span>}
                          </div>
                          <div class="mono prefix" title="The key's prefix (its secret starts with it)">
                            {key.prefix}
                          </div>
                          {limits && <div class="muted small-text">Limits: {limits}</div>}
                        </td>
                        <td data-label="Roles">{key.roles.join(", ")}</td>
                        <td>
                          <Status value={key.status} />
                          {key.revoked_at && (
                            <div class="muted small-text nowrap" title={when(key.revoked_at)}>
                              {shortWhen(key.revoked_at)}
                            </div>
                          )}
                        </td>
                        <td data-label="Created">
                          <div class="nowrap" title={when(key.created_at)}>
                            {shortWhen(key.created_at)}
                          </div>
                          <div class="muted small-text subject" title={key.created_by}>
                            by {key.created_by}
                          </div>
                        </td>
                        <td class="nowrap" data-label="Expires" title={when(key.expires_at)}>
                          {key.expires_at ? shortWhen(key.expires_at) : <span class="muted">never</span>}
                        </td>
                        <td class="nowrap" data-label="Last used" title={when(key.last_used_at)}>
                          {key.last_used_at ? shortWhen(key.last_used_at) : <span class="muted">never</span>}
                        </td>
                        <td class="row-actions">
                          {key.status !== "revoked" && (
                            <ConfirmButton
                              label="Revoke"
                              ariaLabel={`Revoke ${key.name}`}
                              question={mine ? `Revoke ${key.name}? You are signed in with it: this signs you out.` : `Revoke ${key.name}? It stops working at once.`}
                              confirmLabel="Revoke key"
                              busy={revoking.busy}
                              onConfirm={async () => {
                                const done = await revoke(key.id);
                                if (done !== undefined) {
                                  showNotice(`Key ${key.name} revoked.`);
                                  list.reload();
                                }
                              }}
                            />
                          )}
                        </td>
                      </tr>
                    );
                  })}
                </tbody>
              </table>
            </div>
          )}
          <LoadMore list={list} />
        </Card>
        <Card title="Create an API key">
          <CreateKeyForm
            onCreated={(answer) => {
              setCreated(answer);
              list.reload();
            }}
          />
        </Card>
      </div>
    </>
  );
}
