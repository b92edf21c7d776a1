// Secrets: the tenant's secrets by name (values are write-only: set, never shown), for tools
// and MCP servers to use as {"secret": "NAME"} (GET/PUT/DELETE /tenants/{tid}/secrets).
import { useState } from "preact/hooks";
import { api } from "../api.js";
import { Card, Empty, ErrorNote, LoadMore, Loading } from "../components.jsx";
import { when } from "../format.js";
import { useAction, usePaged } from "../hooks.js";
import { ConfirmButton, FormError, Notice, SettingField, fieldError, useNotice } from "./common.jsx";

const NAME_PATTERN = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;

export function SecretsSection({ tenantId }) {
  const base = `/api/v1/tenants/${encodeURIComponent(tenantId)}/secrets`;
  const list = usePaged(base);
  const [name, setName] = useState("");
  const [value, setValue] = useState("");
  const [nameProblem, setNameProblem] = useState(null);
  const [notice, showNotice] = useNotice();
  const [put, putting] = useAction((secretName, secretValue) =>
    api(`${base}/${encodeURIComponent(secretName)}`, { method: "PUT", body: { value: secretValue } }),
  );
  const [remove, removing] = useAction((secretName) => api(`${base}/${encodeURIComponent(secretName)}`, { method: "DELETE" }));

  const onSubmit = async (event) => {
    event.preventDefault();
    showNotice(null);
    const trimmed = name.trim();
    if (!NAME_PATTERN.test(trimmed)) {
      setNameProblem("A letter, then up to 63 letters, digits or underscores.");
      return;
    }
    setNameProblem(null);
    const replacing = list.items.some((secret) => secret.name === trimmed);
    const answer = await put(trimmed, value);
    if (answer) {
      setValue("");
      setName("");
      showNotice(replacing ? `Secret ${trimmed} replaced.` : `Secret ${trimmed} saved.`);
      list.reload();
    }
  };

  const error = putting.error;
  const pathError = error?.status === 422 ? fieldError(error, "path.name") : null;

  return (
    <div class="grid two settings-secrets">
      <Card title="Secrets">
        <ErrorNote error={removing.error} />
        {list.error && <ErrorNote error={list.error} />}
        {list.loading && list.items.length === 0 && !list.error && <Loading what="Loading the secrets" />}
        {!list.loading && !list.error && list.items.length === 0 && <Empty>No secrets yet. Set one to reference it from tools and MCP servers.</Empty>}
        {list.items.length > 0 && (
          <div class="table-scroll">
          <table class="stack-narrow">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Set by</th>
                <th scope="col">Updated</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.items.map((secret) => (
                <tr key={secret.name}>
                  <td class="mono stack-full">{secret.name}</td>
                  <td class="muted nowrap" data-label="Set by">
                    {secret.updated_by}
                  </td>
                  <td class="nowrap" data-label="Updated">
                    {when(secret.updated_at)}
                  </td>
                  <td class="row-actions">
                    <ConfirmButton
                      label="Delete"
                      ariaLabel={`Delete secret ${secret.name}`}
                      question={`Delete ${secret.name}? Runs referencing it will fail.`}
                      confirmLabel="Delete secret"
                      busy={removing.busy}
                      onConfirm={async () => {
                        const done = await remove(secret.name);
                        if (done !== undefined) {
                          showNotice(`Secret ${secret.name} deleted.`);
                          list.reload();
                        }
                      }}
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          </div>
        )}
        <LoadMore list={list} />
      </Card>
      <form onSubmit={onSubmit} aria-label="Set a secret" noValidate>
        <Card title="Set a secret">
          <p class="muted card-intro">
            The value is sealed and never shown again, by the console or the API. Setting an existing name replaces its
            value; runs starting from then use the new one. Reference it as <code>{'{"secret": "NAME"}'}</code>.
          </p>
          <FormError error={error} placed={(field) => field === "path.name" || field === "body.value"} />
          <SettingField
            label="Secret name"
            hint="A letter, then letters, digits or underscores: GITHUB_TOKEN."
            error={nameProblem || pathError}
            render={(props) => <input {...props} class="mono" autoComplete="off" spellcheck={false} value={name} onInput={(event) => setName(event.currentTarget.value)} />}
          />
          <SettingField
            label="Secret value"
            error={fieldError(error, "body.value")}
            render={(props) => (
              <input {...props} type="password" autoComplete="new-password" value={value} onInput={(event) => setValue(event.currentTarget.value)} />
            )}
          />
          <div class="form-actions">
            <button type="submit" class="primary" disabled={putting.busy || !name.trim() || !value}>
              {putting.busy ? "Saving…" : "Save secret"}
            </button>
            <Notice text={notice} />
          </div>
        </Card>
      </form>
    </div>
  );
}
