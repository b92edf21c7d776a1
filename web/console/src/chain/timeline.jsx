// A chain's steps as a timeline: thoughts, tool calls with the result that completes each
// (paired by correlation id), the answer; live parts (an LLM call's reply typing in, a
// tool's progress) under the call that is running. Every step is one element with
// `data-step-type`, whole or summarised, exactly as the API sent it. A call that waited for
// a person's approval shows the wait, the decision and the run resuming under it. A call of a
// sub-agent holds the child's chain (sub-agent.jsx), its steps inside an element with
// `data-child-chain`: the chain's own steps are those outside any such element.
import { Decision, DecideForm } from "../approvals/decision.jsx";
import { count, duration, json, relative, when } from "../format.js";
import { Link } from "../router.jsx";
import { approvalsOf, isLLMCall, resumedAfter, timeline } from "./model.js";
import { EVENT_LABELS } from "./strategy.jsx";
import { SubAgent } from "./sub-agent.jsx";

// A step's time of day to the millisecond: steps of one chain are seconds apart.
function clock(iso) {
  const date = new Date(iso);
  const pad = (value, size = 2) => String(value).padStart(size, "0");
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`;
}

function exactUsd(value) {
  return value === null || value === undefined ? "—" : `$${value}`;
}

function StepHead({ step, label, children }) {
  return (
    <header class="step-head">
      <span class="step-number mono" title="Step number">
        #{step.step_number}
      </span>
      <span class="step-label">{label}</span>
      {step.copied_from && (
        <span class="badge recorded" title="Taken as recorded from the task this one replays or forks: no call made, nothing billed">
          recorded
        </span>
      )}
      {children}
      <time class="step-time muted" dateTime={step.timestamp} title={when(step.timestamp)}>
        {clock(step.timestamp)}
      </time>
    </header>
  );
}

const TYPE_LABELS = {
  thinking: "Thinking",
  tool_call: "Tool call",
  tool_result: "Tool result",
  synthesis: "Answer",
};

function SummaryStep({ step }) {
  return (
    <li class="step step-summary" data-step-type={step.type} data-step-number={step.step_number}>
      <StepHead step={step} label={TYPE_LABELS[step.type] || step.type}>
        <span class="badge">summary</span>
      </StepHead>
      <p class="step-summary-text">{step.visibility.summary}</p>
    </li>
  );
}

function Thinking({ step }) {
  const { thought, confidence, event } = step.thinking;
  return (
    <li
      class="step step-thinking"
      data-step-type="thinking"
      data-step-number={step.step_number}
      data-event={event}
    >
      <StepHead step={step} label={EVENT_LABELS[event] ?? "Thinking"}>
        {confidence !== null && confidence !== undefined && (
          <span class="muted">confidence {Math.round(confidence * 100)}%</span>
        )}
      </StepHead>
      <p class="thought">{thought}</p>
    </li>
  );
}

function Synthesis({ step }) {
  const { conclusion, stop_reason: stopReason, output } = step.synthesis;
  return (
    <li class="step step-synthesis" data-step-type="synthesis" data-step-number={step.step_number}>
      <StepHead step={step} label="Answer">
        {stopReason && <span class="badge warn">stopped by {stopReason}</span>}
      </StepHead>
      <p class="conclusion">{conclusion}</p>
      {output !== null && output !== undefined && <pre>{json(output)}</pre>}
    </li>
  );
}

function Usage({ result }) {
  const parts = [
    <span key="duration" class="usage-item" data-usage="duration">
      {duration(result.duration_ms)}
    </span>,
  ];
  if (result.input_tokens !== null && result.input_tokens !== undefined) {
    parts.push(
      <span key="tokens" class="usage-item" data-usage="tokens">
        {count(result.input_tokens)} in · {count(result.output_tokens)} out tokens
      </span>,
    );
  }
  if (result.cost_usd !== null && result.cost_usd !== undefined) {
    parts.push(
      <span key="cost" class="usage-item" data-usage="cost">
        {exactUsd(result.cost_usd)}
      </span>,
    );
  } else if (result.unpriced) {
    parts.push(
      <span key="cost" class="usage-item muted" data-usage="cost">
        unpriced
      </span>,
    );
  }
  if (result.attempts !== 1) {
    parts.push(
      <span key="attempts" class="usage-item" data-usage="attempts">
        {result.attempts} attempts
      </span>,
    );
  }
  if (result.cached) {
    parts.push(
      <span key="cached" class="usage-item badge">
        cached
      </span>,
    );
  }
  if (result.deployment) {
    parts.push(
      <span key="deployment" class="usage-item muted">
        via {result.deployment}
      </span>,
    );
  }
  return <div class="usage">{parts}</div>;
}

function LLMReply({ value }) {
  if (!value || typeof value !== "object") return <pre>{json(value)}</pre>;
  const calls = value.tool_calls || [];
  return (
    <div class="llm-reply">
      {value.reasoning && <p class="reasoning">{value.reasoning}</p>}
      {value.content && <p class="reply-text">{value.content}</p>}
      {calls.length > 0 && (
        <ul class="asked">
          {calls.map((call) => (
            <li key={call.id}>
              asks for <code>{call.name}</code>{" "}
              <code class="muted">{JSON.stringify(call.arguments)}</code>
            </li>
          ))}
        </ul>
      )}
      {!value.content && calls.length === 0 && <p class="muted">(no text)</p>}
    </div>
  );
}

function Result({ step, llm }) {
  const result = step.tool_result;
  return (
    <div
      class={`step step-result ${result.success ? "ok" : "failed"}`}
      data-step-type="tool_result"
      data-step-number={step.step_number}
    >
      <StepHead step={step} label="Result">
        <span class={`status tone-${result.success ? "good" : "bad"}`}>
          {result.success ? "success" : "failed"}
        </span>
        {result.truncated && <span class="badge warn">truncated</span>}
      </StepHead>
      {result.success ? (
        llm ? (
          <LLMReply value={result.result} />
        ) : (
          <pre class="result-value">{json(result.result)}</pre>
        )
      ) : (
        <p class="step-error">
          {result.error_code && <code>{result.error_code}</code>} {result.error}
        </p>
      )}
      <Usage result={result} />
      {result.failed_attempts?.length > 0 && (
        <ul class="failed-attempts muted">
          {result.failed_attempts.map((attempt) => (
            <li key={attempt.attempt}>
              attempt {attempt.attempt}: {attempt.error_class} — {attempt.message}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

function Progress({ progress }) {
  const percent = progress.fraction === null || progress.fraction === undefined
    ? null
    : Math.round(progress.fraction * 100);
  return (
    <div class="tool-progress" aria-live="polite">
      <span class="progress-message">{progress.message || "working…"}</span>
      {percent !== null && (
        <div
          class="progress-bar"
          role="progressbar"
          aria-label="Tool progress"
          aria-valuemin="0"
          aria-valuemax="100"
          aria-valuenow={percent}
        >
          <span style={{ width: `${percent}%` }} />
        </div>
      )}
      {percent !== null && <span class="progress-percent mono">{percent}%</span>}
    </div>
  );
}

function LiveReply({ live }) {
  return (
    <div class="live-reply" aria-live="polite" data-live="reply">
      {live.reasoning && <p class="reasoning">{live.reasoning}</p>}
      <p class="reply-text typing">{live.content}</p>
    </div>
  );
}

function At({ iso }) {
  return (
    <time dateTime={iso} title={when(iso)} class="mono">
      {clock(iso)}
    </time>
  );
}

// An approval of a tool call: the run suspended for it, what was decided and by whom, the
// run resuming. While it is pending, a person who may decide does so here or in the inbox.
function Approval({ approval, chain, decide }) {
  const pending = approval.status === "pending";
  const resumed = resumedAfter(chain, approval);
  return (
    <div
      class={`approval approval-${approval.status}`}
      data-approval-id={approval.id}
      data-approval-status={approval.status}
    >
      <p class="approval-wait" data-marker="suspended">
        <span class="badge warn">suspended</span>
        {pending ? (
          <>
            <strong>
              Waiting for approval of <code>{approval.tool}</code>
            </strong>
            <span class="muted">
              {" "}
              since <At iso={approval.created_at} />
              {approval.expires_at && `, expires ${relative(approval.expires_at)}`}
            </span>{" "}
            <Link to="/approvals">Open the approvals inbox</Link>
          </>
        ) : (
          <>
            Run suspended at <At iso={approval.created_at} /> for approval of{" "}
            <code>{approval.tool}</code>
          </>
        )}
      </p>
      {approval.note && <p class="approval-note">{approval.note}</p>}
      {pending && decide && approval.task_id && (
        <DecideForm approval={approval} onDecided={decide} />
      )}
      <Decision approval={approval} />
      {resumed && (
        <p class="approval-resumed" data-marker="resumed">
          <span class="badge resumed">resumed</span>
          Run resumed at <At iso={resumed.at} />
          {resumed.seen === "step" && <span class="muted"> (step #{resumed.step})</span>}
        </p>
      )}
    </div>
  );
}

function ToolCall({ step, result, live, progress, running, approvals, chain, family, decide }) {
  const call = step.tool_call;
  const llm = isLLMCall(step);
  const hasArguments = call.arguments && Object.keys(call.arguments).length > 0;
  const waiting = approvals.some((approval) => approval.status === "pending");
  return (
    <li
      class={`step step-call ${llm ? "llm" : "tool"}`}
      data-step-type="tool_call"
      data-step-number={step.step_number}
      data-tool={call.tool_name}
    >
      <StepHead step={step} label={llm ? "LLM call" : "Tool call"}>
        <code class="tool-name">{llm ? call.model || call.tool_name : call.tool_name}</code>
        <span class="badge">{call.tool_type}</span>
        {!result && waiting && <span class="status tone-warn">awaiting approval</span>}
        {!result && running && !waiting && <span class="status tone-active">running</span>}
        {!result && !running && <span class="status tone-neutral">no result</span>}
      </StepHead>
      {hasArguments &&
        (llm ? (
          <details class="arguments">
            <summary>Arguments</summary>
            <pre>{json(call.arguments)}</pre>
          </details>
        ) : (
          <pre class="arguments">{json(call.arguments)}</pre>
        ))}
      {approvals.map((approval) => (
        <Approval key={approval.id} approval={approval} chain={chain} decide={decide} />
      ))}
      {progress && <Progress progress={progress} />}
      {!result && live && <LiveReply live={live} />}
      {call.tool_type === "sub_agent" && (
        <SubAgent step={step} result={result} family={family} running={running} decide={decide} />
      )}
      {result && <Result step={result} llm={llm} />}
    </li>
  );
}

// Step numbers the reader was not sent (hidden from them) between two steps it sees.
function Gap({ from, to }) {
  return (
    <li class="gap muted">
      {from === to ? `Step ${from} is` : `Steps ${from}–${to} are`} not shown to you.
    </li>
  );
}

// An approval whose call the reader is not shown (or not yet), standing alone at its time.
function ApprovalEntry({ approval, chain, decide }) {
  return (
    <li class="step step-approval" data-entry="approval">
      <header class="step-head">
        <span class="step-label">Approval</span>
        <code class="tool-name">{approval.tool}</code>
        {approval.tool_type && <span class="badge">{approval.tool_type}</span>}
        {approval.created_at && (
          <time class="step-time muted" dateTime={approval.created_at}>
            {clock(approval.created_at)}
          </time>
        )}
      </header>
      {approval.arguments && <pre class="arguments">{json(approval.arguments)}</pre>}
      <Approval approval={approval} chain={chain} decide={decide} />
    </li>
  );
}

// A resume no approval explains: the run went on on another instance.
function ResumedEntry({ at }) {
  return (
    <li class="marker" data-marker="resumed">
      <span class="badge resumed">resumed</span>
      Run resumed at <At iso={at} />, its earlier steps kept.
    </li>
  );
}

// `decide(approval)`, when given, lets the reader decide pending approvals in the timeline.
// `family` holds the sub-agents' chains the task's stream relayed (the top chain's
// `children`); `running` says whether calls without a result are still under way (the top
// chain knows from its stream; a sub-agent's chain is told).
export function Timeline({
  chain,
  decide,
  family = chain.children,
  running: told,
  label = "Steps",
}) {
  const entries = timeline(chain.steps);
  const running = told ?? (!chain.ended && chain.following);
  const approvals = approvalsOf(chain);
  const calls = new Set(entries.filter((entry) => entry.step.tool_call).map((entry) => entry.step.id));
  const byStep = new Map();
  const alone = [];
  for (const approval of approvals) {
    if (calls.has(approval.step_id)) {
      byStep.set(approval.step_id, [...(byStep.get(approval.step_id) ?? []), approval]);
    } else {
      alone.push(approval);
    }
  }
  const explained = new Set(
    approvals.map((approval) => resumedAfter(chain, approval)?.at).filter(Boolean),
  );
  // What is not a step goes after the last step made before it.
  const extras = [
    ...alone.map((approval) => ({
      at: approval.created_at,
      key: approval.id,
      item: <ApprovalEntry key={approval.id} approval={approval} chain={chain} decide={decide} />,
    })),
    ...chain.resumed
      .filter((at) => !explained.has(at))
      .map((at) => ({ at, key: `resumed-${at}`, item: <ResumedEntry key={`resumed-${at}`} at={at} /> })),
  ].sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
  const before = (entry) => {
    const taken = [];
    while (extras.length && Date.parse(extras[0].at) < Date.parse(entry.step.timestamp)) {
      taken.push(extras.shift().item);
    }
    return taken;
  };
  let last = 0;
  const items = entries.flatMap((entry) => {
    const number = entry.step.step_number;
    const gap = number > last + 1 ? [<Gap key={`gap-${number}`} from={last + 1} to={number - 1} />] : [];
    last = Math.max(last, number, entry.result?.step_number ?? 0);
    return [
      ...before(entry),
      ...gap,
      <Entry
        key={entry.step.id}
        {...entry}
        chain={chain}
        family={family}
        running={running}
        approvals={byStep.get(entry.step.id) ?? []}
        decide={decide}
      />,
    ];
  });
  return (
    <ol class="timeline" aria-label={label}>
      {items}
      {extras.map((extra) => extra.item)}
    </ol>
  );
}

function Entry({ step, result, chain, family, running, approvals, decide }) {
  if (step.thinking) return <Thinking step={step} />;
  if (step.synthesis) return <Synthesis step={step} />;
  if (step.tool_call) {
    return (
      <ToolCall
        step={step}
        result={result}
        live={chain.live[step.id]}
        progress={chain.progress[step.id]}
        running={running}
        approvals={approvals}
        chain={chain}
        family={family}
        decide={decide}
      />
    );
  }
  if (step.tool_result) {
    return (
      <li class="step-orphan">
        <Result step={step} llm={Boolean(step.tool_result.model)} />
      </li>
    );
  }
  // No payload: the reader may see this step as its summary only.
  return <SummaryStep step={step} />;
}
