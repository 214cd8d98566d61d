// The pieces every page is made of: a page with its heading, data loaded from the service, lists
// as tables, labelled fields, confirmations and notes. Every value is rendered as text.
import { useCallback, useEffect, useId, useRef, useState } from 'preact/hooks';
import { addressOf, send } from './api.js';
import { html } from './html.js';

/** A page: its heading (focused when the page opens, for keyboard and screen reader users) and content. */
export function Page({ title, actions, children }) {
  const heading = useRef(null);
  useEffect(() => {
    document.title = `${title} · audience console`;
    heading.current?.focus();
  }, [title]);
  return html`<section class="page">
    <header class="page-head">
      <h1 tabindex="-1" ref=${heading}>${title}</h1>
      ${actions ? html`<div class="actions">${actions}</div>` : null}
    </header>
    ${children}
  </section>`;
}

/**
 * Loads a route (GET) with its options when its address changes: { data, error, loading, reload }.
 * A null route loads nothing.
 * @type {import('./routes.d.ts').UseApi}
 */
export const useApi = (route, options) => {
  const address = route === null ? null : addressOf(route, options);
  const [state, setState] = useState({ data: undefined, error: undefined, loading: address !== null });
  const [round, setRound] = useState(0);
  useEffect(() => {
    if (address === null) return setState({ data: undefined, error: undefined, loading: false });
    let live = true;
    setState((s) => ({ ...s, error: undefined, loading: true }));
    send('GET', address).then(
      (data) => live && setState({ data, error: undefined, loading: false }),
      (error) => live && setState({ data: undefined, error, loading: false }),
    );
    return () => {
      live = false;
    };
  }, [address, round]);
  const reload = useCallback(() => setRound((r) => r + 1), []);
  return { ...state, address, reload };
};

/**
 * The sections the session may read and a picker of one: the chosen one, else `initial` (a page's
 * address may name one), else the first listed.
 */
export function useSection(initial) {
  const sections = useApi('/audience/sections');
  const [chosen, setChosen] = useState(undefined);
  const items = sections.data?.items ?? [];
  const section = chosen ?? (initial || items[0]?.discriminator);
  const picker = html`<${Loaded} state=${sections}>
    ${() =>
      html`<${Field} label="Section" as="select" value=${section} onChange=${(e) => setChosen(e.currentTarget.value)}>
        ${items.map((s) => html`<option value=${s.discriminator}>${s.name}</option>`)}
      <//>`}
  <//>`;
  return { section, picker };
}

/**
 * A section picker (useSection) and `route` of the chosen section, loaded as useApi loads it:
 * { section, picker, state }. The route's one parameter is {section_discriminator}; it is not read
 * before a section is chosen.
 * @type {import('./routes.d.ts').UseSectionApi}
 */
export const useSectionApi = (route) => {
  const { section, picker } = useSection();
  // Every SectionRoute takes these parameters; TypeScript does not resolve that for a generic route.
  const state = useApi(section ? route : null, /** @type {any} */ ({ params: { section_discriminator: section } }));
  return { section, picker, state };
};

/** Runs an action (a write): { run, busy, error, done }; `done` is the last result. */
export function useAction(action) {
  const [state, setState] = useState({ busy: false, error: undefined, done: undefined });
  const run = async (...args) => {
    setState({ busy: true, error: undefined, done: undefined });
    try {
      const done = await action(...args);
      setState({ busy: false, error: undefined, done: done ?? true });
      return done;
    } catch (error) {
      setState({ busy: false, error, done: undefined });
    }
  };
  return { ...state, run };
}

/**
 * A refusal, as the service explained it, or a plain sentence when the service did not answer;
 * `retry` (a function) adds "Try again" where asking again may succeed.
 */
export function ErrorNote({ error, retry }) {
  if (!error) return null;
  const problem = typeof error.problem === 'object' ? error.problem : undefined;
  const title = problem?.title || (error.status ? 'Refused' : 'Something went wrong');
  // A status the title already says is not repeated; no answer has none.
  const status = error.status && !title.includes(String(error.status)) ? ` (${error.status})` : '';
  return html`<div class="note error" role="alert">
    <strong>${title}${status}</strong>
    <span>${error.message}</span>
    ${
      retry && (error.transient ?? true)
        ? html`<button type="button" class="retry" onClick=${() => retry()}>Try again</button>`
        : null
    }
  </div>`;
}

