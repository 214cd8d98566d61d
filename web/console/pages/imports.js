// Imports: the section's imports with their state and progress (rows read of the file's rows),
// each one's report of failed rows, and a new import from a CSV file.
import { useState } from 'preact/hooks';
import { api, ApiError, foreignAnswer, parseJson, path, request } from '../lib/api.js';
import { html } from '../lib/html.js';
import { useEvery } from '../lib/marketing.js';
import { ErrorNote, Field, Loaded, Notice, Page, Table, useAction, useApi, useSection, when } from '../lib/ui.js';

const PENDING = ['waiting_for_file', 'queued', 'in_progress'];

/** The columns of a CSV's header row (comma or semicolon separated, as the service reads it). */
async function headerOf(file) {
  const first = (await file.slice(0, 64 * 1024).text()).replace(/^\ufeff/, '').split(/\r?\n/)[0];
  const delimiter = (first.match(/;/g)?.length ?? 0) > (first.match(/,/g)?.length ?? 0) ? ';' : ',';
  return first.split(delimiter).map((c) => c.trim().replace(/^"(.*)"$/, '$1'));
}

function Progress({ item }) {
  if (item.rows_total === null) return html`<span class="muted">no file yet</span>`;
  const done = item.status === 'completed' ? item.rows_total : Math.min(item.profiles_found, item.rows_total);
  return html`<progress max=${Math.max(item.rows_total, 1)} value=${done} aria-label="Rows read"></progress>
    <span> ${`${done} of ${item.rows_total}`}</span>`;
}

function Report({ section, importId }) {
  const report = useApi(path`/audience/sections/${section}/imports/${importId}`);
  return html`<${Loaded} state=${report}>
    ${(data) =>
      html`<h3>Report</h3>
        <p>
          ${`${data.report.profiles_new} new, ${data.report.profiles_updated} updated, ${data.report.profiles_not_changed} not changed, ${data.report.profiles_failed} failed`}
        </p>
        <${Table}
          caption="Failed rows"
          rows=${data.report.failures}
          empty="No row failed."
          columns=${[
            { label: 'Line', value: (f) => String(f.line) },
            { label: 'Reason', value: (f) => f.reason },
          ]}
        />`}
  <//>`;
}

