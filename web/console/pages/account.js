// One account for the operator: rename, limit overrides, delete (with confirmation).
import { useState } from 'preact/hooks';
import { api } from '../lib/api.js';
import { html } from '../lib/html.js';
import {
  ConfirmButton,
  ErrorNote,
  Field,
  formValues,
  Loaded,
  Notice,
  Page,
  Table,
  useAction,
  useApi,
  when,
} from '../lib/ui.js';
import { AccountNav } from './account-nav.js';

export default function Account({ params }) {
  const route = '/admin/accounts/{account_id}';
  const which = { params: { account_id: params.account_id } };
  const account = useApi(route, which);
  const [saved, setSaved] = useState('');
  const rename = useAction(async (values) => {
    await api('PATCH', route, { ...which, body: { name: values.name } });
    setSaved('Renamed.');
    account.reload();
  });
  const setLimit = useAction(async (values) => {
    const value = values.value.trim();
    const number = value === '' ? null : Number(value);
    await api('PATCH', route, {
      ...which,
      body: { limits: { ...account.data.limit_overrides, [values.limit]: number } },
    });
    setSaved(`Limit ${values.limit} ${number === null ? 'lifted' : `set to ${number}`}.`);
    account.reload();
  });
  const remove = useAction(async () => {
    await api('DELETE', route, which);
    location.hash = '#/accounts';
  });
  return html`<${Page} title=${account.data ? `Account ${account.data.name}` : 'Account'}>
    <${AccountNav} accountId=${params.account_id} current="" />
    <${Notice}>${saved}<//>
    <${ErrorNote} error=${rename.error || setLimit.error || remove.error} />
    <${Loaded} state=${account}>
      ${(a) =>
        html`<dl class="facts">
            <dt>Id</dt>
            <dd class="mono">${a.id}</dd>
            <dt>Region</dt>
            <dd>${a.region}</dd>
            <dt>Created</dt>
            <dd>${when(a.created_at)}</dd>
          </dl>
          <h2>Name</h2>
          <form class="inline" aria-label="Rename" onSubmit=${(e) => rename.run(formValues(e))}>
            <${Field} label="Name" name="name" value=${a.name} required />
            <button disabled=${rename.busy}>Rename</button>
          </form>
          <h2>Limits</h2>
          <${Table}
            caption="Limits in force (an override replaces the default)"
            rows=${Object.entries(a.limits)}
            rowKey=${([name]) => name}
            columns=${[
              { label: 'Limit', value: ([name]) => html`<span class="mono">${name}</span>` },
              { label: 'In force', value: ([, v]) => (v === null ? 'none' : String(v)) },
              {
                label: 'Override',
                value: ([name]) => (name in a.limit_overrides ? String(a.limit_overrides[name] ?? 'lifted') : '—'),
              },
            ]}
          />
          <form class="inline" aria-label="Set a limit" onSubmit=${(e) => setLimit.run(formValues(e))}>
            <${Field} label="Limit" name="limit" as="select">
              ${Object.keys(a.limits).map((n) => html`<option value=${n}>${n}</option>`)}
            <//>
            <${Field} label="Value (empty: no limit)" name="value" inputmode="numeric" pattern="[0-9]*" />
            <button disabled=${setLimit.busy}>Set limit</button>
          </form>
          <h2>Delete</h2>
          <p>Deleting the account erases its profiles, definitions, keys, jobs, imports, exports, mail and files.</p>
          <${ConfirmButton}
            label="Delete account"
            question=${`Delete the account "${a.name}" and everything of it? This cannot be undone.`}
            confirmLabel="Delete for good"
            onConfirm=${() => remove.run()}
          />`}
    <//>
  <//>`;
}
