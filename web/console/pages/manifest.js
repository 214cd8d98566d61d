// Edit an account's definitions through its manifest: preview what an apply would create, change
// and leave alone, then apply.
import { useState } from 'preact/hooks';
import { api, path } from '../lib/api.js';
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
  const url = path`/admin/accounts/${params.account_id}/manifest`;
  const [source, setSource] = useState(EXAMPLE);
  const [previewed, setPreviewed] = useState(undefined);
  const parse = () => {
    try {
      return JSON.parse(source);
    } catch (e) {
      throw new Error(`The manifest is not JSON: ${e.message}`);
    }
  };
  const preview = useAction(async () => {
    const summary = await api('POST', `${url}/preview`, parse());
    setPreviewed(source);
    return summary;
  });
  const apply = useAction(async () => api('PUT', url, parse()));
  const summary = apply.done ?? preview.done;
  return html`<${Page} title="Manifest">
    <${AccountNav} accountId=${params.account_id} current="/manifest" />
    <p>
      A manifest lists definitions to create or change, matched by discriminator; nothing it leaves out is removed.
      Preview it to see what an apply would do.
    </p>
    <${Field}
      label="Manifest (JSON)"
      as="textarea"
      spellcheck="false"
      value=${source}
      onInput=${(e) => setSource(e.currentTarget.value)}
    />
    <div class="actions">
      <button type="button" disabled=${preview.busy} onClick=${() => preview.run()}>Preview</button>
      <button
        type="button"
        class="primary"
        disabled=${apply.busy || previewed !== source || !preview.done}
        onClick=${() => apply.run()}
      >
        Apply
      </button>
    </div>
    <p class="muted small">Apply is enabled once the manifest as it stands was previewed.</p>
    <${ErrorNote} error=${preview.error || apply.error} />
    ${summary ? html`<${Summary} summary=${summary} title=${apply.done ? 'Applied' : 'An apply would leave'} />` : null}
  <//>`;
}
