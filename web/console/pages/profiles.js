// Find a profile by any of its keys, in any keyspace.
import { useState } from 'preact/hooks';
import { html } from '../lib/html.js';
import { Field, formValues, Loaded, Page, useApi } from '../lib/ui.js';

export default function Profiles({ query }) {
  const keyspaces = useApi('/audience/keyspaces');
  const [keyspace, setKeyspace] = useState(query.keyspace || '');
  const find = (event) => {
    const values = formValues(event);
    location.hash = `#/profiles/${encodeURIComponent(values.keyspace)}/${encodeURIComponent(values.key.trim())}`;
  };
  return html`<${Page} title="Find a profile">
    <${Loaded} state=${keyspaces}>
      ${(data) =>
        html`<form class="inline" aria-label="Find a profile" onSubmit=${find}>
          <${Field}
            label="Keyspace"
            name="keyspace"
            as="select"
            value=${keyspace || data.items[0]?.discriminator}
            onChange=${(e) => setKeyspace(e.currentTarget.value)}
          >
            ${data.items.map((k) => html`<option value=${k.discriminator}>${k.name} (${k.discriminator})</option>`)}
          <//>
          <${Field} label="Key" name="key" required spellcheck="false" />
          <button class="primary">Find</button>
        </form>`}
    <//>
  <//>`;
}
