// Exports: the account's exports with their state, downloads of the ready ones, and a new export
// of a segment's profiles.
import { useState } from 'preact/hooks';
import { api } from '../lib/api.js';
import { html } from '../lib/html.js';
import { download, useEvery } from '../lib/marketing.js';
import { ErrorNote, Field, Loaded, Notice, Page, Table, useAction, useApi, useSection, when } from '../lib/ui.js';

const PENDING = ['queued', 'in_progress'];

function Download({ item }) {
  const get = useAction(async () => {
    if (item.kind !== 'email-events')
      return download(item.poll_path, `${item.kind}-${item.export_id}.${item.result ? 'json' : 'csv'}`);
    // An email event export's file is at a URL of its status, which carries its own credential.
    const url = new URL((await api('GET', item.poll_path)).result.file_download_url);
    return download(url.pathname + url.search, `email-events-${item.export_id}.csv.gz`, { bearer: false });
  });
  if (item.status !== 'ready') return null;
  return html`<button type="button" disabled=${get.busy} onClick=${() => get.run()}>
      Download<span class="visually-hidden">${` the ${item.kind} export of ${item.created_at}`}</span>
    </button>
    <${ErrorNote} error=${get.error} />`;
}

function NewExport({ done }) {
  const { section, picker } = useSection();
  const segments = useApi('/audience/segments');
  const [segment, setSegment] = useState('');
  const start = useAction(async () => {
    const chosen = segment || segments.data.items[0].discriminator;
    const created = await api('POST', '/audience/profiles/reports/segments', {
      section_discriminator: section,
      segment: { timezone: 'UTC', segment_discriminator: chosen },
    });
    done();
    return created;
  });
  return html`<section aria-labelledby="new-export">
    <h2 id="new-export">Export a segment's profiles</h2>
    <div class="row">
      ${picker}
      <${Loaded} state=${segments}>
        ${(data) =>
          html`<${Field}
            label="Segment"
            as="select"
            value=${segment}
            onChange=${(e) => setSegment(e.currentTarget.value)}
          >
            ${data.items.map((s) => html`<option value=${s.discriminator}>${s.name}</option>`)}
          <//>`}
      <//>
      <button
        type="button"
        class="primary"
        disabled=${start.busy || !section || !segments.data?.items.length}
        onClick=${() => start.run()}
      >
        Start the export
      </button>
    </div>
    <${ErrorNote} error=${start.error} />
    <${Notice}>${start.done ? 'The export is queued.' : null}<//>
  </section>`;
}

export default function Exports() {
  const list = useApi('/audience/profiles/reports');
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
            { label: 'Kind', value: (i) => i.kind },
            { label: 'State', value: (i) => html`<span data-testid="export-status">${i.status}</span>` },
            { label: 'Result', value: (i) => (i.result ? JSON.stringify(i.result) : (i.message ?? '')) },
            { label: 'Expires', value: (i) => when(i.expires_at) },
            { label: 'File', value: (i) => html`<${Download} item=${i} />` },
          ]}
        />`}
    <//>
    <${NewExport} done=${list.reload} />
  <//>`;
}
