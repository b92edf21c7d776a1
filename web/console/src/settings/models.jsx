// Models: which models the tenant's tasks may use, its default model and output-token caps
// (GET/PUT /tenants/{tid}/models), beside the models the tenant can use now (GET /models).
import { Card, Empty, ErrorNote, Loading } from "../components.jsx";
import { count } from "../format.js";
import { useApi } from "../hooks.js";
import { FormError, Notice, SettingField, fieldError, useNotice, useTenantSetting } from "./common.jsx";

// A price per token (an exact decimal string) as dollars per million tokens, exactly.
export function perMillion(value) {
  if (value === null || value === undefined) return "—";
  const [whole, fraction = ""] = String(value).split(".");
  const shifted = (whole + fraction.slice(0, 6).padEnd(6, "0")).replace(/^0+(?=\d)/, "");
  const rest = fraction.slice(6).replace(/0+$/, "").padEnd(2, "0");
  return `$${shifted}.${rest}`;
}

function formOf(policy) {
  return {
    restricted: policy.approved !== null && policy.approved !== undefined,
    approved: (policy.approved || []).join("\n"),
    defaultModel: policy.default_model || "",
    caps: Object.entries(policy.max_output_tokens || {}).map(([pattern, tokens]) => ({ pattern, tokens: String(tokens) })),
  };
}

function bodyOf(form) {
  const approved = form.approved
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean);
  const caps = {};
  for (const cap of form.caps) {
    if (!cap.pattern.trim() && !cap.tokens.trim()) continue;
    const tokens = cap.tokens.trim();
    caps[cap.pattern.trim()] = /^\d+$/.test(tokens) ? Number(tokens) : tokens;
  }
  return {
    approved: form.restricted ? approved : null,
    default_model: form.defaultModel.trim() || null,
    max_output_tokens: caps,
  };
}

