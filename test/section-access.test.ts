import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Manifest } from '../src/definitions/schemas.ts';
import { TestServer, expectProblem, type Response } from './app.ts';
import { CallbackReceiver } from './callbacks.ts';

// API keys restricted to sections (SPEC §5.7; docs/security.md "Section restrictions"), checked on
// every operation of the public interface: a table names each one (a test below fails when an
// operation of /openapi.json is missing from it), how to call it in a section, and what a key
// restricted to another section meets.

const NS = 'com.vendor1';
const EMAIL = `${NS}.keyspaces.email`;
const WEB = `${NS}.keyspaces.web`;
const ALPHA = `${NS}.sections.user-created.alpha`;
const BETA = `${NS}.sections.user-created.beta`;
const EMAIL_CHANNEL = `${NS}.channels.email`;
const NEWS = `${NS}.topics.user-created.news`;
const ROOT_LIST = `${NS}.topic-folders.root`;

const sectionWith = (name: string): NonNullable<Manifest['sections']>[number] => ({
  name,
  attributes: [{ name: 'Score', versions: [{ type: ['Number'] }] }],
  tags: [{ name: 'VIP' }],
  events: [{ name: 'Visit', versions: [{ type: [{ name: 'url', type: 'Text' }] }] }],
  topics: [{ name: 'News', channel: 'com.vendor1.channels.email' }],
});
const MANIFEST: Manifest = {
  sections: [sectionWith('Alpha'), sectionWith('Beta')],
  segments: ['alpha', 'beta'].map((s) => ({
    name: `High ${s}`,
    section: `${NS}.sections.user-created.${s}`,
    versions: [{ query: 'section({section}).attribute({attribute:com.vendor1.attributes.user-created.score}).gt(10)' }],
  })),
};

