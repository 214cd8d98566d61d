// The account's definitions as its key sees them: keyspaces, channels, sections, and per section
// its attributes, tags, events, topics and folders; the segments.
import { html } from '../lib/html.js';
import { Loaded, Page, Table, useApi, useSection } from '../lib/ui.js';

const versions = (d) =>
  d.versions
    .map((v, i) => `v${i + 1}: ${v.type.map((t) => (typeof t === 'string' ? t : `${t.name} ${t.type}`)).join(', ')}`)
    .join('; ');

function Folders({ folders }) {
  if (folders.length === 0) return null;
  return html`<ul>
    ${folders.map(
      (f) =>
        html`<li>
          ${f.name} <span class="mono muted">${f.discriminator}</span>
          <${Folders} folders=${f.subfolders ?? []} />
        </li>`,
    )}
  </ul>`;
}

function SectionDefinitions({ section }) {
  const of = { params: { section_discriminator: section } };
  const attributes = useApi('/audience/sections/{section_discriminator}/attributes', of);
  const tags = useApi('/audience/sections/{section_discriminator}/tags', of);
  const events = useApi('/audience/sections/{section_discriminator}/events', of);
  const topics = useApi('/v2/audience/sections/{section_discriminator}/topics', of);
  const folders = useApi('/folders/topic/sections/{section_discriminator}/folders', of);
  const named = [
    { label: 'Name', value: (d) => d.name },
    { label: 'Discriminator', value: (d) => html`<span class="mono">${d.discriminator}</span>` },
  ];
  return html`<h2>Attributes</h2>
    <${Loaded} state=${attributes}>
      ${(data) => html`<${Table} rows=${data.items} columns=${[...named, { label: 'Versions', value: versions }]} />`}
    <//>
    <h2>Tags</h2>
    <${Loaded} state=${tags}>${(data) => html`<${Table} rows=${data.items} columns=${named} />`}<//>
    <h2>Events</h2>
    <${Loaded} state=${events}>
      ${(data) => html`<${Table} rows=${data.items} columns=${[...named, { label: 'Versions', value: versions }]} />`}
    <//>
    <h2>Topics</h2>
    <${Loaded} state=${topics}>
      ${(data) =>
        html`<${Table}
          rows=${data.items}
          columns=${[...named, { label: 'Folder', value: (t) => html`<span class="mono">${t.folder_discriminator}</span>` }]}
        />`}
    <//>
    <h2>Topic folders</h2>
    <${Loaded} state=${folders}>
      ${(tree) =>
        tree.subfolders.length === 0
          ? html`<p class="muted">None.</p>`
          : html`<${Folders} folders=${tree.subfolders} />`}
    <//>`;
}

export default function Definitions({ query }) {
  const keyspaces = useApi('/audience/keyspaces');
  const segments = useApi('/audience/segments');
  const { section: chosen, picker } = useSection(query.section);
  return html`<${Page} title="Definitions">
    <h2>Keyspaces</h2>
    <${Loaded} state=${keyspaces}>
      ${(data) =>
        html`<${Table}
          rows=${data.items}
          columns=${[
            { label: 'Name', value: (k) => k.name },
            { label: 'Discriminator', value: (k) => html`<span class="mono">${k.discriminator}</span>` },
            { label: 'Description', value: (k) => k.description },
          ]}
        />`}
    <//>
    <h2>Segments</h2>
    <${Loaded} state=${segments}>
      ${(data) =>
        html`<${Table}
          rows=${data.items}
          columns=${[
            { label: 'Name', value: (g) => g.name },
            { label: 'Discriminator', value: (g) => html`<span class="mono">${g.discriminator}</span>` },
            { label: 'Query (latest version)', value: (g) => html`<code>${g.versions.at(-1)?.query}</code>` },
          ]}
        />`}
    <//>
    <h2>Sections</h2>
    ${picker} ${chosen ? html`<${SectionDefinitions} key=${chosen} section=${chosen} />` : null}
  <//>`;
}
