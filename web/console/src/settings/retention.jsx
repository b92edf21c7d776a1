// Retention: how long the tenant's finished tasks, idle conversations, files and audit events
// are kept (GET/PUT /tenants/{tid}/retention); an empty field follows the platform's default.
import { Card, ErrorNote, Loading } from "../components.jsx";
import { FormError, Notice, SettingField, fieldError, fromText, toText, useNotice, useTenantSetting } from "./common.jsx";

const FIELDS = [
  {
    name: "retention_days",
    label: "Tasks, conversations and files (days)",
    hint: "Finished tasks, conversations idle this long and files uploaded this long ago are deleted daily (1–3650).",
  },
  {
    name: "audit_retention_days",
    label: "Audit events (days)",
    hint: "Audit events older than this are deleted daily (1–3650).",
  },
];

function formOf(settings) {
  return {
    texts: Object.fromEntries(FIELDS.map((field) => [field.name, toText(settings[field.name])])),
    effective: {
      retention_days: settings.effective_retention_days,
      audit_retention_days: settings.effective_audit_retention_days,
    },
  };
}

export function RetentionSection({ tenantId }) {
  const { loadError, form, setForm, stored, save, saving } = useTenantSetting(tenantId, "retention", formOf);
  const [notice, showNotice] = useNotice();
  if (loadError) return <ErrorNote error={loadError} />;
  if (!form) return <Loading what="Loading the retention" />;

  const dirty = JSON.stringify(form.texts) !== JSON.stringify(stored.texts);
  const onSubmit = async (event) => {
    event.preventDefault();
    showNotice(null);
    const body = Object.fromEntries(FIELDS.map((field) => [field.name, fromText(form.texts[field.name], "int")]));
    if (await save(body)) showNotice("Retention saved.");
  };
  return (
    <form onSubmit={onSubmit} aria-label="Retention" noValidate>
      <FormError error={saving.error} placed={(field) => FIELDS.some((f) => field === `body.${f.name}`)} />
      <Card>
        <p class="muted card-intro">
          Running and waiting tasks are never deleted. The daily usage and the costs of deleted tasks are kept, so
          cost reports stay exact.
        </p>
        <div class="quota-fields">
          {FIELDS.map((field) => (
            <SettingField
              key={field.name}
              label={field.label}
              hint={`${field.hint} Now: ${form.effective[field.name]} days.`}
              error={fieldError(saving.error, `body.${field.name}`)}
              render={(props) => (
                <input
                  {...props}
                  type="text"
                  inputMode="numeric"
                  class="number-input"
                  placeholder={`default (${form.effective[field.name]})`}
                  value={form.texts[field.name]}
                  onInput={(event) => {
                    const value = event.currentTarget.value;
                    setForm((old) => ({ ...old, texts: { ...old.texts, [field.name]: value } }));
                  }}
                />
              )}
            />
          ))}
        </div>
      </Card>
      <div class="form-actions">
        <button type="submit" class="primary" disabled={saving.busy}>
          {saving.busy ? "Saving…" : "Save retention"}
        </button>
        <button type="button" disabled={!dirty || saving.busy} onClick={() => setForm(stored)}>
          Discard changes
        </button>
        {dirty && <span class="muted">Unsaved changes</span>}
        <Notice text={notice} />
      </div>
    </form>
  );
}
