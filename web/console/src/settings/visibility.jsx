// Visibility: how much of each step readers without full access see — per tool type, per tool,
// per role, plus extra sensitive field names (GET/PUT /tenants/{tid}/visibility).
import { useState } from "preact/hooks";
import { Card, ErrorNote, Loading } from "../components.jsx";
import { json } from "../format.js";
import { FormError, Notice, SettingField, TOOL_TYPES, useNotice, useTenantSetting } from "./common.jsx";

const LEVELS = ["full", "summary", "hidden"];
const ROLES_EXAMPLE = '{\n  "viewer": {"tool_types": {"external": "hidden"}, "tools": {"web_fetch": "summary"}}\n}';

function formOf(policy) {
  return {
    toolTypes: { ...(policy.tool_types || {}) },
    tools: Object.entries(policy.tools || {}).map(([name, level]) => ({ name, level })),
    sensitive: (policy.sensitive_fields || []).join("\n"),
    roles: Object.keys(policy.roles || {}).length ? json(policy.roles) : "{}",
  };
}

// The policy to send, or a message saying why the per-role JSON cannot be read.
function bodyOf(form) {
  let roles;
  try {
    roles = JSON.parse(form.roles.trim() || "{}");
  } catch (error) {
    return { problem: `The per-role rules are not valid JSON: ${error.message}` };
  }
  if (roles === null || typeof roles !== "object" || Array.isArray(roles)) {
    return { problem: "The per-role rules must be a JSON object: role name → rule." };
  }
  const tools = {};
  for (const row of form.tools) if (row.name.trim()) tools[row.name.trim()] = row.level;
  return {
    body: {
      tool_types: Object.fromEntries(Object.entries(form.toolTypes).filter(([, level]) => level)),
      tools,
      roles,
      sensitive_fields: form.sensitive
        .split(/[\n,]/)
        .map((name) => name.trim())
        .filter(Boolean),
    },
  };
}

function messagesUnder(error, prefix) {
  return (error?.errors || [])
    .filter((problem) => problem.field === prefix || problem.field.startsWith(`${prefix}.`))
    .map((problem) => {
      const where = problem.field.slice(prefix.length + 1);
      return where ? `${where}: ${problem.message}` : problem.message;
    })
    .join("; ");
}

function LevelSelect({ value, onChange, label, allowDefault = true }) {
  return (
    <select aria-label={label} value={value || ""} onChange={(event) => onChange(event.currentTarget.value)}>
      {allowDefault && <option value="">Tool's default</option>}
      {LEVELS.map((level) => (
        <option value={level} key={level}>
          {level}
        </option>
      ))}
    </select>
  );
}

export function VisibilitySection({ tenantId }) {
  const { loadError, form, setForm, save, saving } = useTenantSetting(
    tenantId,
    "visibility",
    formOf,
  );
  const [problem, setProblem] = useState(null);
  const [notice, showNotice] = useNotice();

  if (loadError) return <ErrorNote error={loadError} />;
  if (!form) return <Loading what="Loading the visibility settings" />;

  const update = (changes) => setForm((old) => ({ ...old, ...changes }));
  const setTool = (index, changes) => update({ tools: form.tools.map((row, at) => (at === index ? { ...row, ...changes } : row)) });
  const onSubmit = async (event) => {
    event.preventDefault();
    showNotice(null);
    const { body, problem: unreadable } = bodyOf(form);
    setProblem(unreadable || null);
    if (unreadable) return;
    if (await save(body)) showNotice("Visibility settings saved.");
  };
  const error = saving.error;
  const placed = (field) => ["body.tool_types", "body.tools", "body.roles", "body.sensitive_fields"].some((p) => field === p || field.startsWith(`${p}.`));

  return (
    <form onSubmit={onSubmit} aria-label="Visibility settings" noValidate>
      <FormError error={error} placed={placed} />
      <div class="grid two">
        <Card title="By tool type">
          <table class="compact">
            <thead>
              <tr>
                <th scope="col">Tool type</th>
                <th scope="col">Level</th>
              </tr>
            </thead>
            <tbody>
              {TOOL_TYPES.map((type) => (
                <tr key={type}>
                  <td class="mono">{type}</td>
                  <td>
                    <LevelSelect
                      label={`Level for tool type ${type}`}
                      value={form.toolTypes[type]}
                      onChange={(level) => update({ toolTypes: { ...form.toolTypes, [type]: level } })}
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {messagesUnder(error, "body.tool_types") && <span class="field-error">{messagesUnder(error, "body.tool_types")}</span>}
          <p class="field-hint">The type <code>llm</code> also sets how the model's reasoning is shown.</p>
        </Card>
        <div>
          <Card title="By tool">
            {form.tools.length === 0 && <p class="muted">No rule for a single tool.</p>}
            {form.tools.length > 0 && (
              <table class="compact">
                <thead>
                  <tr>
                    <th scope="col">Tool name</th>
                    <th scope="col">Level</th>
                    <th scope="col">
                      <span class="visually-hidden">Remove</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {form.tools.map((row, index) => (
                    <tr key={index}>
                      <td>
                        <input aria-label={`Tool rule ${index + 1} name`} class="mono" value={row.name} onInput={(event) => setTool(index, { name: event.currentTarget.value })} />
                      </td>
                      <td>
                        <LevelSelect label={`Tool rule ${index + 1} level`} value={row.level} allowDefault={false} onChange={(level) => setTool(index, { level })} />
                      </td>
                      <td>
                        <button type="button" class="small" aria-label={`Remove tool rule ${index + 1}`} onClick={() => update({ tools: form.tools.filter((_, at) => at !== index) })}>
                          Remove
                        </button>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
            {messagesUnder(error, "body.tools") && <span class="field-error">{messagesUnder(error, "body.tools")}</span>}
            <button type="button" class="small add-row" onClick={() => update({ tools: [...form.tools, { name: "", level: "summary" }] })}>
              Add a tool rule
            </button>
          </Card>
          <Card title="Sensitive fields">
            <SettingField
              label="Extra field names to redact"
              hint="One per line (or separated by commas), beyond the tools' own; names ignore case."
              error={messagesUnder(error, "body.sensitive_fields") || null}
              render={(props) => <textarea {...props} rows={4} value={form.sensitive} onInput={(event) => update({ sensitive: event.currentTarget.value })} />}
            />
          </Card>
        </div>
      </div>
      <Card title="Per-role rules">
        <SettingField
          label="Rules by role (JSON)"
          hint={
            <>
              An object from role name to a rule with <code>tool_types</code> and <code>tools</code>, e.g.{" "}
              <code>{'{"viewer": {"tool_types": {"external": "hidden"}}}'}</code>.
            </>
          }
          error={problem || messagesUnder(error, "body.roles") || null}
          render={(props) => (
            <textarea
              {...props}
              rows={Math.min(16, Math.max(5, form.roles.split("\n").length + 1))}
              spellcheck={false}
              placeholder={ROLES_EXAMPLE}
              value={form.roles}
              onInput={(event) => update({ roles: event.currentTarget.value })}
            />
          )}
        />
      </Card>
      <div class="form-actions">
        <button type="submit" class="primary" disabled={saving.busy}>
          {saving.busy ? "Saving…" : "Save visibility settings"}
        </button>
        <Notice text={notice} />
      </div>
    </form>
  );
}
