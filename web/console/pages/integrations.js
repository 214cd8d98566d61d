// An account's connected integrations: each a keyspace of its own.
import { api } from '../lib/api.js';
import { html } from '../lib/html.js';
import { ErrorNote, Field, formValues, Loaded, Page, Table, useAction, useApi } from '../lib/ui.js';
import { AccountNav } from './account-nav.js';

export default function Integrations({ params }) {
  const route = '/admin/accounts/{account_id}/integrations';
  const account = { account_id: params.account_id };
  const list = useApi(route, { params: account });
  const connect = useAction(async (values) => {
    await api('POST', route, { params: account, body: { system: values.system.trim() } });
    list.reload();
  });
  return html`<${Page} title="Integrations">
    <${AccountNav} accountId=${params.account_id} current="/integrations" />
    <form class="inline" aria-label="Connect an integration" onSubmit=${(e) => connect.run(formValues(e))}>
      <${Field}
        label="System"
        name="system"
        required
        placeholder="magento"
        hint="A lower-case word: magento, shopware…"
      />
      <button class="primary" disabled=${connect.busy}>Connect</button>
    </form>
    <${ErrorNote} error=${connect.error} />
    <${Loaded} state=${list}>
      ${(data) =>
        html`<${Table}
          caption="Connected integrations"
          rows=${data.items}
          rowKey=${(i) => i.discriminator}
          empty="No integration is connected."
          columns=${[
            { label: 'System', value: (i) => i.system },
            { label: 'Keyspace', value: (i) => html`<span class="mono">${i.discriminator}</span>` },
          ]}
        />`}
    <//>
  <//>`;
}
