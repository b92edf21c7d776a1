// Console routes are paths under <root>/console/: pushState navigation, and links that stay
// in the page. `useRoute()` gives the current path (without the prefix) and query.
import { useEffect, useState } from "preact/hooks";
import { ROOT } from "./api.js";

export const BASE = `${ROOT}/console`;
const listeners = new Set();

function current() {
  const path = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : "/";
  return { path: path.replace(/\/+$/, "") || "/", query: new URLSearchParams(location.search) };
}

export function href(path, query) {
  const search = query ? `?${new URLSearchParams(query)}` : "";
  return `${BASE}${path}${search}`;
}

export function navigate(path, { query, replace = false } = {}) {
  const target = href(path, query);
  if (replace) history.replaceState(null, "", target);
  else history.pushState(null, "", target);
  for (const listener of listeners) listener(current());
}

addEventListener("popstate", () => {
  for (const listener of listeners) listener(current());
});

export function useRoute() {
  const [route, setRoute] = useState(current);
  useEffect(() => {
    listeners.add(setRoute);
    return () => listeners.delete(setRoute);
  }, []);
  return route;
}

// <a href> inside the console navigates without reloading (modifier keys keep the browser's).
export function Link({ to, query, children, ...props }) {
  const onClick = (event) => {
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) {
      return;
    }
    event.preventDefault();
    navigate(to, { query });
  };
  return (
    <a href={href(to, query)} onClick={onClick} {...props}>
      {children}
    </a>
  );
}
