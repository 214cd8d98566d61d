// Exports: the account's exports with their state, downloads of the ready ones, and a new export
// of a segment's profiles.
import { useState } from 'preact/hooks';
import { api, ApiError, send } from '../lib/api.js';
import { html } from '../lib/html.js';
import { download, useConsentCount, useEvery } from '../lib/marketing.js';
import {
  ErrorNote,
  Field,
  Loaded,
  Notice,
  Page,
  plural,
  Table,
  useAction,
  useApi,
  useSection,
  when,
} from '../lib/ui.js';

const PENDING = ['queued', 'in_progress'];

function Download({ item }) {
  const get = useAction(async () => {
    if (item.kind !== 'email-events')
      return download(item.poll_path, `${item.kind}-${item.export_id}.${item.result ? 'json' : 'csv'}`);
    // An email event export's file is at a URL of its status, which carries its own credential.
    const url = new URL((await send('GET', item.poll_path)).result.file_download_url);
    return download(url.pathname + url.search, `email-events-${item.export_id}.csv.gz`, { bearer: false });
  });
  if (item.status !== 'ready') return null;
  return html`<button type="button" disabled=${get.busy} onClick=${() => get.run()}>
      Download<span class="visually-hidden">${` the ${item.kind} export of ${item.created_at}`}</span>
    </button>
    <${ErrorNote} error=${get.error} />`;
}

/** Checkboxes of a list: the chosen values of `value(item)`, labelled `label(item)`. */
function Choices({ legend, items, value, label, chosen, onChange, empty }) {
  return html`<fieldset class="choices">
    <legend>${legend}</legend>
    ${items.length === 0 ? html`<p class="muted">${empty}</p>` : null}
    ${items.map(
      (item) =>
        html`<label class="choice">
          <input
            type="checkbox"
            checked=${chosen.includes(value(item))}
            onChange=${(e) =>
              onChange(e.currentTarget.checked ? [...chosen, value(item)] : chosen.filter((v) => v !== value(item)))}
          />
          ${label(item)}
        </label>`,
    )}
  </fieldset>`;
}

/**
 * Before an export by consent: the segment's profiles, and how many of them may be contacted about
 * the chosen topics on each chosen channel (the interface's count by consent, at most two channels).
 */
