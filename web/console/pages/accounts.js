// The operator's accounts: the list and a new account.
import { api } from '../lib/api.js';
import { html } from '../lib/html.js';
import { ErrorNote, Field, formValues, Link, Loaded, Page, plural, Table, useAction, useApi, when } from '../lib/ui.js';

export default function Accounts() {
  const list = useApi('/admin/accounts');
  const create = useAction(async (values) => {
    const account = await api('POST', '/admin/accounts', { body: { name: values.name } });
    location.hash = `#/accounts/${encodeURIComponent(account.id)}`;
  });
  return html`<${Page} title="Accounts">
    <form class="inline" aria-label="New account" onSubmit=${(e) => create.run(formValues(e))}>
      <${Field} label="New account's name" name="name" required />
      <button class="primary" disabled=${create.busy}>Create account</button>
    </form>
    <${ErrorNote} error=${create.error} />
    <${Loaded} state=${list}>
      ${(data) =>
        html`<${Table}
          caption=${plural(data.items.length, 'account')}
          rows=${data.items}
          rowKey=${(a) => a.id}
          columns=${[
            { label: 'Name', value: (a) => html`<${Link} to=${`/accounts/${encodeURIComponent(a.id)}`}>${a.name}<//>` },
            { label: 'Id', value: (a) => html`<span class="mono">${a.id}</span>` },
            { label: 'Region', value: (a) => a.region },
            { label: 'Created', value: (a) => when(a.created_at) },
          ]}
        />`}
    <//>
  <//>`;
}
