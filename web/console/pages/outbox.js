// The outbox of an account (mail kept instead of sent when no SMTP server is set): its messages,
// and one shown as it would be read, in a sandboxed frame that runs no script and loads nothing.
import { useState } from 'preact/hooks';
import { html } from '../lib/html.js';
import { Loaded, Page, Table, useApi, when } from '../lib/ui.js';
import { AccountNav } from './account-nav.js';

function Message({ accountId, id }) {
  const message = useApi('/admin/accounts/{account_id}/outbox/{message_id}', {
    params: { account_id: accountId, message_id: id },
  });
  return html`<${Loaded} state=${message}>
    ${(m) =>
      html`<section aria-labelledby="message">
        <h2 id="message">${m.subject}</h2>
        <dl class="facts">
          <dt>From</dt>
          <dd>${m.sender}</dd>
          <dt>To</dt>
          <dd>${m.recipients.join(', ')}</dd>
          <dt>Kept</dt>
          <dd>${when(m.created_at)}</dd>
        </dl>
        ${
          m.html !== null
            ? html`<iframe
                class="message"
                title=${`The message ${m.subject}`}
                sandbox=""
                referrerpolicy="no-referrer"
                srcdoc=${m.html}
              ></iframe>`
            : html`<pre class="message-text">${m.text ?? ''}</pre>`
        }
        <details>
          <summary>Source</summary>
          <pre class="message-text">${m.source}</pre>
        </details>
      </section>`}
  <//>`;
}

export default function Outbox({ params }) {
  const list = useApi('/admin/accounts/{account_id}/outbox', { params: { account_id: params.account_id } });
  const [open, setOpen] = useState(undefined);
  return html`<${Page} title="Outbox">
    <${AccountNav} accountId=${params.account_id} current="/outbox" />
    <${Loaded} state=${list}>
      ${(data) =>
        html`<${Table}
          caption="Messages kept, newest first"
          rows=${data.items}
          rowKey=${(m) => m.message_id}
          empty="The outbox is empty."
          columns=${[
            { label: 'Kept', value: (m) => when(m.created_at) },
            {
              label: 'Subject',
              value: (m) =>
                html`<button type="button" class="link" onClick=${() => setOpen(m.message_id)}>${m.subject}</button>`,
            },
            { label: 'To', value: (m) => m.recipients.join(', ') },
            { label: 'Send', value: (m) => m.transaction_id ?? '' },
          ]}
        />`}
    <//>
    ${open ? html`<${Message} key=${open} accountId=${params.account_id} id=${open} />` : null}
  <//>`;
}
