// Who is signed in. The credential lives in this module's memory only: never in localStorage,
// sessionStorage or a cookie, so a reload or a closed tab signs out, and no other page of the
// origin can send it. A session ends after IDLE_MS without a request, at the latest after
// MAX_MS (or when an account's access token expires), and with "Sign out".

import { ApiError, foreignAnswer, parseJson, request } from './api.js';

export const IDLE_MS = 30 * 60 * 1000;
export const MAX_MS = 8 * 60 * 60 * 1000;

let current = null;
let lastUsed = 0;
let timer;
const listeners = new Set();

/**
 * The session: { kind: 'operator' | 'account', token, label (the account's name), keyName, clientId,
 * accountId, sections, expiresAt }, or null.
 */
export function session() {
  return current;
}

/** Calls `listener(session, reason)` on every sign-in and sign-out; returns the unsubscribe. */
export function onSessionChange(listener) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

function change(next, reason) {
  current = next;
  clearInterval(timer);
  if (next) {
    lastUsed = Date.now();
    timer = setInterval(() => {
      const now = Date.now();
      if (now > current.expiresAt || now - lastUsed > IDLE_MS) signOut('Your session expired: sign in again.');
    }, 10_000);
  }
  for (const listener of listeners) listener(next, reason);
}

/** Marks the session used (every request does). */
export function touch() {
  lastUsed = Date.now();
}

/** Why a sign-in was refused, as a sentence: the service's problem, or what answered instead. */
async function refusal(res, refused) {
  if (res.status === 401) return new Error(refused);
  const problem = parseJson(res, await res.text());
  if (!problem) return foreignAnswer(res);
  return new ApiError(res.status, problem);
}

/** Signs in with the operator token, checked by listing the accounts. */
export async function signInOperator(token) {
  const res = await request('/admin/accounts', {
    headers: { authorization: `Bearer ${token}` },
    credentials: 'omit',
    cache: 'no-store',
  });
  if (!res.ok) throw await refusal(res, 'The operator token was refused.');
  change({ kind: 'operator', token, label: 'Operator', accountId: null, expiresAt: Date.now() + MAX_MS });
}

/** The claims of a JWT, read (not verified: the service verifies it on every request). */
function claimsOf(token) {
  const payload = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
  return JSON.parse(atob(payload));
}

/** Signs in as an account with an API key's client id and secret, through the OAuth token route. */
export async function signInAccount(clientId, clientSecret) {
  const res = await request('/oauth/token', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret }),
    credentials: 'omit',
    cache: 'no-store',
  });
  if (!res.ok) throw await refusal(res, 'The client id or secret was refused.');
  const { access_token, expires_in } = await res.json();
  const claims = claimsOf(access_token);
  // The account's name and the key's, for the header.
  const who = await request('/audience/account', {
    headers: { authorization: `Bearer ${access_token}` },
    credentials: 'omit',
    cache: 'no-store',
  });
  if (!who.ok) throw await refusal(who, 'The access token was refused.');
  const account = await who.json();
  change({
    kind: 'account',
    token: access_token,
    label: account.name,
    keyName: account.key.name,
    clientId,
    accountId: claims.account,
    expiresAt: Math.min(Date.now() + expires_in * 1000, Date.now() + MAX_MS),
  });
}

/** Ends the session; `reason` is shown on the sign-in page. */
export function signOut(reason = 'You signed out.') {
  if (current) change(null, reason);
}
