import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import "./console.css";
import { api, hasCredential, setCredential, whenSignedOut } from "./api.js";
import { finishProviderSignIn } from "./auth.js";
import { App } from "./app.jsx";
import { SignIn } from "./pages/signin.jsx";
import { Session } from "./session.js";

function Console() {
  const [config, setConfig] = useState(null);
  const [me, setMe] = useState(null);
  const [problem, setProblem] = useState(null);
  const [ready, setReady] = useState(false);

  useEffect(() => {
    whenSignedOut((error) => {
      setMe(null);
      setProblem(error);
    });
    (async () => {
      const loaded = await api("/console/config.json", { token: "" }).catch(() => ({ oidc: null }));
      setConfig(loaded);
      try {
        if (loaded.oidc) {
          const signedIn = await finishProviderSignIn(loaded.oidc);
          if (signedIn) setMe(signedIn);
        }
        if (hasCredential()) setMe(await api("/api/v1/me"));
      } catch (error) {
        setProblem(error);
      } finally {
        setReady(true);
      }
    })();
  }, []);

  if (!ready) return <p class="boot">Loading the console…</p>;
  if (!me) {
    return (
      <SignIn
        config={config}
        problem={problem}
        onSignedIn={(who) => {
          setProblem(null);
          setMe(who);
        }}
      />
    );
  }
  const permissions = new Set(me.permissions);
  const session = {
    me,
    config,
    can: (permission) => permissions.has(permission),
    signOut: () => {
      setCredential(null);
      setMe(null);
    },
  };
  return (
    <Session.Provider value={session}>
      <App />
    </Session.Provider>
  );
}

render(<Console />, document.getElementById("app"));
