// The console's frame: navigation by what the caller's roles allow, who is signed in, and
// the page of the current path.
import { useEffect, useRef, useState } from "preact/hooks";
import { ErrorNote, Loading } from "./components.jsx";
import { Link, navigate, useRoute } from "./router.jsx";
import { useSession } from "./session.js";
import { AgentPage, AgentsPage } from "./pages/agents.jsx";
import { ApprovalsPage } from "./pages/approvals.jsx";
import { ConversationPage, ConversationsPage } from "./pages/conversations.jsx";
import "./pages/costs.css";
import { SchedulesPage } from "./pages/schedules.jsx";
import { SettingsPage, canSeeSettings } from "./pages/settings.jsx";
import { TaskPage } from "./pages/task.jsx";
import { TasksPage } from "./pages/tasks.jsx";

// A page loaded on first use: the cost dashboard brings the charting library, which no other
// page needs, so the console's first load does not carry it.
function lazy(load) {
  let loaded = null;
  return function LazyPage(props) {
    const [state, setState] = useState({ page: loaded, error: null });
    useEffect(() => {
      if (!state.page) {
        load().then(
          (page) => setState({ page: (loaded = page), error: null }),
          (error) => setState({ page: null, error })
        );
      }
    }, []);
    if (state.error) return <ErrorNote error={state.error} />;
    if (!state.page) return <Loading what="Loading the page" />;
    const Page = state.page;
    return <Page {...props} />;
  };
}

const CostsPage = lazy(() => import("./pages/costs.jsx").then((module) => module.CostsPage));

const NAVIGATION = [
  { to: "/tasks", label: "Tasks", allowed: (can) => can("task:read") },
  {
    to: "/approvals",
    label: "Approvals",
    allowed: (can) => can("task:approve") || can("task:read"),
  },
  { to: "/conversations", label: "Conversations", allowed: (can) => can("task:read") },
  { to: "/agents", label: "Agents", allowed: (can) => can("task:read") },
  { to: "/schedules", label: "Schedules", allowed: (can) => can("schedule:read") },
  { to: "/costs", label: "Costs", allowed: (can) => can("cost:view") },
  { to: "/settings", label: "Settings", allowed: (can) => canSeeSettings(can) },
];

// [pattern, page]: the first whose pattern matches the path draws it, with the groups.
const ROUTES = [
  [/^\/tasks$/, TasksPage],
  [/^\/tasks\/([0-9a-f-]{36})$/, TaskPage],
  [/^\/approvals$/, ApprovalsPage],
  [/^\/conversations$/, ConversationsPage],
  [/^\/conversations\/([0-9a-f-]{36})$/, ConversationPage],
  [/^\/agents$/, AgentsPage],
  [/^\/agents\/([a-z][a-z0-9_-]{0,63})$/, AgentPage],
  [/^\/schedules$/, SchedulesPage],
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
  // On a narrow screen the navigation folds behind the menu button (console.css); a wide one
  // shows it always and hides the button.
  const [menuOpen, setMenuOpen] = useState(false);
  const menuButton = useRef(null);
  const closeMenu = () => {
    setMenuOpen(false);
    menuButton.current?.focus();
  };

  useEffect(() => {
    if (route.path === "/") navigate("/tasks", { replace: true });
  }, [route.path]);
  // Every navigation folds the menu, a link to the page already shown included.
  useEffect(() => {
    setMenuOpen(false);
  }, [route]);

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
      <nav
        class="sidebar"
        aria-label="Console"
        onKeyDown={(event) => {
          if (event.key === "Escape" && menuOpen) closeMenu();
        }}
      >
        <div class="sidebar-inner">
          <div class="sidebar-bar">
            <div class="brand">
              <span class="brand-mark">◆</span> OmniForge
            </div>
            <button
              type="button"
              class="menu-button"
              ref={menuButton}
              aria-expanded={menuOpen ? "true" : "false"}
              aria-controls="console-menu"
              onClick={() => setMenuOpen(!menuOpen)}
            >
              <span class="menu-icon" aria-hidden="true" />
              Menu
            </button>
          </div>
          <div id="console-menu" class={`sidebar-menu${menuOpen ? " open" : ""}`}>
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
          </div>
        </div>
      </nav>
      <main class="content">{content}</main>
    </div>
  );
}
