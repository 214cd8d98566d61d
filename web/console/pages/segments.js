// Segments: a builder of conditions by name, the AQL it writes in an editor with highlighting and
// the parser's errors where it puts them (AQL typed there is read back into the builder where it
// can be), the live count as one builds or types, the stored segment's 25-point trend as a chart,
// save as a new segment (by its name) or as a stored segment's new version, and a stored segment
// made live (its members kept up to date, their entries and exits sent to webhooks) or stopped.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { parseAql, writeAql } from '../lib/aql.js';
import { api } from '../lib/api.js';
import { html } from '../lib/html.js';
import { Chart, useEvery } from '../lib/marketing.js';
import {
  ConfirmButton,
  ErrorNote,
  Field,
  Loaded,
  Notice,
  Page,
  plural,
  useAction,
  useApi,
  useSection,
  when,
} from '../lib/ui.js';
import { Group, useDefinitions } from './segment-builder.js';

/** The builder's reading of a query: its tree, or why the builder cannot show it. */
function readQuery(text, defs) {
  try {
    const tree = parseAql(text);
    // Only terms of versions this session can read are shown by name.
    const unknown = (node) =>
      node.items
        ? node.items.some(unknown)
        : !defs.byVersion.has(`${node.kind === 'event' ? 'events' : 'attributes'}:${node.version}`);
    if (unknown(tree)) return { reason: 'it names an attribute or event this console does not know' };
    return { tree };
  } catch (error) {
    return { reason: error.message };
  }
}

const TOKENS = /"(?:[^"\\]|\\.)*"?|\d+(?:\.\d+)?|[A-Za-z_][A-Za-z0-9_]*|\s+|[\s\S]/g;

/** The kind of a token, for its colour. */
function kindOf(token) {
  if (token.startsWith('"')) return 'aql-string';
  if (/^\d/.test(token)) return 'aql-number';
  if (/^[A-Za-z_]/.test(token)) return 'aql-name';
  if (/^\s/.test(token)) return '';
  return 'aql-punct';
}

/** Where the parser put an error: the offset of the character an AQL problem names (its `offset`), from 0. */
export function errorOffset(error) {
  const offset = error?.problem?.offset;
  return Number.isInteger(offset) ? offset : undefined;
}

/** The query as highlighted markup (text only), the character at `at` marked as the error. */
function Highlighted({ text, at }) {
  const parts = [];
  let offset = 0;
  for (const token of text.match(TOKENS) ?? []) {
    const kind = kindOf(token);
    if (at !== undefined && at >= offset && at < offset + token.length) {
      const i = at - offset;
      parts.push(html`<span class=${kind}>${token.slice(0, i)}</span>`);
      parts.push(html`<mark class="aql-error">${token[i]}</mark>`);
      parts.push(html`<span class=${kind}>${token.slice(i + 1)}</span>`);
    } else parts.push(html`<span class=${kind}>${token}</span>`);
    offset += token.length;
  }
  if (at !== undefined && at >= text.length) parts.push(html`<mark class="aql-error"> </mark>`);
  return html`<pre class="aql-view" aria-hidden="true">${parts}${'\n'}</pre>`;
}

/** 25 sampling points, a day apart, the last now. */
function samplingPoints() {
  const now = Date.now();
  return Array.from({ length: 25 }, (_, i) => new Date(now - (24 - i) * 86_400_000).toISOString());
}

/**
 * Whether a stored segment is live, its size and since when; make it live (in the reader's time
 * zone, for its time windows) or stop. The size is computed by a job after the segment is made
 * live: asked again every second until it is there.
 */
