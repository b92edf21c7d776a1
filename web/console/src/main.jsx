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
      // Who is signed in is asked beside the config, not after it (unless the identity
      // provider just sent the person back, when the config says how to finish).
      const returning = new URLSearchParams(location.search).has("code");
      const who = hasCredential() && !returning ? api("/api/v1/me") : null;
      who?.catch(() => {});
      const loaded = await api("/console/config.json", { token: "" }).catch(() => ({ oidc: null }));
      setConfig(loaded);
      try {
        if (loaded.oidc && returning) {
          const signedIn = await finishProviderSignIn(loaded.oidc);
          if (signedIn) setMe(signedIn);
        } else if (who) {
          setMe(await who);
        }
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
