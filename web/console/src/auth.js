// Signing in: an API key (omf_…) or a token pasted in, checked against /api/v1/me; or the
// identity provider by authorization code with PKCE (RFC 7636) when the service names one.
import { api, setCredential } from "./api.js";
import { BASE } from "./router.jsx";

const PKCE = "omniforge.pkce";

export async function signInWith(credential) {
  const me = await api("/api/v1/me", { token: credential });
  setCredential(credential);
  return me;
}

function base64url(bytes) {
  let text = "";
  for (const byte of new Uint8Array(bytes)) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function randomText(size) {
  return base64url(crypto.getRandomValues(new Uint8Array(size)));
}

function redirectUri() {
  return `${location.origin}${BASE}/`;
}

// Leaves for the identity provider; it comes back to /console/?code=…&state=….
export async function startProviderSignIn(oidc) {
  const verifier = randomText(48);
  const state = randomText(16);
  const challenge = base64url(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier))
  );
  sessionStorage.setItem(PKCE, JSON.stringify({ verifier, state }));
  const target = new URL(oidc.authorization_url);
  target.search = new URLSearchParams({
    response_type: "code",
    client_id: oidc.client_id,
    redirect_uri: redirectUri(),
    scope: oidc.scope,
    state,
    code_challenge: challenge,
    code_challenge_method: "S256",
  });
  location.assign(target);
}

// On the way back: the code for a token, at the provider's token endpoint. null when this
// page was not opened by the provider.
export async function finishProviderSignIn(oidc) {
  const params = new URLSearchParams(location.search);
  const code = params.get("code");
  const error = params.get("error");
  if (!code && !error) return null;
  const saved = JSON.parse(sessionStorage.getItem(PKCE) || "null");
  sessionStorage.removeItem(PKCE);
  history.replaceState(null, "", `${BASE}/`);
  if (error) throw new Error(`the identity provider refused: ${params.get("error_description") || error}`);
  if (!saved || saved.state !== params.get("state")) {
    throw new Error("the sign-in answer does not match the request made (state); sign in again");
  }
  const response = await fetch(oidc.token_url, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code,
      redirect_uri: redirectUri(),
      client_id: oidc.client_id,
      code_verifier: saved.verifier,
    }),
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok || !body.access_token) {
    throw new Error(`the identity provider gave no token: ${body.error_description || body.error || response.status}`);
  }
  return signInWith(body.access_token);
}
