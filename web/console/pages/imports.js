// Imports: the section's imports with their state and progress (rows read of the file's rows),
// each one's report of failed rows, and a new import from a CSV file.
import { useState } from 'preact/hooks';
import { api, ApiError, foreignAnswer, parseJson, request } from '../lib/api.js';
import { html } from '../lib/html.js';
import { useEvery } from '../lib/marketing.js';
import { ErrorNote, Field, Loaded, Notice, Page, Table, useAction, useApi, useSectionApi, when } from '../lib/ui.js';

const PENDING = ['waiting_for_file', 'queued', 'in_progress'];

/** A CSV's lines split into fields (comma or semicolon separated, quotes as RFC 4180), the first `max` rows. */
export function csvRows(text, max) {
  const first = text.replace(/^\ufeff/, '').split(/\r?\n/)[0];
  const delimiter = (first.match(/;/g)?.length ?? 0) > (first.match(/,/g)?.length ?? 0) ? ';' : ',';
  const rows = [];
  let row = [];
  let field = '';
  let quoted = false;
  const body = text.replace(/^\ufeff/, '');
  for (let i = 0; i < body.length && rows.length < max; i++) {
    const c = body[i];
    if (quoted) {
      if (c === '"' && body[i + 1] === '"') ((field += '"'), i++);
      else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === delimiter) (row.push(field), (field = ''));
    else if (c === '\n' || c === '\r') {
      if (c === '\r' && body[i + 1] === '\n') i++;
      (row.push(field), (field = ''));
      if (row.some((f) => f !== '')) rows.push(row);
      row = [];
    } else field += c;
  }
  if (rows.length < max && (field !== '' || row.length > 0)) rows.push([...row, field]);
  return rows.map((r) => r.map((f) => f.trim()));
}

/** A name as compared with a column's: lower case, without spaces, dashes, underscores or dots. */
export function nameKey(name) {
  return name.toLowerCase().replace(/[^\p{L}\p{N}]/gu, '');
}

/**
 * The attribute a column means: the one whose name (its label) or discriminator (or its last part)
 * is the column's name, case and separators aside ("loyalty_points" is "Loyalty points").
 */
export function attributeFor(column, attributes) {
  const key = nameKey(column);
  return attributes.find(
    (a) =>
      nameKey(a.name) === key || nameKey(a.discriminator) === key || nameKey(a.discriminator.split('.').pop()) === key,
  );
}

/** The files uploaded in this tab, by their name, size and first bytes: when each was uploaded. */
const uploaded = new Map();

function Progress({ item }) {
  if (item.rows_total === null) return html`<span class="muted">no file yet</span>`;
  const done = item.status === 'completed' ? item.rows_total : Math.min(item.profiles_found, item.rows_total);
  return html`<progress max=${Math.max(item.rows_total, 1)} value=${done} aria-label="Rows read"></progress>
    <span> ${`${done} of ${item.rows_total}`}</span>`;
}

function Report({ section, importId }) {
  const report = useApi('/audience/sections/{section_discriminator}/imports/{import_id}', {
    params: { section_discriminator: section, import_id: importId },
  });
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
  const attributes = useApi('/audience/sections/{section_discriminator}/attributes', {
    params: { section_discriminator: section },
  });
  const [file, setFile] = useState(undefined);
  const [rows, setRows] = useState([]);
  const [fileId, setFileId] = useState('');
  const [mapping, setMapping] = useState({});
  const [key, setKey] = useState({ keyspace: '', column: '' });
  const [round, setRound] = useState(0);
  const columns = rows[0] ?? [];
  const again = file && uploaded.get(fileId);
  const start = useAction(async () => {
    const attribute_mappings = Object.entries(mapping)
      .filter(([column, version]) => version && column !== key.column)
      .map(([field_selector, attribute_version_id]) => ({ field_selector, attribute_version_id }));
    const created = await api('POST', '/v2/audience/sections/{section_discriminator}/imports', {
      params: { section_discriminator: section },
      body: {
        keyspace_mapping: {
          keyspace_discriminator: key.keyspace || keyspaces.data.items[0].discriminator,
          field_selector: key.column || columns[0],
        },
        attribute_mappings,
      },
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
    uploaded.set(fileId, new Date());
    // The form starts again, empty: the same file is not one click from a second import.
    setFile(undefined);
    setRows([]);
    setMapping({});
    setRound((r) => r + 1);
    done();
    return file.name;
  });
  const choose = async (e) => {
    const chosen = e.currentTarget.files[0];
    setFile(chosen);
    const head = chosen ? await chosen.slice(0, 256 * 1024).text() : '';
    const read = csvRows(head, 6);
    setRows(read);
    setFileId(chosen ? `${chosen.name}|${chosen.size}|${head}` : '');
    const header = read[0] ?? [];
    // The key column: one named as a keyspace (email, mobile …), else the first.
    const keyspace = (keyspaces.data?.items ?? []).find((k) => header.some((c) => nameKey(c) === nameKey(k.name)));
    const keyColumn = keyspace ? header.find((c) => nameKey(c) === nameKey(keyspace.name)) : header[0];
    setKey({ keyspace: keyspace?.discriminator ?? '', column: keyColumn ?? '' });
    // Each other column to the latest version of the attribute it means.
    const items = attributes.data?.items ?? [];
    setMapping(Object.fromEntries(header.map((c) => [c, attributeFor(c, items)?.versions.at(-1)?.id ?? ''])));
  };
  const nameOf = (versionId) => {
    for (const a of attributes.data?.items ?? []) if (a.versions.some((v) => v.id === versionId)) return a.name;
    return undefined;
  };
  return html`<section aria-labelledby="new-import">
    <h2 id="new-import">New import</h2>
    <${Field} key=${round} label="CSV file" type="file" accept=".csv,text/csv" onChange=${choose} />
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
                          ${data.items.flatMap((a) => {
                            const latest = a.versions.at(-1);
                            // Older versions only where chosen: the latest is what an import writes.
                            const older = a.versions.find((v) => v.id === mapping[c] && v !== latest);
                            return [
                              html`<option value=${latest.id}>${a.name}</option>`,
                              older
                                ? html`<option value=${older.id}>
                                    ${`${a.name} (older version ${a.versions.indexOf(older) + 1})`}
                                  </option>`
                                : null,
                            ];
                          })}
                        <//>`,
                    )}
                </fieldset>`}
            <//>
            <${Table}
              caption="The first rows, as they will be imported"
              rows=${rows.slice(1)}
              columns=${columns.map((c, i) => ({
                label:
                  c === key.column ? `${c} (key)` : mapping[c] ? `${c} → ${nameOf(mapping[c])}` : `${c} (not imported)`,
                value: (r) => r[i] ?? '',
              }))}
              empty="The file has no row under its header."
            />
            ${
              again
                ? html`<div class="note" role="status">
                    <strong>This file was uploaded already</strong>
                    <span
                      >${`The same file (name, size and date) was imported at ${again.toLocaleTimeString()}. Starting the import imports it again.`}</span
                    >
                  </div>`
                : null
            }
            <div class="actions">
              <button type="button" class="primary" disabled=${start.busy} onClick=${() => start.run()}>
                ${again ? 'Import it again' : 'Start the import'}
              </button>
            </div>`
        : null
    }
    <${ErrorNote} error=${start.error} />
    <${Notice}>${start.done ? `${start.done} is uploaded: the import is queued, and listed above.` : null}<//>
  </section>`;
}

export default function Imports() {
  const { section, picker, state: list } = useSectionApi('/audience/sections/{section_discriminator}/imports');
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
