// Webhooks: the tenant's endpoints (a new one's signing secret shown once), pausing and
// deleting them, and each endpoint's deliveries with their attempts and a redeliver button
// (/tenants/{tid}/webhooks, /tenants/{tid}/webhook-deliveries).
import "./webhooks.css";
import { useState } from "preact/hooks";
import { api } from "../api.js";
import { Card, Empty, ErrorNote, Loading, Status } from "../components.jsx";
import { duration, when } from "../format.js";
import { useAction, useApi } from "../hooks.js";
import { ConfirmButton, FormError, Notice, SettingField, fieldError, useNotice } from "./common.jsx";

const EVENTS = [
  ["task.completed", "completed"],
  ["task.failed", "failed or cancelled"],
  ["task.incomplete", "stopped by a limit"],
  ["task.input_required", "waits for an approval"],
  ["budget.warning", "budget 80 % used"],
];

function NewSecret({ created, onDismiss }) {
  return (
    <section class="card new-secret" role="region" aria-label="New webhook secret">
      <h2>Signing secret of {created.url}</h2>
      <p class="warning">
        <strong>Copy this secret now.</strong> It is shown only this once. Receivers verify each delivery's{" "}
        <code>webhook-signature</code> with it (any Standard Webhooks library does).
      </p>
      <div class="secret-row">
        <input readOnly class="mono" aria-label="Webhook signing secret" value={created.secret} onFocus={(e) => e.currentTarget.select()} />
        <button type="button" onClick={onDismiss}>
          Done, I have saved it
        </button>
      </div>
    </section>
  );
}

function Attempts({ base, delivery }) {
  const detail = useApi(`${base}/webhook-deliveries/${delivery.id}`);
  if (detail.loading && !detail.data) return <Loading what="Loading the attempts" />;
  if (detail.error) return <ErrorNote error={detail.error} />;
  return (
    <ol class="webhook-attempts" aria-label={`Attempts of delivery ${delivery.id}`}>
      {detail.data.attempt_list.map((attempt) => (
        <li key={attempt.number}>
          #{attempt.number} {when(attempt.started_at)} · {attempt.status_code ?? "no answer"} · {duration(attempt.duration_ms)}
          {attempt.error && <span class="muted"> · {attempt.error}</span>}
        </li>
      ))}
    </ol>
  );
}