function ModelTable({ models }) {
  if (models.error) return <ErrorNote error={models.error} />;
  if (!models.data) return <Loading what="Loading the models" />;
  if (models.data.items.length === 0) return <Empty>No configured model is approved for this tenant.</Empty>;
  return (
    <div class="table-scroll">
      <table class="stack-narrow">
        <thead>
          <tr>
            <th scope="col">Model</th>
            <th scope="col" class="number" title="USD per million input tokens">Input /1M</th>
            <th scope="col" class="number" title="USD per million output tokens">Output /1M</th>
            <th scope="col" class="number">Output cap</th>
            <th scope="col">Fallbacks</th>
          </tr>
        </thead>
        <tbody>
          {models.data.items.map((model) => {
            const first = model.deployments[0];
            return (
              <tr key={model.name}>
                <td class="stack-full">
                  <span class="mono">{model.name}</span>
                  {model.default && <span class="status tone-active tag">default</span>}
                  {!model.priced && <span class="status tone-warn tag">unpriced</span>}
                  <div class="muted small-text">
                    {model.deployments.length} deployment{model.deployments.length === 1 ? "" : "s"}
                    {first ? ` · ${first.provider}` : ""}
                  </div>
                </td>
                <td class="number" data-label="Input /1M">
                  {perMillion(first?.input_cost_per_token)}
                </td>
                <td class="number" data-label="Output /1M">
                  {perMillion(first?.output_cost_per_token)}
                </td>
                <td class="number" data-label="Output cap">
                  {model.max_output_tokens ? count(model.max_output_tokens) : "—"}
                </td>
                <td class="mono" data-label="Fallbacks">
                  {model.fallbacks.join(", ") || <span class="muted">none</span>}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

export function ModelsSection({ tenantId }) {
  const { loadError, form, setForm, save, saving } = useTenantSetting(tenantId, "models", formOf);
  const models = useApi("/api/v1/models");
  const [notice, showNotice] = useNotice();

  if (loadError) return <ErrorNote error={loadError} />;
  if (!form) return <Loading what="Loading the model policy" />;

  const update = (changes) => setForm((old) => ({ ...old, ...changes }));
  const setCap = (index, changes) => update({ caps: form.caps.map((cap, at) => (at === index ? { ...cap, ...changes } : cap)) });
  const onSubmit = async (event) => {
    event.preventDefault();
    showNotice(null);
    const answer = await save(bodyOf(form));
    if (answer) {
      showNotice("Model policy saved.");
      models.reload();
    }
  };
  const error = saving.error;
  const approvedError = (error?.errors || []).filter((p) => p.field.startsWith("body.approved")).map((p) => p.message).join("; ");
  const capsError = (error?.errors || []).filter((p) => p.field.startsWith("body.max_output_tokens")).map((p) => `${p.field.replace("body.max_output_tokens.", "")}: ${p.message}`).join("; ");
  const placed = (field) => field.startsWith("body.approved") || field.startsWith("body.max_output_tokens") || field === "body.default_model";

  return (
    <div class="grid two settings-models">
      <form onSubmit={onSubmit} aria-label="Model policy" noValidate>
        <Card title="Model policy">
          <FormError error={error} placed={placed} />
          <fieldset class="choice">
            <legend class="field-label">Approved models</legend>
            <label class="check">
              <input type="radio" name="approval" checked={!form.restricted} onChange={() => update({ restricted: false })} />
              Every configured model
            </label>
            <label class="check">
              <input type="radio" name="approval" checked={form.restricted} onChange={() => update({ restricted: true })} />
              Only models matching these patterns
            </label>
          </fieldset>
          {form.restricted && (
            <SettingField
              label="Approved patterns"
              hint="One per line; * and ? are wildcards (gpt-4o*). No pattern approves no model."
              error={approvedError || null}
              render={(props) => (
                <textarea {...props} rows={4} value={form.approved} onInput={(event) => update({ approved: event.currentTarget.value })} />
              )}
            />
          )}
          <SettingField
            label="Default model"
            hint="Used when a task names no model; empty: the service's default."
            error={fieldError(error, "body.default_model")}
            render={(props) => (
              <>
                <input {...props} list="settings-model-names" class="mono" value={form.defaultModel} onInput={(event) => update({ defaultModel: event.currentTarget.value })} />
                <datalist id="settings-model-names">
                  {(models.data?.items || []).map((model) => (
                    <option value={model.name} key={model.name} />
                  ))}
                </datalist>
              </>
            )}
          />
          <div class="field">
            <span class="field-label" id="caps-label">
              Max output tokens per model
            </span>
            {form.caps.length === 0 && <span class="muted">No caps: models answer up to their own limits.</span>}
            {form.caps.length > 0 && (
              <table class="compact" aria-labelledby="caps-label">
                <thead>
                  <tr>
                    <th scope="col">Model or pattern</th>
                    <th scope="col" class="number">Tokens</th>
                    <th scope="col">
                      <span class="visually-hidden">Remove</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {form.caps.map((cap, index) => (
                    <tr key={index}>
                      <td>
                        <input aria-label={`Cap ${index + 1} model or pattern`} class="mono" value={cap.pattern} onInput={(event) => setCap(index, { pattern: event.currentTarget.value })} />
                      </td>
                      <td class="number">
                        <input aria-label={`Cap ${index + 1} tokens`} class="number-input" inputMode="numeric" value={cap.tokens} onInput={(event) => setCap(index, { tokens: event.currentTarget.value })} />
                      </td>
                      <td>
                        <button type="button" class="small" aria-label={`Remove cap ${index + 1}`} onClick={() => update({ caps: form.caps.filter((_, at) => at !== index) })}>
                          Remove
                        </button>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
            {capsError && <span class="field-error">{capsError}</span>}
            <div>
              <button type="button" class="small" onClick={() => update({ caps: [...form.caps, { pattern: "", tokens: "" }] })}>
                Add a cap
              </button>
            </div>
          </div>
          <div class="form-actions">
            <button type="submit" class="primary" disabled={saving.busy}>
              {saving.busy ? "Saving…" : "Save model policy"}
            </button>
            <Notice text={notice} />
          </div>
        </Card>
      </form>
      <Card title="Models this tenant can use">
        <p class="muted card-intro">The service's model list as this policy approves it, with list prices.</p>
        <ModelTable models={models} />
      </Card>
    </div>
  );
}
