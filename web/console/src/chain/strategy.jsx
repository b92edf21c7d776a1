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
