import { Page } from "../components.jsx";

export function AgentsPage() {
  return <Page title="AgentsPage">Not built yet.</Page>;
}

export function AgentPage() {
  return <Page title="AgentPage">Not built yet.</Page>;
}
