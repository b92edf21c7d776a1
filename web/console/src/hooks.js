import { useCallback, useLayoutEffect, useRef, useState } from "preact/hooks";
import { api } from "./api.js";

// Loads `path` (with `query`) and again whenever they change; `reload()` on demand.
export function useApi(path, query) {
  const [state, setState] = useState({ data: null, error: null, loading: Boolean(path) });
  const key = path ? `${path}?${new URLSearchParams(query || {})}` : null;
  const generation = useRef(0);
  const load = useCallback(async () => {
    if (!path) return;
    const mine = ++generation.current;
    setState((old) => ({ ...old, loading: true }));
    try {
      const data = await api(path, { query });
      if (mine === generation.current) setState({ data, error: null, loading: false });
    } catch (error) {
      if (mine === generation.current) setState({ data: null, error, loading: false });
    }
  }, [key]);
  // Started as soon as the page is drawn in memory, not a frame later: a request waits for
  // nothing on screen.
  useLayoutEffect(() => {
    load();
  }, [load]);
  return { ...state, reload: load };
}

// Runs an action (a POST, a PATCH…), keeping its error and whether it is under way.
export function useAction(action) {
  const [state, setState] = useState({ busy: false, error: null });
  const run = async (...args) => {
    setState({ busy: true, error: null });
    try {
      const result = await action(...args);
      setState({ busy: false, error: null });
      return result;
    } catch (error) {
      setState({ busy: false, error });
      return undefined;
    }
  };
  return [run, state];
}

// A list the API pages with `next_cursor`: the first page, and more on demand.
export function usePaged(path, query) {
  const [state, setState] = useState({ items: [], next: null, error: null, loading: true });
  const key = `${path}?${new URLSearchParams(query || {})}`;
  const generation = useRef(0);
  const load = useCallback(
    async (cursor) => {
      const mine = ++generation.current;
      setState((old) => ({ ...old, loading: true }));
      try {
        const page = await api(path, { query: { ...query, cursor } });
        if (mine !== generation.current) return;
        setState((old) => ({
          items: cursor ? [...old.items, ...page.items] : page.items,
          next: page.next_cursor,
          error: null,
          loading: false,
        }));
      } catch (error) {
        if (mine === generation.current) setState((old) => ({ ...old, error, loading: false }));
      }
    },
    [key],
  );
  useLayoutEffect(() => {
    load(null);
  }, [load]);
  return { ...state, reload: () => load(null), more: () => load(state.next) };
}
