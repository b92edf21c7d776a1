import { Page } from "../components.jsx";

export function TasksPage() {
  return <Page title="TasksPage">Not built yet.</Page>;
}
