// Quotas: the tenant's rate limits, spend windows, waiting time and default task budget
// (GET/PUT /tenants/{tid}/quotas). PUT replaces every limit: an empty field no longer limits.
import { Card, ErrorNote, Loading } from "../components.jsx";
import { BUDGET_FIELDS, FormError, Notice, QUOTA_GROUPS, QuotaInputs, SettingField, TOOL_TYPES, fieldError, fromText, toText, useNotice, useTenantSetting } from "./common.jsx";

const TOP_FIELDS = QUOTA_GROUPS.flatMap((group) => group.fields);
const OTHER_TOOL_TYPES = TOOL_TYPES.filter((type) => type !== "llm");
const TOOL_FIELDS = OTHER_TOOL_TYPES.map((type) => ({ name: type, label: type.replace("_", " "), kind: "int" }));
// The error paths shown next to their fields (the rest go in the note above the form).
const PLACED = new Set([
  ...TOP_FIELDS.map((field) => `body.${field.name}`),
  "body.max_wait_s",
  ...OTHER_TOOL_TYPES.map((type) => `body.tool_calls_per_minute.${type}`),
  ...BUDGET_FIELDS.map((field) => `body.default_budget.${field.name}`),
]);

function textsOf(quotas) {
  const top = Object.fromEntries(TOP_FIELDS.map((field) => [field.name, toText(quotas[field.name])]));
  return {
    top,
    maxWait: toText(quotas.max_wait_s),
    tools: Object.fromEntries(OTHER_TOOL_TYPES.map((type) => [type, toText(quotas.tool_calls_per_minute?.[type])])),
    budget: Object.fromEntries(BUDGET_FIELDS.map((field) => [field.name, toText(quotas.default_budget?.[field.name])])),
  };
}

function bodyOf(texts) {
  const body = {};
  for (const field of TOP_FIELDS) body[field.name] = fromText(texts.top[field.name], field.kind);
  const wait = fromText(texts.maxWait, "number");
  if (wait !== null) body.max_wait_s = wait;
  body.tool_calls_per_minute = {};
  for (const type of OTHER_TOOL_TYPES) {
    const value = fromText(texts.tools[type], "int");
    if (value !== null) body.tool_calls_per_minute[type] = value;
  }
  body.default_budget = {};
  for (const field of BUDGET_FIELDS) {
    const value = fromText(texts.budget[field.name], field.kind);
    if (value !== null) body.default_budget[field.name] = value;
  }
  return body;
}

export function QuotasSection({ tenantId }) {
  const setting = useTenantSetting(tenantId, "quotas", textsOf);
  const { loadError, form: texts, setForm: setTexts, stored: saved, save, saving } = setting;
  const [notice, showNotice] = useNotice();

  if (loadError) return <ErrorNote error={loadError} />;
  if (!texts) return <Loading what="Loading the quotas" />;

  const dirty = JSON.stringify(texts) !== JSON.stringify(saved);
  const set = (part) => (name, value) => setTexts((old) => ({ ...old, [part]: { ...old[part], [name]: value } }));
  const onSubmit = async (event) => {
    event.preventDefault();
    showNotice(null);
    if (await save(bodyOf(texts))) showNotice("Quotas saved.");
  };
  const toolErrors = OTHER_TOOL_TYPES.some((type) => fieldError(saving.error, `body.tool_calls_per_minute.${type}`));

  return (
    <form onSubmit={onSubmit} aria-label="Quotas" noValidate>
      <FormError error={saving.error} placed={(field) => PLACED.has(field)} />
      <div class="grid two">
        {QUOTA_GROUPS.map((group) => (
          <Card title={group.title} key={group.title}>
            <QuotaInputs fields={group.fields} values={texts.top} onInput={set("top")} error={saving.error} prefix="body." />
          </Card>
        ))}
        <Card title="Waiting inside a run">
          <div class="quota-fields">
            <SettingField
              label="Max wait (seconds)"
              hint="How long a call over a limit inside a run waits before the run ends rate_limited (0–600)."
              error={fieldError(saving.error, "body.max_wait_s")}
              render={(props) => (
                <input
                  {...props}
                  type="text"
                  inputMode="decimal"
                  class="number-input"
                  placeholder="30"
                  value={texts.maxWait}
                  onInput={(event) => {
                    const value = event.currentTarget.value;
                    setTexts((old) => ({ ...old, maxWait: value }));
                  }}
                />
              )}
            />
          </div>
        </Card>
      </div>
      <Card title="Default task budget">
        <p class="muted card-intro">Fills the budget limits a task leaves unset.</p>
        <QuotaInputs fields={BUDGET_FIELDS} values={texts.budget} onInput={set("budget")} error={saving.error} prefix="body.default_budget." />
      </Card>
      <Card>
        <details open={toolErrors || OTHER_TOOL_TYPES.some((type) => texts.tools[type])}>
          <summary>Tool calls per minute, by tool type</summary>
          <p class="muted card-intro">LLM calls are limited above; these limit the other tools' calls inside runs.</p>
          <QuotaInputs fields={TOOL_FIELDS} values={texts.tools} onInput={set("tools")} error={saving.error} prefix="body.tool_calls_per_minute." />
        </details>
      </Card>
      <div class="form-actions">
        <button type="submit" class="primary" disabled={saving.busy}>
          {saving.busy ? "Saving…" : "Save quotas"}
        </button>
        <button type="button" disabled={!dirty || saving.busy} onClick={() => setTexts(saved)}>
          Discard changes
        </button>
        {dirty && <span class="muted">Unsaved changes</span>}
        <Notice text={notice} />
      </div>
    </form>
  );
}
