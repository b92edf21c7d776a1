// Conversations with agents: the list with a form to start one, and a conversation as a
// chat — each turn a task (POST /api/v1/tasks with `conversation_id`), its answer typing in
// live while it runs.
import { useEffect, useRef, useState } from "preact/hooks";
import { api } from "../api.js";
import { Card, Empty, ErrorNote, IdLink, LoadMore, Loading, Page, Stat } from "../components.jsx";
import { count, shortId, usd, when } from "../format.js";
import { useAction, useApi, usePaged } from "../hooks.js";
import { Link, navigate } from "../router.jsx";
import { useSession } from "../session.js";
import { inputText } from "../chain/labels.js";
import { EraseButton } from "../erase.jsx";
import { draftAnswer, isFinished, isLLMCall, pendingApprovals } from "../chain/model.js";
import { useTaskChain } from "../chain/use-chain.js";
import "./chain.css";

function sendTurn(conversationId, input) {
  return api("/api/v1/tasks", {
    method: "POST",
    body: { input, conversation_id: conversationId, stream_output: true },
  });
}

function NewConversation() {
  const agents = useApi("/api/v1/agents", { limit: 200 });
  const [agent, setAgent] = useState("");
  const [message, setMessage] = useState("");
  const [start, state] = useAction(async () => {
    const conversation = await api("/api/v1/conversations", {
      method: "POST",
      body: agent ? { agent } : {},
    });
    await sendTurn(conversation.id, message);
    return conversation;
  });
  const onSubmit = async (event) => {
    event.preventDefault();
    const conversation = await start();
    if (conversation) navigate(`/conversations/${conversation.id}`);
  };
  return (
    <Card title="New conversation">
      <form onSubmit={onSubmit} aria-label="New conversation">
        <label class="field">
          <span class="field-label">Agent</span>
          <select value={agent} onChange={(event) => setAgent(event.currentTarget.value)}>
            <option value="">The default agent</option>
            {(agents.data?.items || [])
              .filter((item) => !item.builtin)
              .map((item) => (
                <option key={item.name} value={item.name}>
                  {item.name}
                </option>
              ))}
          </select>
        </label>
        <label class="field">
          <span class="field-label">First message</span>
          <textarea
            value={message}
            rows={3}
            placeholder="Say hello, or ask your question"
            onInput={(event) => setMessage(event.currentTarget.value)}
            required
          />
        </label>
        <ErrorNote error={agents.error || state.error} />
        <button class="primary" type="submit" disabled={state.busy || !message.trim()}>
          {state.busy ? "Starting…" : "Start conversation"}
        </button>
      </form>
    </Card>
  );
}