function ConsentCount({ section, segment, topics, channels }) {
  const shown = channels.slice(0, 2);
  const count = useConsentCount({
    section_discriminator: section,
    topic_discriminators: topics,
    channels: shown.map((c) => ({ field_name: c.name, channel_discriminator: c.discriminator })),
    segments: { timezone: 'UTC', segment_discriminators: { [segment.name]: segment.discriminator } },
  });
  if (count.error) return html`<${ErrorNote} error=${count.error} retry=${count.reload} />`;
  if (!count.result) return html`<p class="muted" role="status">Counting the profiles that may be contacted…</p>`;
  const r = count.result;
  const by = shown.map((c) => `${(r[c.name] ?? 0).toLocaleString('en')} by ${c.name}`).join(', ');
  return html`<p role="status" data-testid="consent-count">
    ${`Of the segment's ${plural(r.total_profile_count, 'profile')}, these may be contacted about the chosen topics: ${by}.`}
  </p>`;
}

/**
 * The columns and consent filter of a new export, in one section: attributes (their latest
 * version) and tags as columns; topics and channels make it an export by consent, of the
 * segment's profiles that may be contacted about one of the topics, a column of addresses per
 * channel (the interface's consent export); without topics, the profile in segment export.
 */
function ExportForm({ section, segments, done }) {
  const of = { params: { section_discriminator: section } };
  const attributes = useApi('/audience/sections/{section_discriminator}/attributes', of);
  const tags = useApi('/audience/sections/{section_discriminator}/tags', of);
  const topics = useApi('/v2/audience/sections/{section_discriminator}/topics', of);
  const channels = useApi('/audience/channels');
  const [segment, setSegment] = useState(segments[0]?.discriminator ?? '');
  const [chosen, setChosen] = useState({ attributes: [], tags: [], topics: [], channels: [] });
  const choose = (kind) => (values) => setChosen({ ...chosen, [kind]: values });
  const start = useAction(async () => {
    const picked = segments.find((s) => s.discriminator === segment);
    const columns = {
      attributes: attributes.data.items
        .filter((a) => chosen.attributes.includes(a.discriminator))
        .map((a) => ({ field_name: a.name, attribute_version_id: a.versions.at(-1).id })),
      tags: tags.data.items
        .filter((t) => chosen.tags.includes(t.discriminator))
        .map((t) => ({ field_name: t.name, tag_discriminator: t.discriminator })),
    };
    if (chosen.topics.length > 0) {
      if (chosen.channels.length === 0)
        throw new ApiError(400, {
          title: 'Choose a channel',
          detail: 'An export by consent needs the channel of the addresses.',
        });
      await api('POST', '/audience/profiles/reports/consents', {
        body: {
          section_discriminator: section,
          topic_discriminators: chosen.topics,
          channels: channels.data.items
            .filter((c) => chosen.channels.includes(c.discriminator))
            .map((c) => ({ field_name: c.name, channel_discriminator: c.discriminator })),
          segments: { timezone: 'UTC', segment_discriminators: { [picked.name]: picked.discriminator } },
          exclude_unsubscribed_profiles: true,
          ...columns,
        },
      });
    } else
      await api('POST', '/audience/profiles/reports/segments', {
        body: {
          section_discriminator: section,
          segment: { timezone: 'UTC', segment_discriminator: segment },
          ...columns,
        },
      });
    done();
    return true;
  });
  const loaded = [attributes, tags, topics, channels].every((s) => s.data);
  return html`<${Field}
      label="Segment"
      as="select"
      value=${segment}
      onChange=${(e) => setSegment(e.currentTarget.value)}
    >
      ${segments.map((s) => html`<option value=${s.discriminator}>${s.name}</option>`)}
    <//>
    ${[attributes, tags, topics, channels].map((s) => (s.error ? html`<${ErrorNote} error=${s.error} retry=${s.reload} />` : null))}
    ${
      loaded
        ? html`<div class="choice-groups">
            <${Choices}
              legend="Attribute columns"
              items=${attributes.data.items}
              value=${(a) => a.discriminator}
              label=${(a) => a.name}
              chosen=${chosen.attributes}
              onChange=${choose('attributes')}
              empty="The section has no attribute."
            />
            <${Choices}
              legend="Tag columns"
              items=${tags.data.items}
              value=${(t) => t.discriminator}
              label=${(t) => t.name}
              chosen=${chosen.tags}
              onChange=${choose('tags')}
              empty="The section has no tag."
            />
            <${Choices}
              legend="Only profiles that may be contacted about"
              items=${topics.data.items}
              value=${(t) => t.discriminator}
              label=${(t) => t.name}
              chosen=${chosen.topics}
              onChange=${choose('topics')}
              empty="The section has no topic."
            />
            <${Choices}
              legend="Address columns, by channel"
              items=${channels.data.items}
              value=${(c) => c.discriminator}
              label=${(c) => c.name}
              chosen=${chosen.channels}
              onChange=${choose('channels')}
              empty="The account has no channel."
            />
          </div>`
        : html`<p class="muted" role="status">Loading…</p>`
    }
    ${
      loaded && segment && chosen.topics.length > 0 && chosen.channels.length > 0
        ? html`<${ConsentCount}
            section=${section}
            segment=${segments.find((s) => s.discriminator === segment)}
            topics=${chosen.topics}
            channels=${channels.data.items.filter((c) => chosen.channels.includes(c.discriminator))}
          />`
        : null
    }
    <p class="muted">
      Every file has the column exportKey, each profile's export key. Addresses by channel come with a topic: the file
      then holds the segment's profiles that consented to one of the topics on one of the channels and are not
      suppressed.
    </p>
    <div class="actions">
      <button type="button" class="primary" disabled=${start.busy || !loaded || !segment} onClick=${() => start.run()}>
        Start the export
      </button>
    </div>
    <${ErrorNote} error=${start.error} />
    <${Notice}
      >${start.done ? 'The export is queued: it is listed above, and can be downloaded there once ready.' : null}<//
    >`;
}

function NewExport({ done }) {
  const { section, picker } = useSection();
  const segments = useApi('/audience/segments');
  return html`<section aria-labelledby="new-export">
    <h2 id="new-export">Export a segment's profiles</h2>
    ${picker}
    <${Loaded} state=${segments}>
      ${(data) =>
        section ? html`<${ExportForm} key=${section} section=${section} segments=${data.items} done=${done} />` : null}
    <//>
  </section>`;
}

const KINDS = {
  segments: 'Profiles of a segment',
  consents: 'Profiles that may be contacted',
  'consents-count': 'Count of profiles that may be contacted',
  duplicates: 'Profiles sharing a value',
  events: 'Events of profiles',
  'email-events': 'Email events',
  single: 'One profile',
};

/** The segments an export's request names, by name. */
function segmentsOf(request, segments) {
  const name = (d) => segments.find((s) => s.discriminator === d)?.name ?? d;
  if (request.segment)
    return request.segment.segment_discriminator ? name(request.segment.segment_discriminator) : 'a query';
  if (request.segments)
    return Object.keys(request.segments.segment_discriminators ?? request.segments.segment_definitions ?? {}).join(
      ', ',
    );
  if (request.segment_filter) return name(request.segment_filter.discriminator);
  return '—';
}

/** The columns an export's request asks for, by their names in the file. */
function columnsOf(request) {
  const names = [
    ...(request.channels ?? []).map((c) => c.field_name),
    ...(request.attributes ?? []).map((a) => a.field_name ?? a.attribute_version_id),
    ...(request.tags ?? []).map((t) => t.field_name ?? t.tag_discriminator),
  ];
  return names.length > 0 ? names.join(', ') : '—';
}

export default function Exports() {
  const list = useApi('/audience/profiles/reports');
  const sections = useApi('/audience/sections');
  const segments = useApi('/audience/segments');
  const sectionName = (d) => (d ? (sections.data?.items.find((s) => s.discriminator === d)?.name ?? d) : '—');
  useEvery(1000, !!list.data?.items.some((i) => PENDING.includes(i.status)), list.reload);
  return html`<${Page} title="Exports">
    <${Loaded} state=${list}>
      ${(data) =>
        html`<${Table}
          caption="Exports of the account, newest first"
          rows=${data.items}
          rowKey=${(i) => i.export_id}
          empty="No export yet."
          columns=${[
            { label: 'Created', value: (i) => when(i.created_at) },
            { label: 'What', value: (i) => KINDS[i.kind] ?? i.kind },
            { label: 'Segment', value: (i) => segmentsOf(i.request, segments.data?.items ?? []) },
            { label: 'Section', value: (i) => sectionName(i.request.section_discriminator) },
            { label: 'Columns', value: (i) => columnsOf(i.request) },
            { label: 'State', value: (i) => html`<span data-testid="export-status">${i.status}</span>` },
            {
              label: 'Rows',
              value: (i) =>
                html`<span data-testid="export-rows">${i.rows === null ? '—' : i.rows.toLocaleString('en')}</span>`,
            },
            {
              label: 'Requested by',
              value: (i) =>
                html`<span data-testid="export-requester"
                  >${i.requested_by ? i.requested_by.name || `key ${i.requested_by.client_id}` : '—'}</span
                >`,
            },
            {
              label: 'Result',
              value: (i) =>
                i.result
                  ? Object.entries(i.result)
                      .map(([k, v]) => `${k.replace(/_/g, ' ')}: ${v.toLocaleString('en')}`)
                      .join(', ')
                  : (i.message ?? ''),
            },
            { label: 'Expires', value: (i) => when(i.expires_at) },
            { label: 'File', value: (i) => html`<${Download} item=${i} />` },
          ]}
        />`}
    <//>
    <${NewExport} done=${list.reload} />
  <//>`;
}
