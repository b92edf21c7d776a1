// The console's frame: navigation by what the caller's roles allow, who is signed in, and
// the page of the current path.
import { useEffect } from "preact/hooks";
import { Link, navigate, useRoute } from "./router.jsx";
import { useSession } from "./session.js";
import { AgentPage, AgentsPage } from "./pages/agents.jsx";
import { ConversationPage, ConversationsPage } from "./pages/conversations.jsx";
import { CostsPage } from "./pages/costs.jsx";
import { SettingsPage, canSeeSettings } from "./pages/settings.jsx";
import { TaskPage } from "./pages/task.jsx";
import { TasksPage } from "./pages/tasks.jsx";

const NAVIGATION = [
  { to: "/tasks", label: "Tasks", allowed: (can) => can("task:read") },
  { to: "/conversations", label: "Conversations", allowed: (can) => can("task:read") },
  { to: "/agents", label: "Agents", allowed: (can) => can("task:read") },
  { to: "/costs", label: "Costs", allowed: (can) => can("cost:view") },
  { to: "/settings", label: "Settings", allowed: (can) => canSeeSettings(can) },
];

// [pattern, page]: the first whose pattern matches the path draws it, with the groups.
const ROUTES = [
  [/^\/tasks$/, TasksPage],
  [/^\/tasks\/([0-9a-f-]{36})$/, TaskPage],
  [/^\/conversations$/, ConversationsPage],
  [/^\/conversations\/([0-9a-f-]{36})$/, ConversationPage],
  [/^\/agents$/, AgentsPage],
  [/^\/agents\/([a-z][a-z0-9_-]{0,63})$/, AgentPage],
  [/^\/costs$/, CostsPage],
  [/^\/settings$/, SettingsPage],
];

function NotFound({ path }) {
  return (
    <section class="page">
      <h1>Nothing here</h1>
      <p class="muted">
        The console has no page at <code>{path}</code>. <Link to="/tasks">Go to the tasks.</Link>
      </p>
    </section>
  );
}

export function App() {
  const { me, can, signOut } = useSession();
  const route = useRoute();

  useEffect(() => {
    if (route.path === "/") navigate("/tasks", { replace: true });
  }, [route.path]);

  let content = null;
  for (const [pattern, Component] of ROUTES) {
    const match = pattern.exec(route.path);
    if (match) {
      content = <Component params={match.slice(1)} query={route.query} key={route.path} />;
      break;
    }
  }
  if (!content && route.path !== "/") content = <NotFound path={route.path} />;

  return (
    <div class="layout">
      <nav class="sidebar" aria-label="Console">
        <div class="brand">
          <span class="brand-mark">◆</span> OmniForge
        </div>
        <ul>
          {NAVIGATION.filter((item) => item.allowed(can)).map((item) => (
            <li key={item.to}>
              <Link
                to={item.to}
                class={route.path.startsWith(item.to) ? "active" : ""}
                aria-current={route.path.startsWith(item.to) ? "page" : undefined}
              >
                {item.label}
              </Link>
            </li>
          ))}
        </ul>
        <div class="whoami">
          <div class="tenant" title="Tenant">
            {me.tenant.name} <span class="mono muted">({me.tenant.id})</span>
          </div>
          <div class="subject" title="Signed in as">
            {me.api_key ? `key “${me.api_key.name}”` : me.subject}
          </div>
          <div class="roles">{me.roles.join(", ") || "no roles"}</div>
          <button class="link" onClick={signOut}>
            Sign out
          </button>
        </div>
      </nav>
      <main class="content">{content}</main>
    </div>
  );
}