function Live({ segment }) {
  const live = { params: { segment_discriminator: segment.discriminator } };
  const state = useApi('/audience/segments/{segment_discriminator}/live', live);
  const pending = state.data?.live && state.data.size === null;
  useEvery(1000, pending, state.reload);
  const start = useAction(async () => {
    await api('PUT', '/audience/segments/{segment_discriminator}/live', {
      ...live,
      body: { time_zone: Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC' },
    });
    state.reload();
  });
  const stop = useAction(async () => {
    await api('DELETE', '/audience/segments/{segment_discriminator}/live', live);
    state.reload();
  });
  return html`<h2>Live</h2>
    <${Loaded} state=${state}>
      ${(live) =>
        live.live
          ? html`<p data-testid="live-state">
                ${
                  live.size === null
                    ? 'Live: its members are being counted…'
                    : `Live: ${plural(live.size, 'profile')} now, kept up to date by every write.`
                }
                <span class="muted small">
                  ${' Live since '}${when(live.live_since)}${live.refreshed_at ? html`, brought up to date ${when(live.refreshed_at)}` : null}${`, time windows in ${live.time_zone}.`}
                </span>
              </p>
              <${ConfirmButton}
                label="Stop keeping it live"
                question=${`Stop keeping ${segment.name} live? Its members and their recorded entries and exits are forgotten; it is counted on demand again.`}
                disabled=${stop.busy}
                onConfirm=${() => stop.run()}
              />`
          : html`<p data-testid="live-state" class="muted">
                Not live: it is counted when asked. Live, its members are kept up to date by every write, and each entry
                and exit is sent to the webhooks that ask for them.
              </p>
              <button type="button" disabled=${start.busy} onClick=${() => start.run()}>Make it live</button>`}
    <//>
    <${ErrorNote} error=${start.error || stop.error} />`;
}

export default function Segments() {
  const { section, picker } = useSection();
  const segments = useApi('/audience/segments');
  const defs = useDefinitions();
  const [chosen, setChosen] = useState('');
  const [query, setQuery] = useState('');
  // The builder's tree: read from the query when it is typed or loaded, and written to it when built.
  const [built, setBuilt] = useState(
    /** @type {{ tree?: any, reason?: string }} */ ({ tree: { kind: 'all', items: [] } }),
  );
  const [count, setCount] = useState(/** @type {{ error?: any, value?: number, ms?: number, busy?: boolean }} */ ({}));
  const [trend, setTrend] = useState(undefined);
  const [round, setRound] = useState(0);
  const segment = segments.data?.items.find((s) => s.discriminator === chosen);

  // A query typed or loaded is read into the builder once the definitions are known.
  const [typed, setTyped] = useState(0);
  useEffect(() => {
    if (defs.data) setBuilt(readQuery(query, defs.data));
  }, [defs.data, typed]);
  // Choosing a segment puts its latest version in the editor.
  useEffect(() => {
    if (!segment) return;
    setQuery(segment.versions.at(-1)?.query ?? '');
    setTyped((t) => t + 1);
  }, [chosen, segments.data]);
  const build = (tree) => {
    setBuilt({ tree });
    setQuery(writeAql(tree));
  };

  // The live count, a moment after the last keystroke; counts are limited per second (429): one
  // refused is asked again a second later.
  useEffect(() => {
    if (!section || query.trim() === '') return setCount({});
    let live = true;
    let timer;
    const ask = () => {
      const started = performance.now();
      return api('POST', '/audience/profiles/reports/segments/count', {
        body: { section_discriminator: section, segment: { timezone: 'UTC', segment_definition: query } },
      }).then(
        (r) => live && setCount({ value: r.profile_count, ms: Math.round(performance.now() - started) }),
        (error) => {
          if (!live) return;
          if (error.status === 429) timer = setTimeout(ask, 1000);
          else setCount({ error });
        },
      );
    };
    setCount((c) => ({ ...c, busy: true }));
    timer = setTimeout(ask, 400);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [section, query]);

  // The stored segment's trend.
  useEffect(() => {
    if (!section || !segment) return setTrend(undefined);
    let live = true;
    const points = samplingPoints();
    api('POST', '/audience/sections/{section_discriminator}/segments/{segment_discriminator}/trend', {
      params: { section_discriminator: section, segment_discriminator: segment.discriminator },
      body: { sampling_points: points, timezone: 'UTC' },
    }).then(
      (r) =>
        live &&
        setTrend({
          times: points,
          series: [
            { label: 'Known', values: points.map((p) => r.matching_profile_count[p]?.known ?? 0) },
            { label: 'Unknown', values: points.map((p) => r.matching_profile_count[p]?.unknown ?? 0) },
          ],
        }),
      (error) => live && setTrend({ error }),
    );
    return () => {
      live = false;
    };
  }, [section, segment?.discriminator, round]);

  const save = useAction(async () => {
    const version = await api('POST', '/audience/segments/{segment_discriminator}/versions', {
      params: { segment_discriminator: chosen },
      body: { query },
    });
    segments.reload();
    setRound((r) => r + 1);
    return version;
  });
  const [name, setName] = useState('');
  const create = useAction(async () => {
    const created = await api('POST', '/audience/segments', { body: { name: name.trim(), query } });
    segments.reload();
    setChosen(created.discriminator);
    setName('');
    return created;
  });
  const at = useMemo(() => errorOffset(count.error), [count.error]);

  return html`<${Page} title="Segments">
    <div class="row">
      ${picker}
      <${Loaded} state=${segments}>
        ${(data) =>
          html`<${Field}
            label="Segment"
            as="select"
            value=${chosen}
            onChange=${(e) => setChosen(e.currentTarget.value)}
          >
            <option value="">A new query</option>
            ${data.items.map((s) => html`<option value=${s.discriminator}>${s.name}</option>`)}
          <//>`}
      <//>
    </div>
    <h2>Conditions</h2>
    <${Loaded} state=${defs}>
      ${(data) =>
        built.tree
          ? html`<${Group} node=${built.tree} defs=${data} section=${section} onChange=${build} />`
          : html`<div class="note" role="status">
              <strong>The builder cannot show this query</strong>
              <span
                >${`It is kept as written (${built.reason}). Edit it as AQL below, or start the conditions again.`}</span
              >
              <button type="button" class="retry" onClick=${() => build({ kind: 'all', items: [] })}>
                Start the conditions again
              </button>
            </div>`}
    <//>
    <div class="field">
      <label for="aql">AQL query</label>
      <div class="aql-editor">
        <${Highlighted} text=${query} at=${at} />
        <textarea
          id="aql"
          class="aql-input"
          spellcheck="false"
          autocomplete="off"
          aria-describedby="aql-result"
          aria-invalid=${count.error ? 'true' : 'false'}
          value=${query}
          onInput=${(e) => {
            setQuery(e.currentTarget.value);
            setTyped((t) => t + 1);
          }}
        ></textarea>
      </div>
    </div>
    <div id="aql-result" aria-live="polite">
      ${
        count.error
          ? html`<${ErrorNote} error=${count.error} />`
          : count.value !== undefined
            ? html`<p class="count">
                <strong data-testid="count">${count.value.toLocaleString('en')}</strong>
                ${count.value === 1 ? ' profile matches' : ' profiles match'}
                <span class="muted small" data-testid="count-time">
                  ${count.busy ? ' (counting…)' : ` · counted in ${count.ms} ms`}</span
                >
              </p>`
            : html`<p class="muted">
                ${count.busy ? 'Counting…' : 'Add a condition, or write a query, to count the profiles it matches.'}
              </p>`
      }
    </div>
    <form
      class="row"
      onSubmit=${(e) => {
        e.preventDefault();
        create.run();
      }}
    >
      <${Field} label="New segment's name" value=${name} onInput=${(e) => setName(e.currentTarget.value)} />
      <div class="actions">
        <button type="submit" disabled=${create.busy || !!count.error || !name.trim() || !query.trim()}>
          Save as a new segment
        </button>
      </div>
    </form>
    <${ErrorNote} error=${create.error} />
    <${Notice}>${create.done ? `Saved as the new segment ${create.done.name}.` : null}<//>
    ${
      segment
        ? html`<div class="actions">
              <button
                type="button"
                class="primary"
                disabled=${save.busy || !!count.error || query === segment.versions.at(-1)?.query}
                onClick=${() => save.run()}
              >
                Save as a new version
              </button>
            </div>
            <${ErrorNote} error=${save.error} />
            <${Notice}>${save.done ? `Saved as version ${segment.versions.length}.` : null}<//>
            <${Live} key=${segment.discriminator} segment=${segment} />
            <h2>Trend of ${segment.name}, the last 25 days</h2>
            ${
              trend?.error
                ? html`<${ErrorNote} error=${trend.error} />`
                : trend
                  ? html`<${Chart} title="Matching profiles" times=${trend.times} series=${trend.series} />`
                  : html`<p class="muted" role="status">Loading…</p>`
            }`
        : null
    }
  <//>`;
}
