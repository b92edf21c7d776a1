import { Page } from "../components.jsx";

export function ConversationsPage() {
  return <Page title="ConversationsPage">Not built yet.</Page>;
}

export function ConversationPage() {
  return <Page title="ConversationPage">Not built yet.</Page>;
}
