// The account at a glance, per section: its profiles and how many may be contacted on each
// channel (the interface's count by consent over the section's topics), their growth over the last
// 30 days, its last imports, the account's last exports and the section's last email sends, each
// with its state.
import { html } from '../lib/html.js';
import { Chart, useConsentCount } from '../lib/marketing.js';
import { ErrorNote, Link, Loaded, Page, plural, Table, useApi, useSection, when } from '../lib/ui.js';

/**
 * Counts the section's profiles and those reachable on each channel: one count by consent over
 * every topic of the section, a column per channel (at most two, as the interface takes).
 */
function useReach(section, topics, channels) {
  const body =
    topics && channels && topics.length > 0
      ? {
          section_discriminator: section,
          topic_discriminators: topics.map((t) => t.discriminator),
          channels: channels.slice(0, 2).map((c) => ({ field_name: c.name, channel_discriminator: c.discriminator })),
        }
      : undefined;
  const count = useConsentCount(body);
  return { ...count, noTopics: Boolean(topics && topics.length === 0) };
}

function Reach({ section, channels }) {
  const topics = useApi('/v2/audience/sections/{section_discriminator}/topics', {
    params: { section_discriminator: section },
  });
  const reach = useReach(section, topics.data?.items, channels);
  if (topics.error) return html`<${ErrorNote} error=${topics.error} retry=${topics.reload} />`;
  if (reach.error) return html`<${ErrorNote} error=${reach.error} retry=${reach.reload} />`;
  if (reach.noTopics)
    return html`<p class="muted">
      Reachable profiles are counted over the section's topics, and this section has none.
    </p>`;
  if (!reach.result) return html`<p class="muted" role="status">Counting the profiles…</p>`;
  const r = reach.result;
  const shown = channels.slice(0, 2);
  return html`<dl class="figures">
      <div>
        <dt>Profiles</dt>
        <dd data-testid="figure-profiles">${r.total_profile_count.toLocaleString('en')}</dd>
      </div>
      ${shown.map(
        (c) =>
          html`<div>
            <dt>${`Reachable by ${c.name}`}</dt>
            <dd data-testid=${`figure-${c.name}`}>${(r[c.name] ?? 0).toLocaleString('en')}</dd>
          </div>`,
      )}
    </dl>
    <p class="muted small">
      ${`Reachable: may be contacted about at least one of the section's ${plural(topics.data.items.length, 'topic')} on the channel (consented, not suppressed).`}
    </p>`;
}

/** The section's profiles on each of the last 30 days: those created that day, and all of them. */
function Growth({ section }) {
  const growth = useApi('/audience/sections/{section_discriminator}/profiles/growth', {
    params: { section_discriminator: section },
    query: { days: 30 },
  });
  return html`<${Loaded} state=${growth}>
    ${(data) => {
      const days = data.items;
      const added = days.reduce((n, d) => n + d.new_profiles, 0);
      return html`<p data-testid="growth-summary">
          ${`${plural(added, 'new profile')} in the last 30 days, ${plural(days.at(-1).total_profiles, 'profile')} now.`}
        </p>
        <${Chart}
          title="Profiles per day"
          times=${days.map((d) => `${d.day}T00:00:00Z`)}
          series=${[
            { label: 'All profiles at the end of the day', values: days.map((d) => d.total_profiles) },
            { label: 'New profiles that day', values: days.map((d) => d.new_profiles) },
          ]}
        />`;
    }}
  <//>`;
}

export default function Overview() {
  const { section, picker } = useSection();
  const of = { params: { section_discriminator: section } };
  const channels = useApi('/audience/channels');
  const imports = useApi(section ? '/audience/sections/{section_discriminator}/imports' : null, of);
  const exports = useApi('/audience/profiles/reports', { query: { limit: 20 } });
  const emails = useApi(section ? '/emails/sections/{section_discriminator}/activities' : null, of);
  return html`<${Page} title="Overview">
    ${picker}
    <h2>Profiles</h2>
    ${
      section
        ? html`<${Loaded} state=${channels}>
            ${(data) => html`<${Reach} key=${section} section=${section} channels=${data.items} />`}
          <//>`
        : null
    }
    <h2>Growth, the last 30 days</h2>
    ${section ? html`<${Growth} key=${section} section=${section} />` : null}
    <h2>Last imports</h2>
    <${Loaded} state=${imports}>
      ${(data) =>
        html`<${Table}
          caption="The section's last imports"
          rows=${data.items.slice(0, 5)}
          empty="No import yet."
          columns=${[
            { label: 'Created', value: (i) => when(i.created_at) },
            { label: 'State', value: (i) => i.status },
            { label: 'Applied', value: (i) => String(i.profiles_processed) },
            { label: 'Failed', value: (i) => String(i.profiles_failed) },
          ]}
        />`}
    <//>
    <p><${Link} to="/imports">All imports<//></p>
    <h2>Last exports</h2>
    ${
      exports.error?.status === 403
        ? html`<p class="muted">Exports may reach every section: a key of some sections does not see them.</p>`
        : html`<${Loaded} state=${exports}>
            ${(data) =>
              html`<${Table}
                caption="The account's last exports (counts left out)"
                rows=${data.items.filter((i) => !i.kind.endsWith('-count')).slice(0, 5)}
                empty="No export yet."
                columns=${[
                  { label: 'Created', value: (i) => when(i.created_at) },
                  { label: 'Kind', value: (i) => i.kind },
                  { label: 'State', value: (i) => i.status },
                ]}
              />`}
          <//>`
    }
    <p><${Link} to="/exports">All exports<//></p>
    <h2>Last email sends</h2>
    <${Loaded} state=${emails}>
      ${(data) =>
        html`<${Table}
          caption="The section's email activities, last sent first"
          rows=${[...data.items]
            .sort((a, b) => String(b.sent_at ?? b.created_at).localeCompare(String(a.sent_at ?? a.created_at)))
            .slice(0, 5)}
          empty="No email activity yet."
          columns=${[
            { label: 'Activity', value: (a) => a.name },
            { label: 'State', value: (a) => a.status },
            { label: 'Sent', value: (a) => when(a.sent_at) },
          ]}
        />`}
    <//>
    <p><${Link} to="/activities">All activities<//></p>
  <//>`;
}
