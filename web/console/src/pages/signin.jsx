import { useState } from "preact/hooks";
import { signInWith, startProviderSignIn } from "../auth.js";
import { ErrorNote, Field } from "../components.jsx";

export function SignIn({ config, problem, onSignedIn }) {
  const [credential, setCredential] = useState("");
  const [error, setError] = useState(problem);
  const [busy, setBusy] = useState(false);

  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      onSignedIn(await signInWith(credential.trim()));
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };

  return (
    <main class="signin">
      <form class="card signin-card" onSubmit={submit}>
        <div class="brand brand-large">
          <span class="brand-mark">◆</span> OmniForge
        </div>
        <h1>Sign in to the console</h1>
        <Field
          label="API key or token"
          hint="An API key (omf_…) or a bearer token of your identity provider. It is kept in this tab only."
        >
          <input
            name="credential"
            type="password"
            autocomplete="off"
            value={credential}
            onInput={(event) => setCredential(event.currentTarget.value)}
            placeholder="omf_…"
            required
          />
        </Field>
        <ErrorNote error={error} />
        <button class="primary" type="submit" disabled={busy || !credential.trim()}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
        {config?.oidc && (
          <>
            <div class="or">or</div>
            <button type="button" class="secondary" onClick={() => startProviderSignIn(config.oidc)}>
              Sign in with your identity provider
            </button>
          </>
        )}
      </form>
    </main>
  );
}
