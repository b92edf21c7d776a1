// Erasure of a task or a conversation (DELETE, `task:delete`): asked for in place, then the
// content is gone for good and the page goes back to its list.
import { api } from "./api.js";
import { ErrorNote } from "./components.jsx";
import { useAction } from "./hooks.js";
import { navigate } from "./router.jsx";
import { useSession } from "./session.js";
import { ConfirmButton } from "./settings/common.jsx";

const WHAT = {
  task: {
    path: (id) => `/api/v1/tasks/${id}`,
    back: "/tasks",
    question: "Delete this task for good, with its chain and events? A running task is cancelled first.",
  },
  conversation: {
    path: (id) => `/api/v1/conversations/${id}`,
    back: "/conversations",
    question: "Delete this conversation for good, with every turn? A running turn is cancelled first.",
  },
};

export function EraseButton({ kind, id }) {
  const { can } = useSession();
  const what = WHAT[kind];
  const [erase, state] = useAction(() => api(what.path(id), { method: "DELETE" }));
  if (!can("task:delete")) return null;
  return (
    <>
      <ConfirmButton
        label={`Delete ${kind}`}
        question={what.question}
        confirmLabel="Delete for good"
        busy={state.busy}
        onConfirm={async () => {
          if ((await erase()) !== undefined) navigate(what.back);
        }}
      />
      {state.error && <ErrorNote error={state.error} />}
    </>
  );
}