let server: TestServer;
/** Where the single profile exports' callbacks go. */
let receiver: CallbackReceiver;
let accountId: string;
/** A key granted every section, and one granted Alpha only. */
let full: string;
let alphaOnly: string;
const ids: Record<string, { section: string; score: string; email: string; event: string; segment: string }> = {};

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
    const attributes = (await server.request('GET', `/audience/sections/${discriminator}/attributes`, { token: full }))
      .body.items;
    const events = (await server.request('GET', `/audience/sections/${discriminator}/events`, { token: full })).body
      .items;
    ids[discriminator] = {
      section: sections.find((x: { discriminator: string }) => x.discriminator === discriminator).id,
      score: attributes.find(
        (a: { discriminator: string }) => a.discriminator === `${NS}.attributes.user-created.score`,
      ).versions[0].id,
      email: attributes.find((a: { discriminator: string }) => a.discriminator === `${NS}.attributes.email`).versions[0]
        .id,
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

/** A profile with its email address and a score in both sections, fresh for each call. */
async function profile(): Promise<string> {
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

const exportBody = { section_discriminator: ALPHA, topic_discriminators: [NEWS], channel_discriminator: EMAIL_CHANNEL };

/** The poll path of a count by consent that a key with every section requested, once it is ready. */
async function readyExport(): Promise<string> {
  const created = await server.request('POST', '/audience/profiles/reports/consents/count', {
    token: full,
    body: exportBody,
  });
  const path = new URL(created.body.poll_url).pathname;
  for (let i = 0; i < 400 && (await server.request('GET', `/v2${path}`, { token: full })).status === 202; i++)
    await new Promise((r) => setTimeout(r, 25));
  return path;
}

/** The export key of a fresh profile. */
async function exportKey(): Promise<string> {
  const key = await profile();
  const { rows } = await server.services.pool.query(
    'select p.export_key from profile_identifiers i join profiles p using (account_id, profile_id) where i.account_id = $1::bigint and i.profile_key = $2',
    [accountId, key],
  );
  return rows[0].export_key;
}

/** The path of a single profile export's file that a key with every section requested, once it is ready. */
async function readySingleExport(): Promise<string> {
  const created = await server.request('POST', `/audience/profiles/export-single/${await exportKey()}`, {
    token: full,
    body: { callback_url: receiver.url() },
  });
  const url = new URL(created.headers.get('location')!);
  const path = url.pathname + url.search;
  for (let i = 0; i < 400 && (await server.request('GET', path, { token: full })).status === 404; i++)
    await new Promise((r) => setTimeout(r, 25));
  return path;
}

/** The transactions path of the section's transactional email activity, created (or left as it is) first. */
async function transactionsPath(section: string): Promise<string> {
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
const sendBody = () => ({
  keyspace_discriminator: EMAIL,
  profile_key: `${crypto.randomUUID()}@example.com`,
  to_name: 'Ann',
  to_email_address: 'ann@example.com',
});

const profilePath = (key: string, section: string) =>
  `/audience/keyspaces/${EMAIL}/profiles/${key}/sections/${section}`;
const importBody = (version: 1 | 2, section: string) => {
  const attribute_mappings = [{ field_selector: 'score', attribute_version_id: ids[section].score }];
  return version === 1
    ? { keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }], attribute_mappings }
    : { keyspace_mapping: { keyspace_discriminator: EMAIL, field_selector: 'email' }, attribute_mappings };
};

/**
 * How each operation meets a key restricted to Alpha: `section` operations answer 403 in Beta and
 * not in Alpha; `every-section` operations (they reach the data of every section) answer 403
 * whatever the section; `account` operations read no section data and answer as for any key.
 */
type Access = 'section' | 'every-section' | 'account';
interface Operation {
  access: Access;
  call: (token: string, section: string) => Promise<Response>;
}

const OPERATIONS: Record<string, Operation> = {
  'GET /audience/keyspaces': {
    access: 'account',
    call: (token) => server.request('GET', '/audience/keyspaces', { token }),
  },
  'GET /audience/channels': {
    access: 'account',
    call: (token) => server.request('GET', '/audience/channels', { token }),
  },
  'GET /audience/sections': {
    access: 'account',
    call: (token) => server.request('GET', '/audience/sections', { token }),
  },
  'GET /audience/segments': {
    access: 'account',
    call: (token) => server.request('GET', '/audience/segments', { token }),
  },
  'GET /audience/segments/{segment_discriminator}': {
    access: 'account',
    call: (token) => server.request('GET', `/audience/segments/${ids[ALPHA].segment}`, { token }),
  },
  'GET /audience/segments/{segment_discriminator}/versions/{version_id}': {
    access: 'account',
    call: async (token) => {
      const segment = (await server.request('GET', `/audience/segments/${ids[ALPHA].segment}`, { token: full })).body;
      return server.request('GET', `/audience/segments/${ids[ALPHA].segment}/versions/${segment.versions[0].id}`, {
        token,
      });
    },
  },
  'GET /audience/sections/{section_discriminator}/attributes': {
    access: 'section',
    call: (token, s) => server.request('GET', `/audience/sections/${s}/attributes`, { token }),
  },
  'GET /audience/sections/{section_discriminator}/events': {
    access: 'section',
    call: (token, s) => server.request('GET', `/audience/sections/${s}/events`, { token }),
  },
  'GET /audience/sections/{section_discriminator}/tags': {
    access: 'section',
    call: (token, s) => server.request('GET', `/audience/sections/${s}/tags`, { token }),
  },
  'POST /audience/sections/{section_discriminator}/tags': {
    access: 'section',
    call: (token, s) =>
      server.request('POST', `/audience/sections/${s}/tags`, { token, body: { name: `Tag ${crypto.randomUUID()}` } }),
  },
  'GET /audience/sections/{section_discriminator}/tags/{tag_discriminator}': {
    access: 'section',
    call: (token, s) => server.request('GET', `/audience/sections/${s}/tags/${NS}.tags.user-created.vip`, { token }),
  },
  'PUT /audience/sections/{section_discriminator}/tags/{tag_discriminator}': {
    access: 'section',
    call: (token, s) =>
      server.request('PUT', `/audience/sections/${s}/tags/${NS}.tags.user-created.vip`, {
        token,
        body: { name: 'VIP' },
      }),
  },
  'GET /v2/audience/sections/{section_discriminator}/topics': {
    access: 'section',
    call: (token, s) => server.request('GET', `/v2/audience/sections/${s}/topics`, { token }),
  },
  'GET /folders/topic/sections/{section_discriminator}/folders': {
    access: 'section',
    call: (token, s) => server.request('GET', `/folders/topic/sections/${s}/folders`, { token }),
  },
  'POST /audience/keyspaces/{keyspace_discriminator}/sections/{section_discriminator}/profiles': {
    access: 'section',
    call: (token, s) =>
      server.request('POST', `/audience/keyspaces/${EMAIL}/sections/${s}/profiles`, {
        token,
        body: { profile_key: `${crypto.randomUUID()}@example.com` },
      }),
  },
  'GET /audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/sections/{section_discriminator}/attributes':
    {
      access: 'section',
      call: async (token, s) => server.request('GET', `${profilePath(await profile(), s)}/attributes`, { token }),
    },
  'PATCH /audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/sections/{section_discriminator}/attributes':
    {
      access: 'section',
      call: async (token, s) =>
        server.request('PATCH', `${profilePath(await profile(), s)}/attributes`, {
          token,
          body: { [ids[s].score]: 5 },
        }),
    },
  'PATCH /v2/audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/sections/{section_discriminator}/attributes':
    {
      access: 'section',
      call: async (token, s) =>
        server.request('PATCH', `/v2${profilePath(await profile(), s)}/attributes`, {
          token,
          body: { [`${NS}.attributes.user-created.score`]: 5 },
        }),
    },
  'DELETE /audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/sections/{section_discriminator}/attributes/{version_id}':
    {
      access: 'section',
      call: async (token, s) =>
        server.request('DELETE', `${profilePath(await profile(), s)}/attributes/${ids[s].score}`, { token }),
    },
  'DELETE /v2/audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/sections/{section_discriminator}/attributes/{attribute_discriminator}':
    {
      access: 'section',
      call: async (token, s) =>
        server.request(
          'DELETE',
          `/v2${profilePath(await profile(), s)}/attributes/${NS}.attributes.user-created.score`,
          { token },
        ),
    },
  'GET /audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/sections/{section_discriminator}/tags': {
    access: 'section',
    call: async (token, s) => server.request('GET', `${profilePath(await profile(), s)}/tags`, { token }),
  },
  'PATCH /audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/sections/{section_discriminator}/tags': {
    access: 'section',
    call: async (token, s) =>
      server.request('PATCH', `${profilePath(await profile(), s)}/tags`, {
        token,
        body: { [`${NS}.tags.user-created.vip`]: true },
      }),
  },
  'GET /audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/sections/{section_discriminator}/events': {
    access: 'section',
    call: async (token, s) => server.request('GET', `${profilePath(await profile(), s)}/events`, { token }),
  },
  'POST /audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/sections/{section_discriminator}/events': {
    access: 'section',
    call: async (token, s) =>
      server.request('POST', `${profilePath(await profile(), s)}/events`, {
        token,
        body: { items: [{ event_time: '2026-01-01T00:00:00Z', version_id: ids[s].event, data: { url: 'https://x' } }] },
      }),
  },
  'GET /v2/audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/sections/{section_discriminator}/consents':
    {
      access: 'section',
      call: async (token, s) => server.request('GET', `/v2${profilePath(await profile(), s)}/consents`, { token }),
    },
  'POST /v2/audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/sections/{section_discriminator}/consents':
    {
      access: 'section',
      call: async (token, s) =>
        server.request('POST', `/v2${profilePath(await profile(), s)}/consents`, {
          token,
          body: { topic_discriminator: NEWS, channel_discriminator: EMAIL_CHANNEL, type: 'opt-out', reason: 'test' },
        }),
    },
  'POST /audience/sections/{section_discriminator}/imports': {
    access: 'section',
    call: (token, s) => server.request('POST', `/audience/sections/${s}/imports`, { token, body: importBody(1, s) }),
  },
  'POST /v2/audience/sections/{section_discriminator}/imports': {
    access: 'section',
    call: (token, s) => server.request('POST', `/v2/audience/sections/${s}/imports`, { token, body: importBody(2, s) }),
  },
  'GET /audience/sections/{section_discriminator}/imports/{import_id}': {
    access: 'section',
    call: async (token, s) => {
      const created = await server.request('POST', `/v2/audience/sections/${s}/imports`, {
        token: full,
        body: importBody(2, s),
      });
      return server.request('GET', `/audience/sections/${s}/imports/${created.body.import_id}`, { token });
    },
  },
  'POST /audience/sections/{section_discriminator}/segments/{segment_discriminator}/trend': {
    access: 'section',
    call: (token, s) =>
      server.request('POST', `/audience/sections/${s}/segments/${ids[s].segment}/trend`, {
        token,
        body: { sampling_points: ['2026-01-01T00:00:00Z'], timezone: 'UTC' },
      }),
  },
  // The section of a count's body, and every section its AQL reads.
  'POST /audience/profiles/reports/segments/count': {
    access: 'section',
    call: (token, s) =>
      server.request('POST', '/audience/profiles/reports/segments/count', {
        token,
        body: { section_discriminator: ALPHA, segment: { timezone: 'UTC', segment_discriminator: ids[s].segment } },
      }),
  },
  // Every segment an evaluation names.
  'POST /audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/evaluations': {
    access: 'section',
    call: async (token, s) =>
      server.request('POST', `/audience/keyspaces/${EMAIL}/profiles/${await profile()}/evaluations`, {
        token,
        body: { segments: [{ discriminator: ids[s].segment }], time_zone: 'UTC' },
      }),
  },
  // The legacy consent routes (docs/consents.md); a section's root topic folder is its first consent list.
  'GET /audience/sections/{section_discriminator}/consent-lists': {
    access: 'section',
    call: (token, s) => server.request('GET', `/audience/sections/${s}/consent-lists`, { token }),
  },
  'GET /audience/sections/{section_discriminator}/consent-lists/{consent_list_discriminator}/topics': {
    access: 'section',
    call: (token, s) => server.request('GET', `/audience/sections/${s}/consent-lists/${ROOT_LIST}/topics`, { token }),
  },
  'POST /audience/channels/{channel_discriminator}/addresses/{address}/consents': {
    access: 'section',
    call: async (token, s) =>
      server.request('POST', `/audience/channels/${EMAIL_CHANNEL}/addresses/${await profile()}/consents`, {
        token,
        body: { section_discriminator: s, topic_discriminator: NEWS, type: 'opt-in' },
      }),
  },
  'GET /audience/channels/{channel_discriminator}/addresses/{address}/consents/sections/{section_discriminator}/consent-lists/{consent_list_discriminator}/evaluations':
    {
      access: 'section',
      call: async (token, s) =>
        server.request(
          'GET',
          `/audience/channels/${EMAIL_CHANNEL}/addresses/${await profile()}/consents/sections/${s}/consent-lists/${ROOT_LIST}/evaluations`,
          { token },
        ),
    },
  'POST /audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/sections/{section_discriminator}/subscriptions':
    {
      access: 'section',
      call: async (token, s) =>
        server.request('POST', `${profilePath(await profile(), s)}/subscriptions`, {
          token,
          body: { topic_discriminator: NEWS },
        }),
    },
  'DELETE /audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}': {
    access: 'every-section',
    call: async (token) =>
      server.request('DELETE', `/audience/keyspaces/${EMAIL}/profiles/${await profile()}`, { token }),
  },
  'PUT /audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/locks': {
    access: 'every-section',
    call: async (token) =>
      server.request('PUT', `/audience/keyspaces/${EMAIL}/profiles/${await profile()}/locks`, { token }),
  },
  'PUT /audience/profiles/merges': {
    access: 'every-section',
    call: async (token) =>
      server.request('PUT', '/audience/profiles/merges', {
        token,
        body: {
          profiles: [
            { keyspace_discriminator: EMAIL, profile_key: await profile() },
            { keyspace_discriminator: WEB, profile_key: crypto.randomUUID() },
          ],
        },
      }),
  },
  'DELETE /audience/profiles/merges/keyspaces/{keyspace_discriminator}/profiles/{profile_key}': {
    access: 'every-section',
    call: async (token) => {
      const cookie = crypto.randomUUID();
      await server.request('PUT', '/audience/profiles/merges', {
        token: full,
        body: {
          profiles: [
            { keyspace_discriminator: EMAIL, profile_key: await profile() },
            { keyspace_discriminator: WEB, profile_key: cookie },
          ],
        },
      });
      return server.request('DELETE', `/audience/profiles/merges/keyspaces/${WEB}/profiles/${cookie}`, { token });
    },
  },
  'PUT /audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/sections/{section_discriminator}': {
    access: 'every-section',
    call: async (token, s) => {
      const key = await profile();
      const other = `${crypto.randomUUID()}@example.com`;
      // Version 1 writes the section's address without changing the profile key, as a switch needs.
      await server.request('PATCH', `${profilePath(key, s)}/attributes`, {
        token: full,
        body: { [ids[s].email]: other },
      });
      return server.request('PUT', profilePath(key, s), {
        token,
        body: {
          from: { keyspace_discriminator: EMAIL, profile_key: key },
          to: { keyspace_discriminator: EMAIL, profile_key: other },
        },
      });
    },
  },
  'DELETE /v2/audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/consents/opt-out-all': {
    access: 'every-section',
    call: async (token) =>
      server.request('DELETE', `/v2/audience/keyspaces/${EMAIL}/profiles/${await profile()}/consents/opt-out-all`, {
        token,
      }),
  },
  // Data exports and their poll URLs need a key granted every section (SPEC §7.3, EXP-41).
  'POST /audience/profiles/reports/consents': {
    access: 'every-section',
    call: (token) => server.request('POST', '/audience/profiles/reports/consents', { token, body: exportBody }),
  },
  'POST /audience/profiles/reports/consents/count': {
    access: 'every-section',
    call: (token) => server.request('POST', '/audience/profiles/reports/consents/count', { token, body: exportBody }),
  },
  'POST /audience/profiles/reports/duplicates': {
    access: 'every-section',
    call: (token) =>
      server.request('POST', '/audience/profiles/reports/duplicates', {
        token,
        body: { section_discriminator: ALPHA, find_duplicates_by_attribute_version_id: ids[ALPHA].email },
      }),
  },
  'POST /audience/profiles/reports/segments': {
    access: 'every-section',
    call: (token) =>
      server.request('POST', '/audience/profiles/reports/segments', {
        token,
        body: { section_discriminator: ALPHA, segment: { timezone: 'UTC', segment_discriminator: ids[ALPHA].segment } },
      }),
  },
  'POST /audience/profiles/export-single/{export_key}': {
    access: 'every-section',
    call: async (token) =>
      server.request('POST', `/audience/profiles/export-single/${await exportKey()}`, {
        token,
        body: { callback_url: receiver.url() },
      }),
  },
  'GET /audience/profiles/export-single/accounts/{account_id}/definitions/{export_id}': {
    access: 'every-section',
    call: async (token) => server.request('GET', await readySingleExport(), { token }),
  },
  'POST /audience/profiles/exports': {
    access: 'every-section',
    call: (token) =>
      server.request('POST', '/audience/profiles/exports', {
        token,
        body: { attributes: [{ section_discriminator: ALPHA, attribute_version_id: ids[ALPHA].score }] },
      }),
  },
  'GET /audience/profiles/reports/{report_id}': {
    access: 'every-section',
    call: async (token) => server.request('GET', await readyExport(), { token }),
  },
  // The email event export reaches the events of every section (SPEC §7.3); its file's URL carries its own credential, no bearer token.
  'POST /emails/reports': {
    access: 'every-section',
    call: (token) => server.request('POST', '/emails/reports', { token, body: { start_at: '2026-01-01T00:00:00Z' } }),
  },
  'GET /emails/reports/{report_id}': {
    access: 'every-section',
    call: async (token) =>
      server.request(
        'GET',
        `/emails/reports/${(await server.request('POST', '/emails/reports', { token: full, body: { start_at: '2026-01-01T00:00:00Z' } })).body.report_id}`,
        { token },
      ),
  },
  // Activities: each section's own activity of the kind.
  'GET /emails/sections/{section_discriminator}/activities': {
    access: 'section',
    call: (token, s) => server.request('GET', `/emails/sections/${s}/activities`, { token }),
  },
  'GET /emails/sections/{section_discriminator}/activities/{activity_id}': {
    access: 'section',
    call: (token, s) =>
      server.request('GET', `/emails/sections/${s}/activities/email-${s.split('.').at(-1)}`, { token }),
  },
  'GET /sms/sections/{section_discriminator}/activities': {
    access: 'section',
    call: (token, s) => server.request('GET', `/sms/sections/${s}/activities`, { token }),
  },
  'GET /sms/sections/{section_discriminator}/activities/{activity_id}': {
    access: 'section',
    call: (token, s) => server.request('GET', `/sms/sections/${s}/activities/sms-${s.split('.').at(-1)}`, { token }),
  },
  'GET /website/sections/{section_discriminator}/activities': {
    access: 'section',
    call: (token, s) => server.request('GET', `/website/sections/${s}/activities`, { token }),
  },
  'GET /website/sections/{section_discriminator}/activities/{activity_id}': {
    access: 'section',
    call: (token, s) =>
      server.request('GET', `/website/sections/${s}/activities/website-${s.split('.').at(-1)}`, { token }),
  },
  'GET /marketing-automation/sections/{section_discriminator}/activities': {
    access: 'section',
    call: (token, s) => server.request('GET', `/marketing-automation/sections/${s}/activities`, { token }),
  },
  'GET /marketing-automation/sections/{section_discriminator}/activities/{activity_id}': {
    access: 'section',
    call: (token, s) =>
      server.request(
        'GET',
        `/marketing-automation/sections/${s}/activities/marketing-automation-${s.split('.').at(-1)}`,
        { token },
      ),
  },
  'GET /forms-and-pages/sections/{section_discriminator}/activities': {
    access: 'section',
    call: (token, s) => server.request('GET', `/forms-and-pages/sections/${s}/activities`, { token }),
  },
  'GET /forms-and-pages/sections/{section_discriminator}/activities/{activity_id}': {
    access: 'section',
    call: (token, s) =>
      server.request('GET', `/forms-and-pages/sections/${s}/activities/forms-and-pages-${s.split('.').at(-1)}`, {
        token,
      }),
  },
  'GET /v2/audience/profiles/reports/{report_id}': {
    access: 'every-section',
    call: async (token) => server.request('GET', `/v2${await readyExport()}`, { token }),
  },
  'POST /emails/sections/{section_discriminator}/activities/transactional/{activity_id}/transactions': {
    access: 'section',
    call: async (token, section) =>
      server.request('POST', await transactionsPath(section), { token, body: sendBody() }),
  },
  'GET /emails/sections/{section_discriminator}/activities/{activity_id}/transactions/{transaction_id}': {
    access: 'section',
    call: async (token, section) => {
      const sent = await server.request('POST', await transactionsPath(section), { token: full, body: sendBody() });
      return server.request(
        'GET',
        `/emails/sections/${section}/activities/tx-${section.split('.').pop()}/transactions/${sent.body.id}`,
        { token },
      );
    },
  },
};

/** The operations of the public interface in the OpenAPI document, as `METHOD /path`. */
async function publicOperations(): Promise<string[]> {
  const doc = (await server.request('GET', '/openapi.json')).body as { paths: Record<string, Record<string, unknown>> };
  const operational = /^\/(admin|oauth|files|errors|docs|openapi\.json|healthz|readyz|metrics|\.well-known)\b/;
  return Object.entries(doc.paths)
    .filter(([path]) => !operational.test(path))
    .flatMap(([path, methods]) =>
      Object.keys(methods)
        .filter((m) => m !== 'head')
        .map((m) => `${m.toUpperCase()} ${path}`),
    );
}

describe('API keys restricted to sections', () => {
  it('the table names every operation of the public interface', async () => {
    const operations = await publicOperations();
    expect(operations.length).toBeGreaterThan(30);
    expect(operations.filter((o) => !(o in OPERATIONS))).toEqual([]);
  });

  for (const [name, operation] of Object.entries(OPERATIONS)) {
    it(`${name}: ${operation.access === 'section' ? '403 in another section, served in its own' : operation.access === 'every-section' ? '403: it reaches every section' : 'served'}`, async () => {
      if (operation.access === 'section') {
        const denied = await operation.call(alphaOnly, BETA);
        expectProblem(denied, 403, 'AUD-1107');
        expect(denied.body.detail).toMatch(new RegExp(`${BETA.replaceAll('.', '\\.')}|${ids[BETA].section}`));
        const own = await operation.call(alphaOnly, ALPHA);
        expect(own.status, own.text).toBeLessThan(400);
      } else if (operation.access === 'every-section') {
        expectProblem(await operation.call(alphaOnly, ALPHA), 403, 'AUD-1107');
      } else {
        const served = await operation.call(alphaOnly, ALPHA);
        expect(served.status, served.text).toBeLessThan(400);
      }
      // A key granted every section is served either way.
      const allowed = await operation.call(full, BETA);
      expect(allowed.status, allowed.text).toBeLessThan(400);
    });
  }

  it('lists only the sections the key is granted', async () => {
    const listed = (await server.request('GET', '/audience/sections', { token: alphaOnly })).body.items.map(
      (s: { discriminator: string }) => s.discriminator,
    );
    expect(listed).toEqual([ALPHA]);
  });

  it('refuses AQL that reads another section even when the body names its own: no count of data it may not read', async () => {
    const query = (section: string) => `section(${ids[section].section}).attribute(${ids[section].score}).gt(10)`;
    const text = `${query(ALPHA)} || ${query(BETA)}`;
    const denied = await server.request('POST', '/audience/profiles/reports/segments/count', {
      token: alphaOnly,
      body: { section_discriminator: ALPHA, segment: { timezone: 'UTC', segment_definition: text } },
    });
    const detail = expectProblem(denied, 403, 'AUD-1107');
    // The position of the Beta term's section id.
    expect(detail).toContain(
      `line 1, column ${text.indexOf(`section(${ids[BETA].section})`, query(ALPHA).length) + 'section('.length + 1}`,
    );
    const own = await server.request('POST', '/audience/profiles/reports/segments/count', {
      token: alphaOnly,
      body: { section_discriminator: ALPHA, segment: { timezone: 'UTC', segment_definition: query(ALPHA) } },
    });
    expect(own.status, own.text).toBe(200);
  });

  it('refuses an import that merges profiles: the merge joins data of every section', async () => {
    const body = {
      ...importBody(1, ALPHA),
      keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email', merge_profiles: true }],
    };
    expectProblem(
      await server.request('POST', `/audience/sections/${ALPHA}/imports`, { token: alphaOnly, body }),
      403,
      'AUD-1107',
    );
    expect((await server.request('POST', `/audience/sections/${ALPHA}/imports`, { token: full, body })).status).toBe(
      201,
    );
  });
});
