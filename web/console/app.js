// The console: sign-in, the layout (menu, who is signed in, sign-out) and the router, which
// opens the page of the address's fragment (#/accounts/…) with its parameters.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { html } from './lib/html.js';
import { onSessionChange, session, signOut } from './lib/session.js';
import { homeOf, PAGES } from './pages/index.js';
import SignIn from './pages/signin.js';

/** The page an address names, with its path parameters and query, or undefined. */
export function match(hash) {
  const [pathPart, queryPart = ''] = hash.replace(/^#/, '').split('?');
  const segments = pathPart.split('/').filter(Boolean);
  for (const page of PAGES) {
    const pattern = page.path.split('/').filter(Boolean);
    if (pattern.length !== segments.length) continue;
    const params = {};
    if (
      pattern.every((p, i) => {
        if (p.startsWith(':')) return ((params[p.slice(1)] = decodeURIComponent(segments[i])), true);
        return p === segments[i];
      })
    )
      return { page, params, query: Object.fromEntries(new URLSearchParams(queryPart)) };
  }
  return undefined;
}

function useHash() {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const changed = () => setHash(location.hash);
    addEventListener('hashchange', changed);
    return () => removeEventListener('hashchange', changed);
  }, []);
  return hash;
}

function Menu({ current, kind }) {
  const groups = [];
  for (const page of PAGES.filter((p) => p.group && p.who === kind)) {
    let group = groups.find((g) => g.name === page.group);
    if (!group) groups.push((group = { name: page.group, pages: [] }));
    group.pages.push(page);
  }
  return html`<nav class="menu" aria-label="Console">
    ${groups.map(
      (g) =>
        html`<div class="menu-group">
          <h2>${g.name}</h2>
          <ul>
            ${g.pages.map(
              (p) =>
                html`<li>
                  <a href=${`#${p.path}`} aria-current=${current?.page === p ? 'page' : undefined}>${p.title}</a>
                </li>`,
            )}
          </ul>
        </div>`,
    )}
  </nav>`;
}

/** The opened page's module, loaded once. */
const loaded = new Map();
function PageView({ route }) {
  const [module, setModule] = useState(() => loaded.get(route.page));
  const [failed, setFailed] = useState(false);
  const [attempt, setAttempt] = useState(0);
  useEffect(() => {
    if (loaded.has(route.page)) return setModule(loaded.get(route.page));
    setModule(undefined);
    setFailed(false);
    route.page.load().then(
      (m) => {
        loaded.set(route.page, m);
        setModule(m);
      },
      () => setFailed(true),
    );
  }, [route.page, attempt]);
  // A module that could not be fetched (the service stopped or restarting): asked again on a click,
  // without reloading the tab, which would end the session.
  if (failed)
    return html`<section class="page">
      <div class="note error" role="alert">
        <strong>This page could not be loaded</strong>
        <span>The service did not send it: it may be stopped or restarting. You are still signed in.</span>
        <button type="button" class="retry" onClick=${() => setAttempt((a) => a + 1)}>Load the page again</button>
      </div>
    </section>`;
  if (!module || loaded.get(route.page) !== module) return html`<p class="muted" role="status">Loading…</p>`;
  const Component = module.default;
  return html`<${Component} params=${route.params} query=${route.query} session=${session()} />`;
}

function Console() {
  const [current, setCurrent] = useState(session());
  const [reason, setReason] = useState(undefined);
  const hash = useHash();
  useEffect(
    () =>
      onSessionChange((next, why) => {
        setCurrent(next);
        setReason(why);
        if (next) location.hash = `#${homeOf(next.kind)}`;
      }),
    [],
  );
  if (!current) return html`<${SignIn} reason=${reason} />`;
  const route = match(hash);
  const allowed = route && route.page.who === current.kind;
  return html`<a class="skip" href="#main" onClick=${skipToMain}>Skip to content</a>
    <header class="top">
      <a class="brand" href=${`#${homeOf(current.kind)}`}>audience console</a>
      <span
        class="who"
        data-testid="who"
        title=${current.clientId ? `Account ${current.accountId}, API key ${current.clientId}` : undefined}
        >${current.label}${current.keyName ? ` · key ${current.keyName}` : ''}</span
      >
      <button type="button" onClick=${() => signOut()}>Sign out</button>
    </header>
    <div class="frame">
      <${Menu} current=${route} kind=${current.kind} />
      <main id="main">
        ${
          allowed
            ? html`<${PageView} key=${hash} route=${route} />`
            : html`<section class="page">
                <h1>Not found</h1>
                <p>
                  This console has no such page for this session.
                  <a href=${`#${homeOf(current.kind)}`}>Go to the start</a>.
                </p>
              </section>`
        }
      </main>
    </div>`;
}

/** The skip link moves focus to the page, not the address (the fragment is the router's). */
function skipToMain(event) {
  event.preventDefault();
  /** @type {HTMLElement | null} */ (document.querySelector('main h1'))?.focus();
}

const root = document.getElementById('console');
root.textContent = '';
render(html`<${Console} />`, root);
