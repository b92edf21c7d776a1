// Small parts the settings sections share: fields that show the API's own error next to them,
// an inline confirmation for destructive actions, paged lists, and the quota fields that both
// the tenant's quotas and an API key's own limits use.
import { useEffect, useRef, useState } from "preact/hooks";
import { api } from "../api.js";
import { useAction, useApi } from "../hooks.js";
import { ErrorNote } from "../components.jsx";

// The API's message for a field (`body.submissions_per_minute`), if it gave one.
export function fieldError(error, field) {
  if (!error?.errors?.length) return null;
  const found = error.errors.find((problem) => problem.field === field);
  return found ? found.message : null;
}

// An ErrorNote for what the fields below do not already show next to themselves.
export function FormError({ error, placed = () => false }) {
  if (!error) return null;
  const rest = (error.errors || []).filter((problem) => !placed(problem.field));
  const allPlaced = rest.length === 0 && (error.errors || []).length > 0;
  const message = allPlaced ? "some values were not accepted: see the messages next to the fields." : error.message;
  const shown = { title: error.title, message, errors: rest };
  return <ErrorNote error={shown} />;
}

let counter = 0;
function useId(prefix) {
  const ref = useRef(null);
  if (ref.current === null) ref.current = `${prefix}-${++counter}`;
  return ref.current;
}

// A labelled input with its hint and the API's error for it. `children` is the input; it
// receives id/aria attributes through `render(props)` so the label and error stay tied to it.
export function SettingField({ label, hint, error, render, class: extra = "" }) {
  const id = useId("setting");
  const describedBy = [hint && `${id}-hint`, error && `${id}-error`].filter(Boolean).join(" ");
  return (
    <div class={`field ${error ? "has-error" : ""} ${extra}`}>
      <label class="field-label" for={id}>
        {label}
      </label>
      {render({
        id,
        "aria-invalid": error ? "true" : undefined,
        "aria-describedby": describedBy || undefined,
      })}
      {hint && (
        <span class="field-hint" id={`${id}-hint`}>
          {hint}
        </span>
      )}
      {error && (
        <span class="field-error" id={`${id}-error`}>
          {error}
        </span>
      )}
    </div>
  );
}

// A button that asks before it acts: the question and the confirming button appear in place.
export function ConfirmButton({ label, ariaLabel, question, confirmLabel, onConfirm, busy }) {
  const [asking, setAsking] = useState(false);
  const cancel = useRef(null);
  // The question takes the button's place: keyboard focus goes to its safe answer.
  useEffect(() => {
    if (asking) cancel.current?.focus();
  }, [asking]);
  if (!asking) {
    return (
      <button type="button" class="small danger" aria-label={ariaLabel} onClick={() => setAsking(true)}>
        {label}
      </button>
    );
  }
  return (
    <span class="confirm" role="group" aria-label={question}>
      <span class="confirm-question">{question}</span>
      <span class="confirm-buttons">
        <button
          type="button"
          class="small danger-solid"
          disabled={busy}
          onClick={async () => {
            await onConfirm();
            setAsking(false);
          }}
        >
          {confirmLabel}
        </button>
        <button type="button" class="small" ref={cancel} disabled={busy} onClick={() => setAsking(false)}>
          Cancel
        </button>
      </span>
    </span>
  );
}

// A tenant setting (GET and PUT /api/v1/tenants/{tid}/{name}) edited as a form: `form` is
// `formOf` what was read, `stored` what the service holds now (`form` is unsaved where it
// differs), and `save(body)` PUTs it, both becoming `formOf` the answer.
export function useTenantSetting(tenantId, name, formOf) {
  const path = `/api/v1/tenants/${encodeURIComponent(tenantId)}/${name}`;
  const loaded = useApi(path);
  const [stored, setStored] = useState(null);
  const [form, setForm] = useState(null);
  const [put, saving] = useAction((body) => api(path, { method: "PUT", body }));
  const take = (data) => {
    setStored(formOf(data));
    setForm(formOf(data));
  };
  useEffect(() => {
    if (loaded.data) take(loaded.data);
  }, [loaded.data]);
  const save = async (body) => {
    const answer = await put(body);
    if (answer) take(answer);
    return answer;
  };
  return { loadError: loaded.error, form, setForm, stored, save, saving };
}

// A short-lived note that something was saved ("Saved.") for a polite live region.
export function useNotice() {
  const [notice, setNotice] = useState(null);
  const timer = useRef(null);
  useEffect(() => () => clearTimeout(timer.current), []);
  const show = (text) => {
    setNotice(text);
    clearTimeout(timer.current);
    timer.current = setTimeout(() => setNotice(null), 6000);
  };
  return [notice, show];
}

export function Notice({ text }) {
  return (
    <span class="notice" role="status" aria-live="polite">
      {text || ""}
    </span>
  );
}

// ---- Quotas: the fields of TenantQuotas (also an API key's own limits) ----

export const TOOL_TYPES = ["llm", "external", "skill", "sub_agent", "database", "file_system", "custom", "mcp", "sandbox"];

export const QUOTA_GROUPS = [
  {
    title: "Submissions",
    fields: [
      { name: "submissions_per_minute", label: "Submissions per minute", kind: "int", hint: "Tasks accepted per minute; more are refused with 429." },
      { name: "concurrent_runs", label: "Concurrent runs", kind: "int", hint: "Unfinished tasks at once; more are refused with 429.", tenantOnly: true },
    ],
  },
  {
    title: "Model calls and tokens",
    fields: [
      { name: "llm_calls_per_minute", label: "LLM calls per minute", kind: "int" },
      { name: "tokens_per_minute", label: "Tokens per minute", kind: "int" },
      { name: "tokens_per_hour", label: "Tokens per hour", kind: "int" },
    ],
  },
  {
    title: "Spend",
    fields: [
      { name: "cost_per_hour_usd", label: "Cost per hour (USD)", kind: "usd" },
      { name: "cost_per_day_usd", label: "Cost per day (USD)", kind: "usd" },
    ],
  },
];

export const BUDGET_FIELDS = [
  { name: "max_cost_usd", label: "Max cost (USD)", kind: "usd" },
  { name: "max_tokens", label: "Max tokens", kind: "int" },
  { name: "max_llm_calls", label: "Max LLM calls", kind: "int" },
  { name: "max_steps", label: "Max steps", kind: "int" },
  { name: "max_duration_s", label: "Max duration (seconds)", kind: "number" },
];

// What a form field holds (always text) from what the API gave.
export function toText(value) {
  return value === null || value === undefined ? "" : String(value);
}

// What the API gets from what a form field holds: empty is unset; numbers are sent as
// numbers when they read as such, otherwise as typed so the API names the problem.
export function fromText(text, kind) {
  const value = text.trim();
  if (value === "") return null;
  if (kind === "usd") return value;
  if (/^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(value)) return Number(value);
  return value;
}

// Inputs of a group of quota fields; `values` are texts by name, `prefix` the error path.
export function QuotaInputs({ fields, values, onInput, error, prefix }) {
  return (
    <div class="quota-fields">
      {fields.map((field) => (
        <SettingField
          key={field.name}
          label={field.label}
          hint={field.hint}
          error={fieldError(error, `${prefix}${field.name}`)}
          render={(props) => (
            <input
              {...props}
              type="text"
              inputMode={field.kind === "int" ? "numeric" : "decimal"}
              autoComplete="off"
              class="number-input"
              placeholder="No limit"
              value={values[field.name] ?? ""}
              onInput={(event) => onInput(field.name, event.currentTarget.value)}
            />
          )}
        />
      ))}
    </div>
  );
}
