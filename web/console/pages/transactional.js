// Transactional mail: the sends of a transactional email activity, with their status and events.
import { useState } from 'preact/hooks';
import { html } from '../lib/html.js';
import { Field, Loaded, Page, Table, useApi, useSectionApi, when } from '../lib/ui.js';

function Sends({ section, activity }) {
  const sends = useApi('/emails/sections/{section_discriminator}/activities/{activity_id}/transactions', {
    params: { section_discriminator: section, activity_id: activity },
  });
  return html`<${Loaded} state=${sends}>
    ${(data) =>
      html`<${Table}
        caption="Sends, newest first"
        rows=${data.items}
        rowKey=${(s) => s.id}
        empty="No send yet."
        columns=${[
          { label: 'Accepted', value: (s) => when(s.created_at) },
          { label: 'To', value: (s) => s.to_address },
          { label: 'Status', value: (s) => html`<span data-testid="send-status">${s.status}</span>` },
          { label: 'Reason', value: (s) => s.status_reason ?? '' },
          {
            label: 'Events',
            value: (s) =>
              html`<ol class="events">
                ${s.events.map((e) => html`<li>${e.type} ${when(e.event_time)}</li>`)}
              </ol>`,
          },
          { label: 'Id', value: (s) => s.id },
        ]}
      />`}
  <//>`;
}

export default function Transactional() {
  const { section, picker, state: activities } = useSectionApi('/emails/sections/{section_discriminator}/activities');
  const [activity, setActivity] = useState('');
  const chosen = activity || activities.data?.items[0]?.id;
  return html`<${Page} title="Transactional mail">
    <div class="row">
      ${picker}
      <${Loaded} state=${activities}>
        ${(data) =>
          html`<${Field}
            label="Transactional email activity"
            as="select"
            value=${chosen}
            onChange=${(e) => setActivity(e.currentTarget.value)}
          >
            ${data.items.map((a) => html`<option value=${a.id}>${a.name}</option>`)}
          <//>`}
      <//>
    </div>
    ${section && chosen ? html`<${Sends} key=${`${section}/${chosen}`} section=${section} activity=${chosen} />` : null}
  <//>`;
}
