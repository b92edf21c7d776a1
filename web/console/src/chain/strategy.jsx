// A strategy's records in a chain: the thinking steps that name an `event` (see the docs'
// Strategies page). A `tot` or `mcts` search is drawn as its tree: each node (`thought`) under
// its parent, with its score (`thought_scored`, the best when a search scored it more than
// once), the nodes of the path the answer follows (`path_chosen`) marked. The tree is built
// from the steps the reader may see: a node shown only as a summary carries no event, and is
// not drawn.

export const EVENT_LABELS = {
  complexity_assessed: "Complexity",
  strategy_selected: "Strategy",
  strategy_fallback: "Fallback",
  thought: "Thought",
  thought_scored: "Score",
  path_chosen: "Chosen path",
  plan_created: "Plan",
  plan_step_started: "Step started",
  plan_step_completed: "Step done",
  plan_step_failed: "Step failed",
  plan_revised: "Plan revised",
  plan_completed: "Plan done",
};

function recordsOf(steps, event) {
  return steps.filter((step) => step.thinking?.event === event);
}

// The search tree of a chain's steps: its roots, each { step, score, chosen, children }, and
// whether it has any node.
export function searchTree(steps) {
  const thoughts = recordsOf(steps, "thought");
  if (thoughts.length === 0) return [];
  const scores = new Map();
  for (const scored of recordsOf(steps, "thought_scored")) {
    const score = scored.thinking.confidence;
    const before = scores.get(scored.parent_step_id);
    if (score !== null && score !== undefined && (before === undefined || score > before)) {
      scores.set(scored.parent_step_id, score);
    }
  }
  const chosenPaths = recordsOf(steps, "path_chosen");
  const chosen = new Set(chosenPaths.length ? chosenPaths[chosenPaths.length - 1].thinking.detail?.path ?? [] : []);
  const nodes = new Map(
    thoughts.map((step) => [
      step.id,
      { step, score: scores.get(step.id), chosen: chosen.has(step.id), children: [] },
    ]),
  );
  const roots = [];
  for (const node of nodes.values()) {
    const parent = nodes.get(node.step.parent_step_id);
    (parent ? parent.children : roots).push(node);
  }
  return roots;
}

function TreeNode({ node }) {
  const { step, score, chosen, children } = node;
  return (
    <li
      class={`tree-node${chosen ? " chosen" : ""}`}
      data-tree-node={step.step_number}
      data-chosen={chosen ? "true" : "false"}
    >
      <div class="tree-label">
        <span class="mono muted">#{step.step_number}</span>
        <span class="tree-thought">{step.thinking.thought}</span>
        {score !== undefined && (
          <span class={`badge${chosen ? " good" : ""}`} data-score={score}>
            {score.toFixed(2)}
          </span>
        )}
      </div>
      {children.length > 0 && (
        <ul class="tree">
          {children.map((child) => (
            <TreeNode key={child.step.id} node={child} />
          ))}
        </ul>
      )}
    </li>
  );
}

export function SearchTree({ roots }) {
  return (
    <ul class="tree tree-root" aria-label="Search tree">
      {roots.map((node) => (
        <TreeNode key={node.step.id} node={node} />
      ))}
    </ul>
  );
}

// The strategy the run chose, and its fallbacks, as one line each.
export function strategyNotes(steps) {
  return steps
    .filter((step) => ["strategy_selected", "strategy_fallback"].includes(step.thinking?.event))
    .map((step) => ({ id: step.id, event: step.thinking.event, text: step.thinking.thought }));
}

// A plan as its records say: its steps (the first plan's, then each revision's steps still to
// do), each with its state — `waiting`, `running`, `done`, `failed` (a failed step tried again
// is `running`; one a revision replaced stays `failed`) — and its level: the longest chain of
// dependencies before it, so that a level's steps may run in one wave.
//
// A wave's steps are judged once the whole wave is back, but each step's call follows the
// wave's `plan_step_started` records in the same order: a step whose call has its result is
// `returned` until its judgement comes.
export function planGraph(steps) {
  const records = steps.filter((step) => step.thinking?.event?.startsWith("plan_"));
  if (!records.some((step) => step.thinking.event === "plan_created")) return null;
  const nodes = new Map();
  let revisions = 0;
  let started = []; // the ids of the wave whose calls come next
  const calls = new Map(); // a wave's call's correlation id → its step's id
  for (const record of steps) {
    if (!record.thinking?.event?.startsWith("plan_")) {
      const call = record.tool_call;
      if (call && !record.parent_step_id && started.length) {
        calls.set(call.correlation_id, started.shift());
      }
      const result = record.tool_result;
      const id = result && calls.get(result.correlation_id);
      if (id && nodes.get(id)?.state === "running") nodes.get(id).state = "returned";
      continue;
    }
    const { event, detail } = record.thinking;
    if (event === "plan_step_started") started.push(detail?.step);
    else started = [];
    if (event === "plan_created" || event === "plan_revised") {
      if (event === "plan_revised") revisions += 1;
      for (const step of detail?.steps ?? []) {
        nodes.set(step.id, { ...step, state: "waiting", attempts: 0, revision: revisions });
      }
    } else if (detail?.step && nodes.has(detail.step)) {
      const node = nodes.get(detail.step);
      if (event === "plan_step_started") {
        node.state = "running";
        node.attempts = detail.attempt;
      } else if (event === "plan_step_completed") {
        node.state = "done";
      } else if (event === "plan_step_failed") {
        node.state = "failed";
        node.error = detail.error;
      }
    }
  }
  const level = (id, seen = new Set()) => {
    const node = nodes.get(id);
    if (!node || seen.has(id)) return 0;
    seen.add(id);
    const deps = node.depends_on ?? [];
    return deps.length ? 1 + Math.max(...deps.map((dep) => level(dep, seen))) : 0;
  };
  const levels = [];
  for (const node of nodes.values()) {
    const at = level(node.id);
    (levels[at] ??= []).push(node);
  }
  const ended = records.some((step) => step.thinking.event === "plan_completed");
  return { levels: levels.filter(Boolean), revisions, ended };
}

export function PlanGraph({ graph }) {
  return (
    <div class="plan-graph" aria-label="Plan">
      {graph.levels.map((nodes, index) => (
        <div class="plan-level" key={index} data-plan-level={index}>
          <span class="plan-level-label muted small">wave {index + 1}</span>
          {nodes.map((node) => (
            <div
              key={node.id}
              class={`plan-step state-${node.state}`}
              data-plan-step={node.id}
              data-state={node.state}
              title={node.error ?? node.expected_output ?? ""}
            >
              <div class="plan-step-head">
                <span class="mono">{node.id}</span>
                <span class="badge">{node.state}</span>
              </div>
              <div class="plan-step-text">{node.description}</div>
              <div class="muted small">
                {node.type ?? "reasoning"}
                {node.tool ? ` · ${node.tool}` : ""}
                {node.depends_on?.length ? ` · after ${node.depends_on.join(", ")}` : ""}
                {node.attempts > 1 ? ` · attempt ${node.attempts}` : ""}
              </div>
            </div>
          ))}
        </div>
      ))}
    </div>
  );
}