export function ConversationsPage() {
  const { can } = useSession();
  const list = usePaged("/api/v1/conversations", { limit: 50 });
  const items = list.items;

  return (
    <Page title="Conversations" subtitle="Chats with your agents: each turn runs as a task.">
      <div class={can("task:create") ? "grid conversations-layout" : ""}>
        {can("task:create") && <NewConversation />}
        <Card title="Conversations">
          <ErrorNote error={list.error} />
          {list.loading && items.length === 0 ? (
            <Loading what="Loading the conversations" />
          ) : items.length === 0 ? (
            !list.error && <Empty>No conversation yet.</Empty>
          ) : (
            <table aria-label="Conversations">
              <thead>
                <tr>
                  <th>Conversation</th>
                  <th>Agent</th>
                  <th class="number">Turns</th>
                  <th>Updated</th>
                  <th>Started by</th>
                </tr>
              </thead>
              <tbody>
                {items.map((item) => (
                  <tr key={item.id}>
                    <td>
                      <IdLink to={`/conversations/${item.id}`} id={item.id} />
                    </td>
                    <td class="mono">{item.agent}</td>
                    <td class="number">{count(item.turn_count)}</td>
                    <td class="nowrap">{when(item.updated_at)}</td>
                    <td class="muted">{item.user_id}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          <LoadMore list={list} />
        </Card>
      </div>
    </Page>
  );
}

// What the running turn is doing now, from its newest step.
function activity(chain) {
  const answered = new Set(
    chain.steps.filter((step) => step.tool_result).map((step) => step.tool_result.correlation_id),
  );
  const waiting = pendingApprovals(chain);
  if (waiting.length > 0) {
    return (
      <>
        Waiting for approval of <code>{waiting[0].tool}</code>:{" "}
        <Link to="/approvals">open the approvals inbox</Link>
      </>
    );
  }
  const last = chain.steps[chain.steps.length - 1];
  if (!last) return "Starting…";
  if (last.tool_call && !answered.has(last.tool_call.correlation_id)) {
    return isLLMCall(last) ? "Thinking…" : `Using ${last.tool_call.tool_name}…`;
  }
  return "Working…";
}

function Turn({ turn, live }) {
  const running = !isFinished(turn.status);
  const answer = turn.answer ?? (live ? live.chain.answer ?? draftAnswer(live.chain) : null);
  let bubble;
  if (answer !== null && answer !== undefined) {
    bubble = (
      <div class={`bubble agent${running ? " typing" : ""}`} data-role="agent">
        {answer}
      </div>
    );
  } else if (turn.status === "failed" || turn.status === "cancelled") {
    bubble = (
      <div class="bubble agent failed" data-role="agent">
        {turn.status === "cancelled" ? "Cancelled." : `Failed: ${turn.error_code || "error"}`}
      </div>
    );
  } else if (running) {
    bubble = (
      <div class="bubble agent pending" data-role="agent">
        …
      </div>
    );
  } else {
    bubble = (
      <div class="bubble agent pending" data-role="agent">
        No answer.
      </div>
    );
  }
  return (
    <li class="turn" data-turn={turn.turn} data-status={turn.status}>
      <div class="bubble user" data-role="user">
        {inputText(turn)}
      </div>
      {bubble}
      {running && live && <div class="turn-activity">{activity(live.chain)}</div>}
      <div class="turn-meta">
        <span>turn {turn.turn}</span>
        <span>{count(turn.usage.total_tokens)} tokens</span>
        <span>{usd(turn.usage.total_cost_usd)}</span>
        {turn.finished_at && <span>{when(turn.finished_at)}</span>}
        <Link to={`/tasks/${turn.task_id}`} aria-label={`Turn ${turn.turn}'s task`}>
          task <span class="mono">{shortId(turn.task_id)}</span>
        </Link>
      </div>
    </li>
  );
}

export function ConversationPage({ params }) {
  const [id] = params;
  const { can } = useSession();
  const { data, error, reload } = useApi(`/api/v1/conversations/${id}`);
  const [message, setMessage] = useState("");
  const end = useRef(null);
  const turns = data?.turns || [];
  const runningTurn = turns.find((turn) => !isFinished(turn.status)) || null;
  const { chain, error: liveError } = useTaskChain(
    runningTurn ? { id: runningTurn.task_id, status: runningTurn.status } : null,
    { enabled: can("chain:read"), onDone: () => reload() },
  );
  const [send, sendState] = useAction(async (text) => {
    await sendTurn(id, text);
    await reload();
    return true;
  });

  useEffect(() => {
    end.current?.scrollIntoView?.({ block: "nearest" });
  }, [turns.length, chain.live]);

  if (error) {
    return (
      <Page title="Conversation">
        <ErrorNote error={error} />
        <Link to="/conversations">Back to the conversations</Link>
      </Page>
    );
  }
  if (!data) {
    return (
      <Page title="Conversation">
        <Loading what="Loading the conversation" />
      </Page>
    );
  }

  const onSubmit = async (event) => {
    event.preventDefault();
    const text = message;
    setMessage("");
    if (!(await send(text))) setMessage(text);
  };
  const totals = data.totals;

  return (
    <Page
      title={
        <>
          Conversation <span class="mono">{shortId(data.id)}</span>
        </>
      }
      subtitle={
        <span>
          with <span class="mono">{data.agent}</span> · started {when(data.created_at)} by{" "}
          {data.user_id}
        </span>
      }
      actions={<EraseButton kind="conversation" id={data.id} />}
    >
      <Card class="conversation-totals">
        <div class="stats">
          <Stat label="Turns" value={count(totals.turns)} />
          <Stat label="LLM calls" value={count(totals.llm_calls)} />
          <Stat label="Tool calls" value={count(totals.tool_calls)} />
          <Stat label="Tokens in" value={count(totals.input_tokens)} />
          <Stat label="Tokens out" value={count(totals.output_tokens)} />
          <Stat label="Cost" value={usd(totals.total_cost_usd)} />
        </div>
      </Card>
      <Card title="Chat">
        {turns.length === 0 ? (
          <Empty>No turn yet: send the first message.</Empty>
        ) : (
          <ol class="chat" aria-label="Turns">
            {turns.map((turn) => (
              <Turn
                key={turn.task_id}
                turn={turn}
                live={runningTurn && turn.task_id === runningTurn.task_id ? { chain } : null}
              />
            ))}
          </ol>
        )}
        <div ref={end} />
        <ErrorNote error={liveError} />
        {can("task:create") && (
          <form class="composer" onSubmit={onSubmit} aria-label="Send a message">
            <label class="field">
              <span class="field-label">Message</span>
              <textarea
                value={message}
                rows={2}
                placeholder={runningTurn ? "Wait for the answer…" : "Your next message"}
                onInput={(event) => setMessage(event.currentTarget.value)}
                onKeyDown={(event) => {
                  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
                    event.currentTarget.form.requestSubmit();
                  }
                }}
              />
            </label>
            <button
              class="primary"
              type="submit"
              disabled={sendState.busy || Boolean(runningTurn) || !message.trim()}
            >
              {sendState.busy ? "Sending…" : "Send"}
            </button>
          </form>
        )}
        <ErrorNote error={sendState.error} />
      </Card>
    </Page>
  );
}
