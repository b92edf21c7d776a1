// A task's chain for a page: read whole when the task has finished, else followed live
// from its first event to `done` (steps, the reply typing in, progress, the end).
import { useLayoutEffect, useReducer, useRef, useState } from "preact/hooks";
import { api, follow } from "../api.js";
import { chainReducer, initialChain, isFinished } from "./model.js";

// `task`: {id, status, ...} (a task or a conversation turn's task); `onDone(final_state)` once
// a followed stream ends.
export function useTaskChain(task, { enabled = true, onDone } = {}) {
  const [chain, dispatch] = useReducer(chainReducer, null, () => initialChain(null));
  const [error, setError] = useState(null);
  const done = useRef(onDone);
  done.current = onDone;
  const id = task?.id ?? null;

  // A layout effect: the chain's request starts with the render, not a frame after it.
  useLayoutEffect(() => {
    if (!id || !enabled) return undefined;
    dispatch(["reset", task]);
    setError(null);
    let active = true;
    if (isFinished(task.status)) {
      api(`/api/v1/tasks/${id}/chain`)
        .then((data) => active && dispatch(["loaded", data]))
        .catch((failure) => active && setError(failure));
      return () => {
        active = false;
      };
    }
    dispatch(["following", true]);
    const stop = follow(
      id,
      (type, data) => {
        if (!active) return;
        dispatch([type, data]);
        if (type === "done") done.current?.(data.final_state);
      },
      {
        onError: (failure) => {
          if (!active) return;
          setError(failure);
          dispatch(["following", false]);
        },
      },
    );
    return () => {
      active = false;
      stop();
    };
  }, [id, enabled]);

  return { chain, error };
}
