// One profile: its merge cluster; per section its attributes with their history, tags, consents
// and suppressions, and its events as a timeline; lock and delete, each confirmed.
import { api } from '../lib/api.js';
import { html } from '../lib/html.js';
import { ConfirmButton, ErrorNote, Link, Loaded, Page, Table, useAction, useApi, when } from '../lib/ui.js';

/** A value as text: yes or no for true and false, JSON for anything else that is not a string. */
export const text = (value) =>
  typeof value === 'string' ? value : typeof value === 'boolean' ? (value ? 'yes' : 'no') : JSON.stringify(value);

/** Names by version id: the definition's name, and for an older version which one it is. */
function namesByVersion(definitions) {
  const names = {};
  for (const d of definitions ?? [])
    d.versions.forEach((v, i) => {
      names[v.id] = i === d.versions.length - 1 ? d.name : `${d.name} (older version ${i + 1})`;
    });
  return names;
}

/** A name, its discriminator one hover away (and shown where there is no name). */
const named = (names, discriminator) =>
  html`<span title=${discriminator}>${names?.get(discriminator) ?? discriminator}</span>`;

/** Per attribute, its value now and the values it replaced, newest first: one row each. */
function AttributeHistory({ state, names }) {
  return html`<${Loaded} state=${state}>
    ${(data) => {
      const rows = data.items.flatMap((a) => [
        ...(a.current ? [{ a, value: a.current.value, set_at: a.current.set_at, replaced_at: null }] : []),
        ...a.past.map((p) => ({ a, ...p })),
      ]);
      const older = data.items.reduce((n, a) => n + a.past_total - a.past.length, 0);
      return html`<${Table}
          caption="Attribute history, newest first"
          rows=${rows}
          empty="No attribute has had a value."
          columns=${[
            { label: 'Attribute', value: (r) => names[r.a.version_id] ?? r.a.attribute_discriminator },
            { label: 'Value', value: (r) => text(r.value) },
            { label: 'Set', value: (r) => when(r.set_at) },
            { label: 'Replaced', value: (r) => (r.replaced_at ? when(r.replaced_at) : 'now shown') },
          ]}
        />
        ${older > 0 ? html`<p class="muted">${older} older values are left out.</p>` : null}`;
    }}
  <//>`;
}

