import { afterAll, beforeAll } from 'vitest';
import type { Manifest } from '../src/definitions/schemas.ts';
import { TestServer } from './app.ts';
import { STATE_BOUND_MS, until } from './until.ts';
import { CallbackReceiver } from './callbacks.ts';

// What the tests of API keys restricted to sections (SPEC §5.7; docs/security.md "Section restrictions")
// share: an account of two sections, Alpha and Beta, with a key granted every section and one granted
// Alpha only, the ids of their definitions, and fresh profiles, exports and sends to call operations on.

export const NS = 'com.vendor1';
export const EMAIL = `${NS}.keyspaces.email`;
export const WEB = `${NS}.keyspaces.web`;
export const ALPHA = `${NS}.sections.user-created.alpha`;
export const BETA = `${NS}.sections.user-created.beta`;
export const EMAIL_CHANNEL = `${NS}.channels.email`;
export const NEWS = `${NS}.topics.user-created.news`;
export const ROOT_LIST = `${NS}.topic-folders.root`;

export const sectionWith = (name: string): NonNullable<Manifest['sections']>[number] => ({
  name,
  attributes: [{ name: 'Score', versions: [{ type: ['Number'] }] }],
  tags: [{ name: 'VIP' }],
  events: [{ name: 'Visit', versions: [{ type: [{ name: 'url', type: 'Text' }] }] }],
  topics: [{ name: 'News', channel: 'com.vendor1.channels.email' }],
});
export const MANIFEST: Manifest = {
  sections: [sectionWith('Alpha'), sectionWith('Beta')],
  segments: ['alpha', 'beta'].map((s) => ({
    name: `High ${s}`,
    section: `${NS}.sections.user-created.${s}`,
    versions: [{ query: 'section({section}).attribute({attribute:com.vendor1.attributes.user-created.score}).gt(10)' }],
  })),
};

export let server: TestServer;
/** Where the single profile exports' callbacks go. */
export let receiver: CallbackReceiver;
export let accountId: string;
/** A key granted every section, and one granted Alpha only. */
export let full: string;
export let alphaOnly: string;
export const ids: Record<string, { section: string; score: string; email: string; event: string; segment: string }> =
  {};

/** Starts the test file's server, receiver and account, before its tests. */
export function sectionAccessServer(): void {
  beforeAll(async () => {
    // With a worker: the poll URLs of exports are called once the export is ready; the single
    // profile export's callbacks reach a receiver on loopback.
    server = await TestServer.start({ CALLBACKS_ALLOW_PRIVATE: 'true' }, { worker: true });
    receiver = await CallbackReceiver.start();
    const creds = await server.createAccount(MANIFEST, {
      limits: {
        requests_per_second: null,
        token_requests_per_minute: null,
        profile_key_operations_per_second: null,
        import_requests_per_minute: null,
        pending_imports: null,
        profile_export_requests_per_second: null,
        event_export_requests_per_minute: null,
        pending_exports: null,
        export_downloads_per_minute: null,
      },
    });
    accountId = creds.accountId;
    full = await server.token(creds);
    alphaOnly = await server.token(await server.createKey(accountId, { section_discriminators: [ALPHA] }));
    const sections = (await server.request('GET', '/audience/sections', { token: full })).body.items;
    for (const s of ['alpha', 'beta']) {
      const discriminator = `${NS}.sections.user-created.${s}`;
      const attributes = (
        await server.request('GET', `/audience/sections/${discriminator}/attributes`, { token: full })
      ).body.items;
      const events = (await server.request('GET', `/audience/sections/${discriminator}/events`, { token: full })).body
        .items;
      ids[discriminator] = {
        section: sections.find((x: { discriminator: string }) => x.discriminator === discriminator).id,
        score: attributes.find(
          (a: { discriminator: string }) => a.discriminator === `${NS}.attributes.user-created.score`,
        ).versions[0].id,
        email: attributes.find((a: { discriminator: string }) => a.discriminator === `${NS}.attributes.email`)
          .versions[0].id,
        event: events[0].versions[0].id,
        segment: `${NS}.segments.user-created.high-${s}`,
      };
    }
    // An activity of each kind in each section, with the section's name in its id.
    for (const s of ['alpha', 'beta']) {
      for (const kind of ['email', 'sms', 'website', 'marketing-automation', 'forms-and-pages']) {
        const put = await server.admin('PUT', `/admin/accounts/${accountId}/activities/${kind}-${s}`, {
          kind,
          section_discriminator: `${NS}.sections.user-created.${s}`,
          name: `${kind} ${s}`,
        });
        if (put.status !== 201) throw new Error(put.text);
      }
    }
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });
}

