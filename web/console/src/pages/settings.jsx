// Settings of the caller's own tenant, a tab per area, each shown only to roles whose
// permissions allow it; the tab is kept in the URL (?section=keys).
import "./settings.css";
import { Page } from "../components.jsx";
import { navigate } from "../router.jsx";
import { useSession } from "../session.js";
import { KeysSection } from "../settings/keys.jsx";
import { McpSection } from "../settings/mcp.jsx";
import { ModelsSection } from "../settings/models.jsx";
import { QuotasSection } from "../settings/quotas.jsx";
import { RetentionSection } from "../settings/retention.jsx";
import { SecretsSection } from "../settings/secrets.jsx";
import { VisibilitySection } from "../settings/visibility.jsx";
import { WebhooksSection } from "../settings/webhooks.jsx";

const SECTIONS = [
  {
    id: "quotas",
    label: "Quotas",
    permission: "rate_limit:configure",
    about:
      "Rate limits, spend windows and the default budget of tasks, for the whole tenant. An empty field does " +
      "not limit; windows slide (a per-minute limit holds for any 60 seconds). Saving replaces every limit.",
    Component: QuotasSection,
  },
  {
    id: "models",
    label: "Models",
    permission: "cost:configure",
    about: "Which models tasks may use, the default model and output-token caps.",
    Component: ModelsSection,
  },
  {
    id: "visibility",
    label: "Visibility",
    permission: "tool:configure",
    about: (
      <>
        What readers without full access (<code>chain:read_full</code>) see of each step: <strong>full</strong>, a{" "}
        <strong>summary</strong>, or <strong>hidden</strong>. A tool's own rule wins over its type's; a role's rules win
        over the tenant's. Changes apply to every read from now on, past chains included.
      </>
    ),
    Component: VisibilitySection,
  },
  {
    id: "secrets",
    label: "Secrets",
    permission: "secret:configure",
    about: "Credentials for tools and MCP servers, by name; values are never shown.",
    Component: SecretsSection,
  },
  {
    id: "mcp",
    label: "MCP servers",
    permission: "tool:configure",
    about: "Remote MCP servers whose tools this tenant's runs may use.",
    Component: McpSection,
  },
  {
    id: "keys",
    label: "API keys",
    permission: "api_key:configure",
    about: "Keys for scripts and services; a new key's secret is shown once.",
    Component: KeysSection,
  },
  {
    id: "webhooks",
    label: "Webhooks",
    permission: "webhook:configure",
    about: "Endpoints told when tasks end, wait for an approval or near their budget; their deliveries and attempts.",
    Component: WebhooksSection,
  },
  {
    id: "retention",
    label: "Retention",
    permission: "tenant:manage",
    about: "How long finished tasks, idle conversations, files and audit events are kept before the daily purge deletes them.",
    Component: RetentionSection,
  },
];

export function canSeeSettings(can) {
  return SECTIONS.some((section) => can(section.permission));
}

export function SettingsPage({ query }) {
  const { me, can } = useSession();
  const allowed = SECTIONS.filter((section) => can(section.permission));

  if (allowed.length === 0) {
    return (
      <Page title="Settings">
        <div class="card not-allowed" role="status">
          <h2>You may not change this tenant's settings</h2>
          <p class="muted">
            Your roles ({me.roles.join(", ") || "none"}) do not include a permission to configure quotas, models,
            visibility, secrets, MCP servers or API keys. Ask a tenant admin if you need a change.
          </p>
        </div>
      </Page>
    );
  }

  const asked = query?.get("section");
  const current = allowed.find((section) => section.id === asked) || allowed[0];
  const select = (id) => navigate("/settings", { query: { section: id }, replace: true });
  const onKeyDown = (event) => {
    const at = allowed.indexOf(current);
    const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
    if (!step) return;
    event.preventDefault();
    const next = allowed[(at + step + allowed.length) % allowed.length];
    select(next.id);
    document.getElementById(`settings-tab-${next.id}`)?.focus();
  };
  const Section = current.Component;

  return (
    <Page
      title="Settings"
      subtitle={
        <>
          {me.tenant.name} <span class="mono">({me.tenant.id})</span>
        </>
      }
    >
      <div class="tabs settings-tabs" role="tablist" aria-label="Settings sections" onKeyDown={onKeyDown}>
        {allowed.map((section) => (
          <button
            type="button"
            role="tab"
            id={`settings-tab-${section.id}`}
            key={section.id}
            class={section === current ? "active" : ""}
            aria-selected={section === current ? "true" : "false"}
            aria-controls="settings-panel"
            tabIndex={section === current ? 0 : -1}
            onClick={() => select(section.id)}
          >
            {section.label}
          </button>
        ))}
      </div>
      <div role="tabpanel" id="settings-panel" aria-labelledby={`settings-tab-${current.id}`} class="settings-panel">
        <p class="section-about">{current.about}</p>
        <Section key={current.id} tenantId={me.tenant.id} />
      </div>
    </Page>
  );
}
