import { createContext } from "preact";
import { useContext } from "preact/hooks";

// Who is signed in (`me`: /api/v1/me), the console's config, and `can(permission)`.
export const Session = createContext(null);

export function useSession() {
  return useContext(Session);
}
