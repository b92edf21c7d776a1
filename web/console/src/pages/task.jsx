import { Page } from "../components.jsx";

export function TaskPage() {
  return <Page title="TaskPage">Not built yet.</Page>;
}
