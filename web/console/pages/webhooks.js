// The account's webhook subscriptions (docs/webhooks.md) and, for the one chosen, its recent
// deliveries: status, attempts, the last attempt's answer and latency, and Replay.
import { useState } from 'preact/hooks';
import { api } from '../lib/api.js';
import { html } from '../lib/html.js';
import { useEvery } from '../lib/marketing.js';
import { ErrorNote, Field, Loaded, Notice, Page, plural, Table, useAction, useApi, when } from '../lib/ui.js';

const STATES = { active: 'active', paused: 'paused after failures', disabled: 'turned off' };
const STATUSES = { pending: 'waiting to be sent', delivered: 'delivered', failed: 'failed, retries over' };

/** The last attempt as words: the answer's status (or why there was none) and how long it took. */
function lastAttempt(d) {
  const a = d.last_attempt;
  if (!a) return 'not tried yet';
  const answer = a.status ? `answered ${a.status}` : a.error ? `no answer: ${a.error}` : 'no answer';
  return `${answer}, in ${a.latency_ms.toLocaleString('en')} ms`;
}

function Deliveries({ endpoint }) {
  const list = useApi('/webhooks/{webhook_id}/deliveries', {
    params: { webhook_id: endpoint.id },
    query: { limit: 25 },
  });
  // While a delivery waits (one just replayed among them), the list is read again every second.
  useEvery(
    1000,
    list.data?.items.some((d) => d.status === 'pending'),
    list.reload,
  );
  const replay = useAction(async (d) => {
    await api('POST', '/webhooks/{webhook_id}/deliveries/{event_id}/replay', {
      params: { webhook_id: endpoint.id, event_id: d.event_id },
    });
    list.reload();
    return d;
  });
  return html`<${ErrorNote} error=${replay.error} />
    <${Notice}>${replay.done ? `The ${replay.done.event_type} event is sent again.` : null}<//>
    <${Loaded} state=${list}>
      ${(data) =>
        html`<${Table}
          caption=${`The last deliveries to ${endpoint.url}, newest first`}
          rows=${data.items}
          rowKey=${(d) => d.event_id}
          empty="Nothing was sent to it yet."
          columns=${[
            { label: 'Event', value: (d) => d.event_type },
            { label: 'Written', value: (d) => when(d.created_at) },
            { label: 'Status', value: (d) => STATUSES[d.status] ?? d.status },
            { label: 'Attempts', value: (d) => String(d.attempts) },
            { label: 'Last attempt', value: (d) => lastAttempt(d) },
            {
              label: 'Replay',
              value: (d) =>
                html`<button
                  type="button"
                  disabled=${replay.busy || d.status === 'pending'}
                  aria-label=${`Replay the ${d.event_type} event of ${new Date(d.created_at).toLocaleString()}`}
                  onClick=${() => replay.run(d)}
                >
                  Replay
                </button>`,
            },
          ]}
        />`}
    <//>`;
}

export default function Webhooks() {
  const endpoints = useApi('/webhooks');
  const [chosen, setChosen] = useState(undefined);
  if (endpoints.error?.status === 403)
    return html`<${Page} title="Webhooks">
      <p class="muted">Webhook events carry profiles of every section: only a key of every section sees them.</p>
    <//>`;
  return html`<${Page} title="Webhooks">
    <${Loaded} state=${endpoints}>
      ${(data) => {
        const endpoint = data.items.find((e) => e.id === chosen) ?? data.items[0];
        return html`<${Table}
            caption="The account's webhook subscriptions"
            rows=${data.items}
            rowKey=${(e) => e.id}
            empty="No webhook is subscribed. An API key of every section adds one with POST /webhooks."
            columns=${[
              { label: 'Address', value: (e) => html`<span class="mono">${e.url}</span>` },
              { label: 'Description', value: (e) => e.description || '—' },
              { label: 'Events', value: (e) => e.event_types.join(', ') },
              { label: 'State', value: (e) => (e.enabled ? (STATES[e.state] ?? e.state) : 'turned off') },
              {
                label: 'Failures in a row',
                value: (e) => (e.consecutive_failures ? plural(e.consecutive_failures, 'failure') : 'none'),
              },
            ]}
          />
          ${
            endpoint
              ? html`<h2>Deliveries</h2>
                  <${Field}
                    label="Webhook"
                    as="select"
                    value=${endpoint.id}
                    onChange=${(e) => setChosen(e.currentTarget.value)}
                  >
                    ${data.items.map((e) => html`<option value=${e.id}>${e.description || e.url}</option>`)}
                  <//>
                  <${Deliveries} key=${endpoint.id} endpoint=${endpoint} />`
              : null
          }`;
      }}
    <//>
  <//>`;
}
