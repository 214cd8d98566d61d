// Edit an account's definitions through its manifest: load what the account defines now, preview
// what an apply would create, change and leave alone, then apply.
import { useState } from 'preact/hooks';
import { api } from '../lib/api.js';
import { html } from '../lib/html.js';
import { ErrorNote, Field, Page, useAction } from '../lib/ui.js';
import { AccountNav } from './account-nav.js';

const EXAMPLE = `{
  "sections": [
    {
      "name": "Shop",
      "attributes": [{ "name": "Points", "versions": [{ "type": ["Number"] }] }],
      "tags": [{ "name": "VIP" }]
    }
  ]
}`;

function Summary({ summary, title }) {
  return html`<section aria-label=${title}>
    <h2>${title}</h2>
    ${[
      ['created', 'Created'],
      ['changed', 'Changed'],
      ['unchanged', 'Left alone'],
    ].map(
      ([field, label]) =>
        html`<h3>${label} (${summary[field].length})</h3>
          ${
            summary[field].length === 0
              ? html`<p class="muted">Nothing.</p>`
              : html`<ul data-testid=${field}>
                  ${summary[field].map((item) => html`<li class="mono">${item}</li>`)}
                </ul>`
          }`,
    )}
  </section>`;
}

export default function Manifest({ params }) {
  const account = { account_id: params.account_id };
  const [source, setSource] = useState(EXAMPLE);
  const [previewed, setPreviewed] = useState(undefined);
  const parse = () => {
    try {
      return JSON.parse(source);
    } catch (e) {
      throw new Error(`The manifest is not JSON: ${e.message}`);
    }
  };
  // The answer of the last preview or apply, with its title.
  const [shown, setShown] = useState(undefined);
  const preview = useAction(async () => {
    const summary = await api('POST', '/admin/accounts/{account_id}/manifest/preview', {
      params: account,
      body: parse(),
    });
    setPreviewed(source);
    setShown({ summary, title: 'An apply would leave' });
  });
  const apply = useAction(async () =>
    setShown({
      summary: await api('PUT', '/admin/accounts/{account_id}/manifest', { params: account, body: parse() }),
      title: 'Applied',
    }),
  );
  // What the account defines now, as the manifest that applied back changes nothing.
  const load = useAction(async () => {
    setSource(JSON.stringify(await api('GET', '/admin/accounts/{account_id}/manifest', { params: account }), null, 2));
    setPreviewed(undefined);
    setShown(undefined);
  });
  return html`<${Page} title="Manifest">
    <${AccountNav} accountId=${params.account_id} current="/manifest" />
    <p>
      A manifest lists definitions to create or change, matched by discriminator; nothing it leaves out is removed. Load
      current fills the editor with what the account defines now, to change it from there. Preview a manifest to see
      what an apply would do.
    </p>
    <${Field}
      label="Manifest (JSON)"
      as="textarea"
      spellcheck="false"
      value=${source}
      onInput=${(e) => setSource(e.currentTarget.value)}
    />
    <div class="actions">
      <button type="button" disabled=${load.busy} onClick=${() => load.run()}>Load current</button>
      <button type="button" disabled=${preview.busy} onClick=${() => preview.run()}>Preview</button>
      <button type="button" class="primary" disabled=${apply.busy || previewed !== source} onClick=${() => apply.run()}>
        Apply
      </button>
    </div>
    <p class="muted small">Apply is enabled once the manifest as it stands was previewed.</p>
    <${ErrorNote} error=${load.error || preview.error || apply.error} />
    ${shown ? html`<${Summary} summary=${shown.summary} title=${shown.title} />` : null}
  <//>`;
}