function Deliveries({ base, endpoint }) {
  const list = useApi(`${base}/webhooks/${endpoint.id}/deliveries`);
  const [open, setOpen] = useState(null);
  const [notice, showNotice] = useNotice();
  const [resend, resending] = useAction((id) => api(`${base}/webhook-deliveries/${id}/redeliver`, { method: "POST" }));
  const items = list.data?.items || [];
  return (
    <Card title={`Deliveries to ${endpoint.url}`}>
      <ErrorNote error={list.error || resending.error} />
      {list.loading && !list.data && <Loading what="Loading the deliveries" />}
      {list.data && items.length === 0 && <Empty>No deliveries yet.</Empty>}
      {items.length > 0 && (
        <div class="table-scroll">
          <table class="stack-narrow">
            <thead>
              <tr>
                <th scope="col">Event</th>
                <th scope="col">Status</th>
                <th scope="col">Attempts</th>
                <th scope="col">Stored</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {items.map((delivery) => (
                <tr key={delivery.id}>
                  <td class="mono">{delivery.event}</td>
                  <td>
                    <Status value={delivery.status} />
                    {delivery.last_error && <div class="muted small-text">{delivery.last_error}</div>}
                    {open === delivery.id && <Attempts base={base} delivery={delivery} />}
                  </td>
                  <td data-label="Attempts">{delivery.attempts}</td>
                  <td class="nowrap" data-label="Stored">
                    {when(delivery.created_at)}
                  </td>
                  <td class="row-actions">
                    <button type="button" onClick={() => setOpen(open === delivery.id ? null : delivery.id)}>
                      {open === delivery.id ? "Hide attempts" : "Attempts"}
                    </button>
                    <button
                      type="button"
                      disabled={resending.busy}
                      aria-label={`Redeliver ${delivery.event} ${delivery.id}`}
                      onClick={async () => {
                        if ((await resend(delivery.id)) !== undefined) {
                          showNotice("Sent again, with the same webhook-id.");
                          list.reload();
                        }
                      }}
                    >
                      Redeliver
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <Notice text={notice} />
    </Card>
  );
}

export function WebhooksSection({ tenantId }) {
  const base = `/api/v1/tenants/${encodeURIComponent(tenantId)}`;
  const list = useApi(`${base}/webhooks`);
  const [url, setUrl] = useState("");
  const [events, setEvents] = useState(["task.completed", "task.failed"]);
  const [created, setCreated] = useState(null);
  const [shown, setShown] = useState(null);
  const [notice, showNotice] = useNotice();
  const [create, creating] = useAction((body) => api(`${base}/webhooks`, { method: "POST", body }));
  const [change, changing] = useAction((id, body) => api(`${base}/webhooks/${id}`, { method: "PATCH", body }));
  const [remove, removing] = useAction((id) => api(`${base}/webhooks/${id}`, { method: "DELETE" }));
  const endpoints = list.data?.items || [];

  const onSubmit = async (event) => {
    event.preventDefault();
    showNotice(null);
    const answer = await create({ url: url.trim(), events });
    if (answer) {
      setCreated(answer);
      setUrl("");
      list.reload();
    }
  };
  const toggle = (name) => setEvents(events.includes(name) ? events.filter((e) => e !== name) : [...events, name]);
  const error = creating.error;

  return (
    <div class="settings-webhooks">
      {created && <NewSecret created={created} onDismiss={() => setCreated(null)} />}
      <div class="webhooks-stack">
        <Card title="Endpoints">
          <ErrorNote error={list.error || changing.error || removing.error} />
          {list.loading && !list.data && <Loading what="Loading the endpoints" />}
          {list.data && endpoints.length === 0 && <Empty>No endpoints yet. Add one to be told when tasks end.</Empty>}
          {endpoints.length > 0 && (
            <div class="table-scroll">
              <table class="stack-narrow">
                <thead>
                  <tr>
                    <th scope="col">URL</th>
                    <th scope="col">Events</th>
                    <th scope="col">State</th>
                    <th scope="col">
                      <span class="visually-hidden">Actions</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {endpoints.map((endpoint) => (
                    <tr key={endpoint.id}>
                      <td class="mono webhook-url stack-full">{endpoint.url}</td>
                      <td class="small-text" data-label="Events">
                        {endpoint.events.join(", ")}
                      </td>
                      <td>{endpoint.enabled ? "enabled" : "paused"}</td>
                      <td class="row-actions">
                        <button type="button" onClick={() => setShown(shown === endpoint.id ? null : endpoint.id)}>
                          Deliveries
                        </button>
                        <button
                          type="button"
                          disabled={changing.busy}
                          onClick={async () => {
                            if (await change(endpoint.id, { enabled: !endpoint.enabled })) list.reload();
                          }}
                        >
                          {endpoint.enabled ? "Pause" : "Enable"}
                        </button>
                        <ConfirmButton
                          label="Delete"
                          ariaLabel={`Delete webhook ${endpoint.url}`}
                          question={`Delete ${endpoint.url}? Its deliveries go with it.`}
                          confirmLabel="Delete webhook"
                          busy={removing.busy}
                          onConfirm={async () => {
                            if ((await remove(endpoint.id)) !== undefined) {
                              showNotice("Webhook deleted.");
                              if (shown === endpoint.id) setShown(null);
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
        </Card>
        <form onSubmit={onSubmit} aria-label="Add a webhook" noValidate>
          <Card title="Add a webhook">
            <p class="muted card-intro">
              Each event is POSTed as JSON in the Standard Webhooks format, signed with the endpoint's own secret, and
              retried for a day if the receiver fails. Private addresses need the tenant's network allow-list.
            </p>
            <FormError error={error} placed={(field) => field === "body.url" || field.startsWith("body.events")} />
            <SettingField
              label="URL"
              hint="https://hooks.example.com/omniforge"
              error={fieldError(error, "body.url")}
              render={(props) => <input {...props} class="mono" type="url" value={url} onInput={(e) => setUrl(e.currentTarget.value)} />}
            />
            <fieldset class="webhook-events">
              <legend>Events</legend>
              {EVENTS.map(([name, label]) => (
                <label class="check" key={name}>
                  <input type="checkbox" checked={events.includes(name)} onChange={() => toggle(name)} /> <code>{name}</code>{" "}
                  <span class="muted">{label}</span>
                </label>
              ))}
            </fieldset>
            <div class="form-actions">
              <button type="submit" class="primary" disabled={creating.busy || !url.trim() || events.length === 0}>
                {creating.busy ? "Adding…" : "Add webhook"}
              </button>
              <Notice text={notice} />
            </div>
          </Card>
        </form>
      </div>
      {endpoints
        .filter((endpoint) => endpoint.id === shown)
        .map((endpoint) => (
          <Deliveries key={endpoint.id} base={base} endpoint={endpoint} />
        ))}
    </div>
  );
}
