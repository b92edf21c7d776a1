import { Page } from "../components.jsx";

export function CostsPage() {
  return <Page title="CostsPage">Not built yet.</Page>;
}
