// An account's suppressed addresses: no message goes to them, whatever their consents.
import { api } from '../lib/api.js';
import { html } from '../lib/html.js';
import { ConfirmButton, ErrorNote, Field, formValues, Loaded, Page, Table, useAction, useApi } from '../lib/ui.js';
import { AccountNav } from './account-nav.js';

export default function Suppressions({ params }) {
  const account = { account_id: params.account_id };
  const list = useApi('/admin/accounts/{account_id}/suppressions', { params: account });
  const add = useAction(async (values) => {
    await api('PUT', '/admin/accounts/{account_id}/suppressions', { params: account, body: values });
    list.reload();
  });
  const lift = useAction(async (s) => {
    await api('DELETE', '/admin/accounts/{account_id}/suppressions/{channel_discriminator}/{address}', {
      params: { ...account, channel_discriminator: s.channel_discriminator, address: s.address },
    });
    list.reload();
  });
  return html`<${Page} title="Suppressions">
    <${AccountNav} accountId=${params.account_id} current="/suppressions" />
    <form class="inline" aria-label="Suppress an address" onSubmit=${(e) => add.run(formValues(e))}>
      <${Field} label="Channel" name="channel_discriminator" required />
      <${Field} label="Address" name="address" required />
      <${Field} label="Reason" name="reason" required />
      <button class="primary" disabled=${add.busy}>Suppress</button>
    </form>
    <${ErrorNote} error=${add.error || lift.error} />
    <${Loaded} state=${list}>
      ${(data) =>
        html`<${Table}
          caption="Suppressed addresses"
          rows=${data.items}
          rowKey=${(s) => `${s.channel_discriminator} ${s.address}`}
          empty="No address is suppressed."
          columns=${[
            { label: 'Channel', value: (s) => html`<span class="mono">${s.channel_discriminator}</span>` },
            { label: 'Address', value: (s) => s.address },
            { label: 'Reason', value: (s) => s.reason },
            {
              label: 'Lift',
              value: (s) =>
                html`<${ConfirmButton}
                  label="Lift"
                  question=${`Lift the suppression of ${s.address}?`}
                  onConfirm=${() => lift.run(s)}
                />`,
            },
          ]}
        />`}
    <//>
  <//>`;
}