/** A profile with its email address and a score in both sections, fresh for each call. */
export async function profile(): Promise<string> {
  const key = `${crypto.randomUUID()}@example.com`;
  await server.request('POST', `/audience/keyspaces/${EMAIL}/sections/${ALPHA}/profiles`, {
    token: full,
    body: { profile_key: key },
  });
  for (const section of [ALPHA, BETA]) {
    await server.request('PATCH', `/v2${profilePath(key, section)}/attributes`, {
      token: full,
      body: { [`${NS}.attributes.user-created.score`]: 20, [`${NS}.attributes.email`]: key },
    });
  }
  return key;
}

export const exportBody = {
  section_discriminator: ALPHA,
  topic_discriminators: [NEWS],
  channel_discriminator: EMAIL_CHANNEL,
};

/** The poll path of a count by consent that a key with every section requested, once it is ready. */
export async function readyExport(): Promise<string> {
  const created = await server.request('POST', '/audience/profiles/reports/consents/count', {
    token: full,
    body: exportBody,
  });
  const path = new URL(created.body.poll_url).pathname;
  await until(
    'the export ready',
    async () => (await server.request('GET', `/v2${path}`, { token: full })).status !== 202,
    STATE_BOUND_MS,
  );
  return path;
}

/** The export key of a fresh profile. */
export async function exportKey(): Promise<string> {
  const key = await profile();
  const { rows } = await server.services.pool.query(
    'select p.export_key from profile_identifiers i join profiles p using (account_id, profile_id) where i.account_id = $1::bigint and i.profile_key = $2',
    [accountId, key],
  );
  return rows[0].export_key;
}

/** The path of a single profile export's file that a key with every section requested, once it is ready. */
export async function readySingleExport(): Promise<string> {
  const created = await server.request('POST', `/audience/profiles/export-single/${await exportKey()}`, {
    token: full,
    body: { callback_url: receiver.url() },
  });
  const url = new URL(created.headers.get('location')!);
  const path = url.pathname + url.search;
  await until(
    'the single export ready',
    async () => (await server.request('GET', path, { token: full })).status !== 404,
    STATE_BOUND_MS,
  );
  return path;
}

/** The transactions path of the section's transactional email activity, created (or left as it is) first. */
export async function transactionsPath(section: string): Promise<string> {
  const id = `tx-${section.split('.').pop()}`;
  await server.admin('PUT', `/admin/accounts/${accountId}/activities/${id}`, {
    kind: 'email',
    section_discriminator: section,
    name: 'Receipt',
    transactional: true,
    email_subject: 'Receipt',
    sender_email_address: 'shop@shop.example',
    html: '<p>Thanks</p>',
  });
  return `/emails/sections/${section}/activities/transactional/${id}/transactions`;
}
export const sendBody = () => ({
  keyspace_discriminator: EMAIL,
  profile_key: `${crypto.randomUUID()}@example.com`,
  to_name: 'Ann',
  to_email_address: 'ann@example.com',
});

export const profilePath = (key: string, section: string) =>
  `/audience/keyspaces/${EMAIL}/profiles/${key}/sections/${section}`;
export const importBody = (version: 1 | 2, section: string) => {
  const attribute_mappings = [{ field_selector: 'score', attribute_version_id: ids[section].score }];
  return version === 1
    ? { keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }], attribute_mappings }
    : { keyspace_mapping: { keyspace_discriminator: EMAIL, field_selector: 'email' }, attribute_mappings };
};
