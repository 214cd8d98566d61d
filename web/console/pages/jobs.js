// The job queue: how many jobs wait, run and failed by kind, and the failed ones with their error.
import { useState } from 'preact/hooks';
import { html } from '../lib/html.js';
import { Field, Loaded, Page, Table, useApi, when } from '../lib/ui.js';

export default function Jobs() {
  const [state, setState] = useState('failed');
  const list = useApi(`/admin/jobs?limit=1000${state ? `&state=${state}` : ''}`);
  return html`<${Page} title="Jobs">
    <${Field} label="State" as="select" value=${state} onChange=${(e) => setState(e.currentTarget.value)}>
      <option value="failed">failed</option>
      <option value="waiting">waiting</option>
      <option value="running">running</option>
      <option value="">any</option>
    <//>
    <${Loaded} state=${list}>
      ${(data) =>
        html`<${Table}
          caption=${`${data.items.length} jobs`}
          rows=${data.items}
          rowKey=${(j) => j.job_id}
          empty="No job in this state."
          columns=${[
            { label: 'Kind', value: (j) => j.kind },
            { label: 'State', value: (j) => j.state },
            {
              label: 'Account',
              value: (j) => html`<a href=${`#/accounts/${encodeURIComponent(j.account_id)}`}>${j.account_id}</a>`,
            },
            { label: 'Attempts', value: (j) => String(j.attempts) },
            { label: 'Error', value: (j) => j.last_error ?? '—' },
            { label: 'Created', value: (j) => when(j.created_at) },
            { label: 'Failed', value: (j) => when(j.failed_at) },
          ]}
        />`}
    <//>
  <//>`;
}
