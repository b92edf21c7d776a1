import { Page } from "../components.jsx";

export function canSeeSettings(can) {
  return ["rate_limit:configure", "cost:configure", "tool:configure", "secret:configure", "api_key:configure"].some(can);
}

export function SettingsPage() {
  return <Page title="Settings">Not built yet.</Page>;
}
