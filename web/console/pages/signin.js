// Sign in as the operator (the operator token) or as an account (an API key's client id and secret).
import { useEffect, useRef, useState } from 'preact/hooks';
import { html } from '../lib/html.js';
import { signInAccount, signInOperator } from '../lib/session.js';
import { Field, formValues } from '../lib/ui.js';

export default function SignIn({ reason }) {
  const [error, setError] = useState(undefined);
  const [busy, setBusy] = useState(false);
  const heading = useRef(null);
  useEffect(() => {
    document.title = 'Sign in · audience console';
    heading.current?.focus();
  }, []);
  const attempt = (signIn) => async (event) => {
    const values = formValues(event);
    setBusy(true);
    setError(undefined);
    try {
      await signIn(values);
    } catch (e) {
      setError(e);
      setBusy(false);
    }
  };
  return html`<main id="main" class="signin">
    <h1 tabindex="-1" ref=${heading}>Sign in to the audience console</h1>
    ${reason && !error ? html`<p class="note" role="status">${reason}</p>` : null}
    ${
      error
        ? html`<div class="note error" role="alert">
            ${error.status !== undefined ? html`<strong>${error.problem?.title}</strong>` : null}
            <span>${error.message}</span>
          </div>`
        : null
    }
    <div class="signin-forms">
      <form aria-labelledby="as-account" onSubmit=${attempt((v) => signInAccount(v.client_id.trim(), v.client_secret))}>
        <h2 id="as-account">As an account</h2>
        <p class="muted">
          With an API key: what its sections allow is what the console shows. The demo account's key is in
          <code>demo-credentials.json</code> of the service's data folder (<code>DATA_DIR</code>, <code>./data</code> by
          default); the operator creates others (<code>bin/audience key create</code>).
        </p>
        <${Field} label="Client id" name="client_id" required autocomplete="username" spellcheck="false" />
        <${Field} label="Client secret" name="client_secret" type="password" required autocomplete="current-password" />
        <button class="primary" disabled=${busy}>Sign in with the key</button>
      </form>
      <form aria-labelledby="as-operator" onSubmit=${attempt((v) => signInOperator(v.token.trim()))}>
        <h2 id="as-operator">As the operator</h2>
        <p class="muted">
          With the operator token of this service: <code>ADMIN_TOKEN</code> when it is set, else the file
          <code>admin-token</code> of its data folder (<code>./data/admin-token</code> by default).
        </p>
        <${Field} label="Operator token" name="token" type="password" required autocomplete="current-password" />
        <button class="primary" disabled=${busy}>Sign in as operator</button>
      </form>
    </div>
    <p class="muted small">
      The credential is kept in this tab's memory only: reloading or closing the tab signs out, and the session ends
      after 30 minutes without use.
    </p>
  </main>`;
}
