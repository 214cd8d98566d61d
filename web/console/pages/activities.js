// Activities: a section's activities by kind; one's events over time as a chart (sent, delivered,
// opens, clicks, bounces …), its newest events or one message's; the email event export.
import { useState } from 'preact/hooks';
import { api } from '../lib/api.js';
import { html } from '../lib/html.js';
import { Chart } from '../lib/marketing.js';
import {
  ErrorNote,
  Field,
  formValues,
  Link,
  Loaded,
  Notice,
  Page,
  Table,
  useAction,
  useApi,
  useSectionApi,
  when,
} from '../lib/ui.js';

const KINDS = [
  ['emails', 'Email'],
  ['sms', 'SMS'],
  ['forms-and-pages', 'Forms and pages'],
  ['website', 'Website'],
  ['marketing-automation', 'Marketing automation'],
];
const CHARTED = ['emails', 'sms', 'forms-and-pages'];

/** The statistics shown, in funnel order: the count, its words, and its rate (of what comes before). */
const RATES = [
  ['sent', 'Sent'],
  ['delivered', 'Delivered', 'delivery_rate'],
  ['unique_opens', 'Opened', 'open_rate'],
  ['unique_clicks', 'Clicked', 'click_rate'],
  ['clicks', 'Clicks', 'click_rate'],
  ['bounces', 'Bounced', 'bounce_rate'],
  ['unsubscribes', 'Unsubscribed', 'unsubscribe_rate'],
  ['spam_complaints', 'Complained', 'spam_complaint_rate'],
];

const percent = (rate) => `${(rate * 100).toLocaleString('en', { maximumFractionDigits: 1 })} %`;

/** @param {{ kind: 'emails' | 'sms' | 'forms-and-pages', section: string, id: string }} props */
function Activity({ kind, section, id }) {
  const [unit, setUnit] = useState(/** @type {'day' | 'hour'} */ ('day'));
  const [message, setMessage] = useState('');
  const params = { section_discriminator: section, activity_id: id };
  const timeline = useApi(`/${kind}/sections/{section_discriminator}/activities/{activity_id}/timeline`, {
    params,
    query: { unit, points: unit === 'day' ? 30 : 48 },
  });
  const events = useApi(`/${kind}/sections/{section_discriminator}/activities/{activity_id}/events`, {
    params,
    query: { limit: 50, correlation_id: message || undefined },
  });
  const activity = useApi(`/${kind}/sections/{section_discriminator}/activities/{activity_id}`, {
    params,
    query: kind === 'forms-and-pages' ? {} : { include_statistics: true },
  });
  const stats = activity.data && 'statistics' in activity.data ? activity.data.statistics : undefined;
  return html`<section aria-labelledby="activity">
    <h2 id="activity">${activity.data?.name ?? `Activity ${id}`}</h2>
    ${
      stats
        ? html`<dl class="figures" aria-label="Statistics">
            ${RATES.filter(([count]) => stats[count] !== undefined).map(
              ([count, label, rate]) =>
                html`<div>
                  <dt>${label}</dt>
                  <dd data-testid=${`stat-${count}`}>${stats[count].toLocaleString('en')}</dd>
                  ${rate && stats[rate] !== undefined ? html`<dd class="rate">${percent(stats[rate])}</dd>` : null}
                </div>`,
            )}
          </dl>`
        : null
    }
    <${Field} label="Each point" as="select" value=${unit} onChange=${(e) => setUnit(e.currentTarget.value)}>
      <option value="day">a day (30 days)</option>
      <option value="hour">an hour (48 hours)</option>
    <//>
    <${Loaded} state=${timeline}>
      ${(data) => {
        const types = Object.keys(data.points[0]?.events ?? {});
        return html`<${Chart}
          title="Events"
          unit="events"
          times=${data.points.map((p) => p.at)}
          series=${types.map((t) => ({ label: t, values: data.points.map((p) => p.events[t]) }))}
        />`;
      }}
    <//>
    <form class="row" onSubmit=${(e) => setMessage(formValues(e).message.trim())}>
      <${Field} label="A message's events: its correlation id" name="message" />
      <button type="submit">Show</button>
    </form>
    <${Loaded} state=${events}>
      ${(data) =>
        html`<${Table}
          caption=${message ? `Events of message ${message}` : 'Newest events'}
          rows=${data.items}
          empty="No event."
          columns=${[
            { label: 'Time', value: (e) => when(e.event_time) },
            { label: 'Type', value: (e) => e.type },
            { label: 'Message', value: (e) => e.correlation_id },
            {
              label: 'Details',
              value: (e) =>
                [e.device, e.location, e.link_url, e.bounce_code, e.unsubscribe_topic]
                  .filter((x) => x !== undefined)
                  .join(' · '),
            },
          ]}
        />`}
    <//>
  </section>`;
}

function EmailEventExport() {
  const [days, setDays] = useState('30');
  const start = useAction(() =>
    api('POST', '/emails/reports', {
      body: { start_at: new Date(Date.now() - Number(days) * 86_400_000).toISOString() },
    }),
  );
  return html`<section aria-labelledby="email-events">
    <h2 id="email-events">Email event export</h2>
    <p>
      The events of every email activity in a window, as a CSV file: follow it on the${' '}
      <${Link} to="/exports">exports<//> page.
    </p>
    <div class="row">
      <${Field}
        label="Days back"
        type="number"
        min="1"
        max="90"
        value=${days}
        onInput=${(e) => setDays(e.currentTarget.value)}
      />
      <button type="button" disabled=${start.busy} onClick=${() => start.run()}>Request the export</button>
    </div>
    <${ErrorNote} error=${start.error} />
    <${Notice}>${start.done ? `Requested: report ${start.done.report_id}.` : null}<//>
  </section>`;
}

export default function Activities({ query }) {
  const [kind, setKind] = useState(
    /** @type {'emails' | 'sms' | 'forms-and-pages' | 'website' | 'marketing-automation'} */ (query.kind ?? 'emails'),
  );
  const { section, picker, state: list } = useSectionApi(`/${kind}/sections/{section_discriminator}/activities`);
  const [chosen, setChosen] = useState(undefined);
  return html`<${Page} title="Activities">
    <div class="row">
      ${picker}
      <${Field}
        label="Kind"
        as="select"
        value=${kind}
        onChange=${(e) => {
          setKind(e.currentTarget.value);
          setChosen(undefined);
        }}
      >
        ${KINDS.map(([k, label]) => html`<option value=${k}>${label}</option>`)}
      <//>
    </div>
    <${Loaded} state=${list}>
      ${(data) =>
        html`<${Table}
          caption="Activities, newest first"
          rows=${data.items}
          rowKey=${(a) => a.id}
          empty="No activity of this kind."
          columns=${[
            {
              label: 'Name',
              value: (a) =>
                CHARTED.includes(kind)
                  ? html`<button type="button" class="link" onClick=${() => setChosen(a.id)}>${a.name}</button>`
                  : a.name,
            },
            { label: 'Id', value: (a) => a.id },
            { label: 'Status', value: (a) => a.status },
            { label: 'Created', value: (a) => when(a.created_at) },
          ]}
        />`}
    <//>
    ${chosen && section ? html`<${Activity} key=${`${kind}/${chosen}`} kind=${kind} section=${section} id=${chosen} />` : null}
    ${kind === 'emails' ? html`<${EmailEventExport} />` : null}
  <//>`;
}
