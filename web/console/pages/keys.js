// An account's API keys: create one (its secret is shown once, here), revoke one.
import { api } from '../lib/api.js';
import { html } from '../lib/html.js';
import {
  ConfirmButton,
  ErrorNote,
  Field,
  formValues,
  Loaded,
  Page,
  Table,
  useAction,
  useApi,
  when,
} from '../lib/ui.js';
import { AccountNav } from './account-nav.js';

export default function Keys({ params }) {
  const account = { account_id: params.account_id };
  const keys = useApi('/admin/accounts/{account_id}/keys', { params: account });
  const create = useAction(async (values) => {
    const sections = values.sections
      .split(/[\s,]+/)
      .map((s) => s.trim())
      .filter(Boolean);
    const key = await api('POST', '/admin/accounts/{account_id}/keys', {
      params: account,
      body: {
        ...(values.name ? { name: values.name } : {}),
        ...(sections.length > 0 ? { section_discriminators: sections } : {}),
      },
    });
    keys.reload();
    return key;
  });
  const revoke = useAction(async (clientId) => {
    await api('DELETE', '/admin/accounts/{account_id}/keys/{client_id}', {
      params: { ...account, client_id: clientId },
    });
    keys.reload();
  });
  const created = create.done;
  return html`<${Page} title="API keys">
    <${AccountNav} accountId=${params.account_id} current="/keys" />
    <form aria-label="New API key" onSubmit=${(e) => create.run(formValues(e))}>
      <h2>New key</h2>
      <${Field} label="Name" name="name" />
      <${Field}
        label="Sections"
        name="sections"
        hint="Section discriminators the key may use, separated by spaces or commas; empty: every section"
      />
      <button class="primary" disabled=${create.busy}>Create key</button>
    </form>
    <${ErrorNote} error=${create.error || revoke.error} />
    ${
      created
        ? html`<div class="note ok" role="status" data-testid="new-key">
            <strong>Key created. Copy its secret now: it is not shown again.</strong>
            <span>Client id: <span class="secret" data-testid="client-id">${created.client_id}</span></span>
            <span>Client secret: <span class="secret" data-testid="client-secret">${created.client_secret}</span></span>
          </div>`
        : null
    }
    <${Loaded} state=${keys}>
      ${(data) =>
        html`<${Table}
          caption="Keys"
          rows=${data.items}
          rowKey=${(k) => k.client_id}
          empty="This account has no API key."
          columns=${[
            { label: 'Client id', value: (k) => html`<span class="mono">${k.client_id}</span>` },
            { label: 'Name', value: (k) => k.name },
            { label: 'Sections', value: (k) => (k.section_ids ? k.section_ids.join(', ') : 'all') },
            { label: 'Created', value: (k) => when(k.created_at) },
            {
              label: 'Revoke',
              value: (k) =>
                html`<${ConfirmButton}
                  label="Revoke"
                  question=${`Revoke the key ${k.client_id}? Its tokens stop working at once.`}
                  onConfirm=${() => revoke.run(k.client_id)}
                />`,
            },
          ]}
        />`}
    <//>
  <//>`;
}