/** A short confirmation of what was done. */
export function Notice({ children }) {
  return children ? html`<div class="note ok" role="status">${children}</div>` : null;
}

/** What a loaded page part shows while loading, on error, or with its data. */
export function Loaded({ state, children }) {
  if (state.error) return html`<${ErrorNote} error=${state.error} retry=${state.reload} />`;
  if (state.data === undefined) return html`<p class="muted" role="status">Loading…</p>`;
  return children(state.data);
}

/** A list as a table: columns of { label, value(row) } (text or markup), an empty text, a caption. */
export function Table({ caption, columns, rows, empty = 'None.', rowKey }) {
  if (!rows || rows.length === 0) return html`<p class="muted">${empty}</p>`;
  return html`<div class="table-wrap">
    <table>
      ${
        caption
          ? html`<caption>
              ${caption}
            </caption>`
          : null
      }
      <thead>
        <tr>
          ${columns.map((c) => html`<th scope="col">${c.label}</th>`)}
        </tr>
      </thead>
      <tbody>
        ${rows.map(
          (row, i) =>
            html`<tr key=${rowKey ? rowKey(row) : i}>
              ${columns.map((c) => html`<td data-label=${c.label}>${c.value(row)}</td>`)}
            </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
}

/** A labelled input; other props go to the input (or to a textarea or select given `as`). */
export function Field({ label, hint, as = 'input', children, ...props }) {
  const id = useId();
  const control =
    as === 'textarea'
      ? html`<textarea id=${id} aria-describedby=${hint ? `${id}-hint` : undefined} ...${props}></textarea>`
      : as === 'select'
        ? html`<select id=${id} aria-describedby=${hint ? `${id}-hint` : undefined} ...${props}>
            ${children}
          </select>`
        : html`<input id=${id} aria-describedby=${hint ? `${id}-hint` : undefined} ...${props} />`;
  return html`<div class="field">
    <label for=${id}>${label}</label>
    ${control} ${hint ? html`<small id=${`${id}-hint`} class="muted">${hint}</small>` : null}
  </div>`;
}

/** The values of a form's named fields. */
/** @returns {Record<string, any>} */
export function formValues(event) {
  event.preventDefault();
  return Object.fromEntries(new FormData(event.currentTarget).entries());
}

/**
 * A button that asks first, in a modal dialog naming what will happen; `onConfirm` runs on "Confirm".
 * `danger` marks destructive actions.
 */
export function ConfirmButton({ label, question, confirmLabel = label, onConfirm, danger = true, disabled }) {
  const dialog = useRef(null);
  const id = useId();
  const confirm = async () => {
    dialog.current.close();
    await onConfirm();
  };
  return html`<button
      type="button"
      class=${danger ? 'danger' : ''}
      disabled=${disabled}
      onClick=${() => dialog.current.showModal()}
    >
      ${label}
    </button>
    <dialog ref=${dialog} aria-labelledby=${id}>
      <p id=${id}>${question}</p>
      <div class="actions">
        <button type="button" onClick=${() => dialog.current.close()}>Cancel</button>
        <button type="button" class=${danger ? 'danger' : 'primary'} onClick=${confirm}>${confirmLabel}</button>
      </div>
    </dialog>`;
}

/** A date and time in the reader's locale (the service answers ISO 8601). */
export function when(iso) {
  if (!iso) return '—';
  const date = new Date(iso);
  return html`<time datetime=${iso}>${date.toLocaleString()}</time>`;
}

/** A link to a page of the console. */
export function Link({ to, children, ...props }) {
  return html`<a href=${`#${to}`} ...${props}>${children}</a>`;
}

/** A count and its noun, singular for one: plural(1, 'profile') is "1 profile", plural(3, 'match', 'matches'). */
export function plural(n, one, many = `${one}s`) {
  return `${n.toLocaleString('en')} ${n === 1 ? one : many}`;
}