function NewImport({ section, done }) {
  const keyspaces = useApi('/audience/keyspaces');
  const attributes = useApi(path`/audience/sections/${section}/attributes`);
  const [file, setFile] = useState(undefined);
  const [columns, setColumns] = useState([]);
  const [mapping, setMapping] = useState({});
  const [key, setKey] = useState({ keyspace: '', column: '' });
  const start = useAction(async () => {
    const attribute_mappings = Object.entries(mapping)
      .filter(([column, version]) => version && column !== key.column)
      .map(([field_selector, attribute_version_id]) => ({ field_selector, attribute_version_id }));
    const created = await api('POST', path`/v2/audience/sections/${section}/imports`, {
      keyspace_mapping: {
        keyspace_discriminator: key.keyspace || keyspaces.data.items[0].discriminator,
        field_selector: key.column || columns[0],
      },
      attribute_mappings,
    });
    // The signed upload form takes the file without a token, at this service's own address.
    const form = new FormData();
    for (const [name, value] of Object.entries(created.file_upload_body)) form.append(name, value);
    form.append('file', file, file.name);
    const res = await request(new URL(created.file_upload_url).pathname, {
      method: 'POST',
      body: form,
      credentials: 'omit',
    });
    if (!res.ok) {
      const problem = parseJson(res, await res.text());
      throw problem ? new ApiError(res.status, problem) : foreignAnswer(res);
    }
    done();
    return created.import_id;
  });
  const choose = async (e) => {
    const chosen = e.currentTarget.files[0];
    setFile(chosen);
    const header = chosen ? await headerOf(chosen) : [];
    setColumns(header);
    setKey((k) => ({ ...k, column: header[0] ?? '' }));
    // Columns named as an attribute's name or discriminator are mapped to its latest version.
    const byName = new Map(
      (attributes.data?.items ?? []).flatMap((a) => [
        [a.name.toLowerCase(), a],
        [a.discriminator.split('.').pop(), a],
      ]),
    );
    setMapping(Object.fromEntries(header.map((c) => [c, byName.get(c.toLowerCase())?.versions.at(-1)?.id ?? ''])));
  };
  return html`<section aria-labelledby="new-import">
    <h2 id="new-import">New import</h2>
    <${Field} label="CSV file" type="file" accept=".csv,text/csv" onChange=${choose} />
    ${
      columns.length > 0
        ? html`<div class="row">
              <${Loaded} state=${keyspaces}>
                ${(data) =>
                  html`<${Field}
                    label="Keyspace of the key column"
                    as="select"
                    value=${key.keyspace || data.items[0]?.discriminator}
                    onChange=${(e) => setKey({ ...key, keyspace: e.currentTarget.value })}
                  >
                    ${data.items.map((k) => html`<option value=${k.discriminator}>${k.name}</option>`)}
                  <//>`}
              <//>
              <${Field}
                label="Key column"
                as="select"
                value=${key.column}
                onChange=${(e) => setKey({ ...key, column: e.currentTarget.value })}
              >
                ${columns.map((c) => html`<option value=${c}>${c}</option>`)}
              <//>
            </div>
            <${Loaded} state=${attributes}>
              ${(data) =>
                html`<fieldset>
                  <legend>Columns to attributes</legend>
                  ${columns
                    .filter((c) => c !== key.column)
                    .map(
                      (c) =>
                        html`<${Field}
                          label=${`Column ${c}`}
                          as="select"
                          value=${mapping[c] ?? ''}
                          onChange=${(e) => setMapping({ ...mapping, [c]: e.currentTarget.value })}
                        >
                          <option value="">not imported</option>
                          ${data.items.flatMap((a) =>
                            a.versions.map(
                              (v, i) => html`<option value=${v.id}>${`${a.name} (version ${i + 1})`}</option>`,
                            ),
                          )}
                        <//>`,
                    )}
                </fieldset>`}
            <//>
            <div class="actions">
              <button type="button" class="primary" disabled=${start.busy} onClick=${() => start.run()}>
                Start the import
              </button>
            </div>`
        : null
    }
    <${ErrorNote} error=${start.error} />
    <${Notice}>${start.done ? 'The file is uploaded: the import is queued.' : null}<//>
  </section>`;
}

export default function Imports() {
  const { section, picker } = useSection();
  const list = useApi(section ? path`/audience/sections/${section}/imports` : null);
  const [open, setOpen] = useState(undefined);
  useEvery(1000, !!list.data?.items.some((i) => PENDING.includes(i.status)), list.reload);
  return html`<${Page} title="Imports">
    ${picker}
    ${
      section
        ? html`<${Loaded} state=${list}>
              ${(data) =>
                html`<${Table}
                  caption="Imports of the section, newest first"
                  rows=${data.items}
                  rowKey=${(i) => i.import_id}
                  empty="No import yet."
                  columns=${[
                    { label: 'Created', value: (i) => when(i.created_at) },
                    { label: 'State', value: (i) => html`<span data-testid="import-status">${i.status}</span>` },
                    { label: 'Progress', value: (i) => html`<${Progress} item=${i} />` },
                    { label: 'Applied', value: (i) => String(i.profiles_processed) },
                    { label: 'Failed', value: (i) => String(i.profiles_failed) },
                    { label: 'Message', value: (i) => i.message ?? '' },
                    {
                      label: 'Report',
                      value: (i) =>
                        html`<button type="button" onClick=${() => setOpen(i.import_id)}>
                          Report<span class="visually-hidden">${` of the import of ${i.created_at}`}</span>
                        </button>`,
                    },
                  ]}
                />`}
            <//>
            ${open ? html`<${Report} key=${open} section=${section} importId=${open} />` : null}
            <${NewImport} key=${section} section=${section} done=${list.reload} />`
        : null
    }
  <//>`;
}
