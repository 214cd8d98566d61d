// The job queue: jobs by kind and state, and a list by state; a failed job shows its error and
// can be run again.
import { useState } from 'preact/hooks';
import { api } from '../lib/api.js';
import { html } from '../lib/html.js';
import { ErrorNote, Field, Loaded, Notice, Page, plural, Table, useAction, useApi, when } from '../lib/ui.js';

export default function Jobs() {
  const [state, setState] = useState(/** @type {'failed' | 'running' | 'waiting' | ''} */ ('failed'));
  const figures = useApi('/admin/jobs/figures');
  const list = useApi('/admin/jobs', { query: { limit: 1000, state: state || undefined } });
  const retry = useAction(async (job) => {
    await api('POST', '/admin/accounts/{account_id}/jobs/{job_id}/retry', {
      params: { account_id: job.account_id, job_id: job.job_id },
    });
    list.reload();
    figures.reload();
    return `Job ${job.job_id} runs again.`;
  });
  return html`<${Page} title="Jobs">
    <${Loaded} state=${figures}>
      ${(data) =>
        html`<${Table}
          caption="Jobs by kind and state"
          rows=${data.items}
          rowKey=${(f) => `${f.kind} ${f.state}`}
          empty="The queue is empty."
          columns=${[
            { label: 'Kind', value: (f) => f.kind },
            { label: 'State', value: (f) => f.state },
            { label: 'Jobs', value: (f) => String(f.count) },
            { label: 'Waited since due (s)', value: (f) => String(Math.round(f.overdue_seconds)) },
          ]}
        />`}
    <//>
    <h2>Jobs</h2>
    <${Field} label="State" as="select" value=${state} onChange=${(e) => setState(e.currentTarget.value)}>
      <option value="failed">failed</option>
      <option value="waiting">waiting</option>
      <option value="running">running</option>
      <option value="">any</option>
    <//>
    <${Notice}>${typeof retry.done === 'string' ? retry.done : ''}<//>
    <${ErrorNote} error=${retry.error} />
    <${Loaded} state=${list}>
      ${(data) =>
        html`<${Table}
          caption=${plural(data.items.length, 'job')}
          rows=${data.items}
          rowKey=${(j) => `${j.account_id} ${j.job_id}`}
          empty="No job in this state."
          columns=${[
            { label: 'Job', value: (j) => j.job_id },
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
            {
              label: 'Retry',
              value: (j) =>
                j.state === 'failed'
                  ? html`<button type="button" aria-label=${`Retry job ${j.job_id}`} onClick=${() => retry.run(j)}>
                      Retry
                    </button>`
                  : '—',
            },
          ]}
        />`}
    <//>
  <//>`;
}
