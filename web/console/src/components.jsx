// The console's small shared parts: page frame, errors, status badges, figures, tables.
import { Link } from "./router.jsx";

export function Page({ title, subtitle, actions, children }) {
  return (
    <section class="page">
      <header class="page-head">
        <div>
          <h1>{title}</h1>
          {subtitle && <p class="subtitle">{subtitle}</p>}
        </div>
        {actions && <div class="actions">{actions}</div>}
      </header>
      {children}
    </section>
  );
}

export function Card({ title, actions, children, class: extra = "" }) {
  return (
    <section class={`card ${extra}`}>
      {(title || actions) && (
        <header class="card-head">
          {title && <h2>{title}</h2>}
          {actions && <div class="actions">{actions}</div>}
        </header>
      )}
      {children}
    </section>
  );
}

// An API error as the person should read it: the problem's detail and field errors.
export function ErrorNote({ error }) {
  if (!error) return null;
  return (
    <div class="error-note" role="alert">
      <strong>{error.title || "Something went wrong"}</strong>
      <span> {error.message}</span>
      {error.permission && !error.message.includes(error.permission) && (
        <span class="error-permission">
          {" "}
          (needs the permission <code>{error.permission}</code>)
        </span>
      )}
      {error.errors?.length > 0 && (
        <ul>
          {error.errors.map((problem) => (
            <li key={problem.field}>
              <code>{problem.field}</code>: {problem.message}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

export function Loading({ what = "Loading" }) {
  return <p class="muted loading">{what}…</p>;
}

export function Empty({ children }) {
  return <p class="empty">{children}</p>;
}

const STATUS_TONES = {
  submitted: "neutral",
  working: "active",
  input_required: "warn",
  completed: "good",
  incomplete: "warn",
  failed: "bad",
  cancelled: "neutral",
  active: "good",
  archived: "neutral",
  revoked: "bad",
  expired: "warn",
  pending: "warn",
  approved: "good",
  denied: "bad",
  ready: "good",
  ok: "good",
  error: "bad",
  unknown: "neutral",
};

export function Status({ value }) {
  return <span class={`status tone-${STATUS_TONES[value] || "neutral"}`}>{value}</span>;
}

export function Stat({ label, value, hint }) {
  return (
    <div class="stat">
      <span class="stat-label">{label}</span>
      <span class="stat-value">{value}</span>
      {hint && <span class="stat-hint">{hint}</span>}
    </div>
  );
}

export function IdLink({ to, id }) {
  return (
    <Link to={to} class="mono">
      {String(id).slice(0, 8)}
    </Link>
  );
}

// A form field: the label names the control (its accessible name is the label alone); the
// hint sits below it.
export function Field({ label, hint, children }) {
  return (
    <div class="field">
      <label class="field-control">
        <span class="field-label">{label}</span>
        {children}
      </label>
      {hint && <span class="field-hint">{hint}</span>}
    </div>
  );
}

// "Load more" under a list of `usePaged` (hooks.js), while the API has more pages.
export function LoadMore({ list }) {
  if (!list.next) return null;
  return (
    <div class="load-more">
      <button type="button" class="small" disabled={list.loading} onClick={list.more}>
        {list.loading ? "Loading…" : "Load more"}
      </button>
    </div>
  );
}
