// Profiles: find one by any of its keys, in any keyspace; or browse a section's profiles, most
// recently updated first, a page at a time, searched by a key's beginning and by an attribute's value.
import { useEffect, useState } from 'preact/hooks';
import { html } from '../lib/html.js';
import { Field, formValues, Link, Loaded, Page, plural, Table, useApi, useSection, when } from '../lib/ui.js';
import { text } from './profile.js';

const PAGE_SIZE = 25;
/** At most this many attributes are shown as columns: those with a value on the page, in the section's order. */
const COLUMNS = 4;

/** The query of the list: the section's profiles after `cursor`, searched by `search`. */
function listQuery(search, cursor) {
  return {
    limit: PAGE_SIZE,
    ...(search.prefix ? { keyspace: search.keyspace, key_prefix: search.prefix } : {}),
    ...(search.attribute ? { attribute: search.attribute, value: search.value } : {}),
    cursor,
  };
}

/** A profile's page, through one of its keys (the export key when it has no other). */
function profileLink(item, keyspaceNames, exportKeyspace) {
  const keys = item.keys.filter((k) => k.keyspace_discriminator !== exportKeyspace);
  const shown = keys.length > 0 ? keys : item.keys;
  return html`<ul class="plain">
    ${shown.map(
      (k) =>
        html`<li>
          <${Link}
            class="mono"
            to=${`/profiles/${encodeURIComponent(k.keyspace_discriminator)}/${encodeURIComponent(k.profile_key)}`}
            >${k.profile_key}<//
          >${' '}<span class="muted small"
            >${keyspaceNames.get(k.keyspace_discriminator) ?? k.keyspace_discriminator}</span
          >
        </li>`,
    )}
  </ul>`;
}

/** The section's profiles, a page at a time, searched. */
function Browse({ section, keyspace, keyspaces }) {
  const of = { params: { section_discriminator: section } };
  const attributes = useApi('/audience/sections/{section_discriminator}/attributes', of);
  const [search, setSearch] = useState(
    /** @type {{ keyspace?: string, prefix?: string, attribute?: string, value?: string }} */ ({}),
  );
  // The cursors of the pages before this one, and this one's (none on the first page).
  const [cursors, setCursors] = useState([]);
  const list = useApi('/audience/sections/{section_discriminator}/profiles', {
    ...of,
    query: listQuery(search, cursors.at(-1)),
  });
  // The address the list shown answered: until the answer of a page or search asked since is
  // there, the one before is not shown as its answer (nor for the render that asks it).
  const [answered, setAnswered] = useState(undefined);
  useEffect(() => {
    if (list.data) setAnswered(list.address);
  }, [list.data]);
  const searchable = (attributes.data?.items ?? []).filter((a) => a.versions.at(-1)?.type[0] !== 'Struct');
  const names = new Map((attributes.data?.items ?? []).map((a) => [a.discriminator, a.name]));
  const keyspaceNames = new Map(keyspaces.map((k) => [k.discriminator, k.name]));
  const exportKeyspace = keyspaces.find((k) => k.discriminator.endsWith('.keyspaces.export'))?.discriminator;
  const run = (event) => {
    const values = formValues(event);
    setSearch({
      keyspace,
      prefix: values.prefix.trim(),
      attribute: values.attribute,
      value: values.attribute ? values.value : undefined,
    });
    setCursors([]);
  };
  const searched = search.prefix || search.attribute;
  const current = list.error || (!list.loading && answered === list.address) ? list : { reload: list.reload };
  return html`<form class="inline" aria-label="Search the section's profiles" onSubmit=${run}>
      <${Field}
        label="Key starts with"
        name="prefix"
        spellcheck="false"
        hint=${`In the keyspace ${keyspaceNames.get(keyspace) ?? ''} chosen above`}
      />
      <${Field} label="Attribute" name="attribute" as="select">
        <option value="">Any attribute</option>
        ${searchable.map((a) => html`<option value=${a.discriminator}>${a.name}</option>`)}
      <//>
      <${Field}
        label="Value"
        name="value"
        spellcheck="false"
        hint="The attribute's value, exactly: yes and no as true and false"
      />
      <button class="primary">Search</button>
      ${
        searched
          ? html`<button
              type="button"
              onClick=${(e) => {
                e.currentTarget.form.reset();
                setSearch({});
                setCursors([]);
              }}
            >
              Show all
            </button>`
          : null
      }
    </form>
    <${Loaded} state=${current}>
      ${(data) => {
        const columns = [...names.keys()]
          .filter((d) => data.items.some((item) => d in item.attributes))
          .slice(0, COLUMNS);
        const first = cursors.length * PAGE_SIZE + 1;
        return html`<p class="muted" role="status" data-testid="profiles-shown">
            ${
              data.items.length === 0
                ? searched
                  ? 'No profile of the section matches the search.'
                  : 'The section has no profile yet.'
                : `${plural(data.items.length, 'profile')} shown, ${first} to ${first + data.items.length - 1}${searched ? ', of those matching the search' : ''}.`
            }
          </p>
          <${Table}
            caption="The section's profiles, most recently updated first"
            rows=${data.items}
            empty=""
            columns=${[
              { label: 'Keys', value: (item) => profileLink(item, keyspaceNames, exportKeyspace) },
              ...columns.map((d) => ({
                label: names.get(d),
                value: (item) => (d in item.attributes ? text(item.attributes[d]) : '—'),
              })),
              { label: 'Updated', value: (item) => when(item.updated_at) },
            ]}
          />
          <div class="actions">
            <button type="button" disabled=${cursors.length === 0} onClick=${() => setCursors((c) => c.slice(0, -1))}>
              Previous page
            </button>
            <button
              type="button"
              disabled=${!data.next_cursor}
              onClick=${() => setCursors((c) => [...c, data.next_cursor])}
            >
              Next page
            </button>
          </div>`;
      }}
    <//>`;
}

export default function Profiles({ query }) {
  const keyspaces = useApi('/audience/keyspaces');
  const { section, picker } = useSection(query.section);
  const [keyspace, setKeyspace] = useState(query.keyspace || '');
  const find = (event) => {
    const values = formValues(event);
    location.hash = `#/profiles/${encodeURIComponent(values.keyspace)}/${encodeURIComponent(values.key.trim())}`;
  };
  return html`<${Page} title="Find a profile">
    <${Loaded} state=${keyspaces}>
      ${(data) => {
        const chosen = keyspace || data.items[0]?.discriminator;
        return html`<form class="inline" aria-label="Find a profile" onSubmit=${find}>
            <${Field}
              label="Keyspace"
              name="keyspace"
              as="select"
              value=${chosen}
              onChange=${(e) => setKeyspace(e.currentTarget.value)}
            >
              ${data.items.map((k) => html`<option value=${k.discriminator}>${k.name} (${k.discriminator})</option>`)}
            <//>
            <${Field} label="Key" name="key" required spellcheck="false" />
            <button class="primary">Find</button>
          </form>
          <h2>Browse a section's profiles</h2>
          ${picker}
          ${section ? html`<${Browse} key=${section} section=${section} keyspace=${chosen} keyspaces=${data.items} />` : null}`;
      }}
    <//>
  <//>`;
}
