// A task's chain for a page: read whole when the task has finished, else followed live
// from its first event to `done` (steps, the reply typing in, progress, approvals, the end).
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
    // The approvals of its tool calls, decided or not (the stream tells those of a run still
    // going as they come; this also gives a finished chain's). Only an addition to the
    // chain: a reader the API does not show them to sees the chain without them.
    api(`/api/v1/tasks/${id}/approvals`)
      .then((data) => active && dispatch(["approvals", data.items]))
      .catch(() => {});
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

  // An approval decided on the page: shown at once, before the stream tells it.
  const noteApproval = (approval) => dispatch(["approvals", [approval]]);
  return { chain, error, noteApproval };
}