/** The profiles of the profile's merge cluster, each with its keys, each key a link to its page. */
function MergeCluster({ keyspace, profileKey }) {
  const cluster = useApi('/audience/profiles/merges/keyspaces/{keyspace_discriminator}/profiles/{profile_key}', {
    params: { keyspace_discriminator: keyspace, profile_key: profileKey },
  });
  const keys = (m) =>
    html`<ul class="plain">
      ${m.keys.map(
        (k) =>
          html`<li>
            <span class="muted">${k.keyspace_discriminator}</span>${' '}
            <${Link}
              class="mono"
              to=${`/profiles/${encodeURIComponent(k.keyspace_discriminator)}/${encodeURIComponent(k.profile_key)}`}
              >${k.profile_key}<//
            >
          </li>`,
      )}
    </ul>`;
  return html`<section aria-labelledby="merge-cluster">
    <h2 id="merge-cluster">Merge cluster</h2>
    ${
      cluster.error?.status === 403
        ? html`<p class="muted">Only a key granted every section may read a merge cluster.</p>`
        : html`<${Loaded} state=${cluster}>
            ${(data) =>
              html`${data.items.length === 1 ? html`<p class="muted">The profile is merged with no other.</p>` : null}
                <${Table}
                  caption="Profiles of the cluster"
                  rows=${data.items}
                  columns=${[
                    { label: 'Profile', value: (m) => (m.canonical ? 'canonical' : 'merged') },
                    { label: 'Keys', value: keys },
                    { label: 'Merged', value: (m) => when(m.merged_at) },
                  ]}
                />`}
          <//>`
    }
  </section>`;
}

function SectionData({ profile, section }) {
  const at = { params: { ...profile, section_discriminator: section.discriminator } };
  const profileAt =
    '/audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/sections/{section_discriminator}';
  const attributes = useApi(`${profileAt}/attributes`, at);
  const history = useApi(`${profileAt}/attributes/history`, at);
  const tags = useApi(`${profileAt}/tags`, at);
  const consents = useApi(`/v2${profileAt}/consents`, at);
  const events = useApi(`${profileAt}/events`, at);
  const of = { params: { section_discriminator: section.discriminator } };
  const attributeDefs = useApi('/audience/sections/{section_discriminator}/attributes', of);
  const eventDefs = useApi('/audience/sections/{section_discriminator}/events', of);
  const tagDefs = useApi('/audience/sections/{section_discriminator}/tags', of);
  const topicDefs = useApi('/v2/audience/sections/{section_discriminator}/topics', of);
  const channelDefs = useApi('/audience/channels');
  const byDiscriminator = (state) => state.data && new Map(state.data.items.map((d) => [d.discriminator, d.name]));
  const tagNames = byDiscriminator(tagDefs);
  const topicNames = byDiscriminator(topicDefs);
  const channelNames = byDiscriminator(channelDefs);
  const attributeNames = namesByVersion(attributeDefs.data?.items);
  const eventNames = namesByVersion(eventDefs.data?.items);
  if (attributes.error)
    return html`<section aria-labelledby=${`s-${section.id}`}>
      <h2 id=${`s-${section.id}`}>${section.name}</h2>
      <${ErrorNote} error=${attributes.error} />
    </section>`;
  return html`<section aria-labelledby=${`s-${section.id}`}>
    <h2 id=${`s-${section.id}`}>${section.name}</h2>
    <h3>Attributes</h3>
    <${Loaded} state=${attributes}>
      ${(values) =>
        html`<${Table}
          rows=${Object.entries(values)}
          rowKey=${([id]) => id}
          empty="No attribute is set."
          columns=${[
            { label: 'Attribute', value: ([id]) => attributeNames[id] ?? id },
            { label: 'Value', value: ([, value]) => text(value) },
          ]}
        />`}
    <//>
    <h3>Attribute history</h3>
    <${AttributeHistory} state=${history} names=${attributeNames} />
    <h3>Tags</h3>
    <${Loaded} state=${tags}>
      ${(values) => {
        const set = Object.keys(values);
        return set.length === 0
          ? html`<p class="muted">No tag.</p>`
          : html`<ul>
              ${set.map((t) => html`<li>${named(tagNames, t)}</li>`)}
            </ul>`;
      }}
    <//>
    <h3>Consents and suppressions</h3>
    <${Loaded} state=${consents}>
      ${(data) =>
        html`<${Table}
            rows=${data.items}
            empty="No consent."
            columns=${[
              { label: 'Topic', value: (c) => named(topicNames, c.topic_discriminator) },
              { label: 'Channel', value: (c) => named(channelNames, c.channel_discriminator) },
              { label: 'Consent', value: (c) => c.type },
              { label: 'Reason', value: (c) => c.reason },
              { label: 'Source', value: (c) => c.source },
              { label: 'Changed', value: (c) => when(c.modified_at) },
            ]}
          />
          ${
            data.suppression.length > 0
              ? html`<${Table}
                  caption="Suppressed addresses"
                  rows=${data.suppression}
                  columns=${[
                    { label: 'Channel', value: (x) => named(channelNames, x.channel_discriminator) },
                    { label: 'Address', value: (x) => x.address },
                    { label: 'Reason', value: (x) => x.reason },
                  ]}
                />`
              : html`<p class="muted">No suppressed address.</p>`
          }`}
    <//>
    <h3>Events</h3>
    <${Loaded} state=${events}>
      ${(data) =>
        data.items.length === 0
          ? html`<p class="muted">No event.</p>`
          : html`<ol class="timeline" aria-label=${`Events in ${section.name}, newest first`}>
                ${data.items.map(
                  (e) =>
                    html`<li>
                      ${when(e.event_time)} <strong>${eventNames[e.version_id] ?? e.version_id}</strong>
                      <pre>${JSON.stringify(e.data, null, 2)}</pre>
                    </li>`,
                )}
              </ol>
              ${data.truncated ? html`<p class="muted">Older events are left out.</p>` : null}`}
    <//>
  </section>`;
}

export default function Profile({ params }) {
  const profile = { keyspace_discriminator: params.keyspace, profile_key: params.key };
  const sections = useApi('/audience/sections');
  const lock = useAction(async () => {
    await api('PUT', '/audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/locks', { params: profile });
    location.hash = '#/profiles';
  });
  const remove = useAction(async () => {
    await api('DELETE', '/audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}', { params: profile });
    location.hash = '#/profiles';
  });
  return html`<${Page}
    title=${`Profile ${params.key}`}
    actions=${html`<${ConfirmButton}
        label="Delete profile"
        question=${`Delete the profile ${params.key}, with the profiles merged with it, and all their data? Its keys can be used again.`}
        confirmLabel="Delete for good"
        onConfirm=${() => remove.run()}
      />
      <${ConfirmButton}
        label="Lock profile"
        question=${`Lock the profile ${params.key} for good? It and the profiles merged with it are erased, and every request naming one of their keys is refused from then on.`}
        confirmLabel="Lock for good"
        onConfirm=${() => lock.run()}
      />`}
  >
    <p>Key <span class="mono">${params.key}</span> in keyspace <span class="mono">${params.keyspace}</span>.</p>
    <${ErrorNote} error=${lock.error || remove.error} />
    <${MergeCluster} keyspace=${params.keyspace} profileKey=${params.key} />
    <${Loaded} state=${sections}>
      ${(data) => data.items.map((s) => html`<${SectionData} key=${s.discriminator} profile=${profile} section=${s} />`)}
    <//>
  <//>`;
}
