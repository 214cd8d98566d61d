import type { Response } from './app.ts';
import { readWhen, STATE_BOUND_MS } from './until.ts';
import {
  ALPHA,
  EMAIL,
  EMAIL_CHANNEL,
  exportBody,
  exportKey,
  full,
  ids,
  importBody,
  NEWS,
  NS,
  profile,
  profilePath,
  readyExport,
  readySingleExport,
  receiver,
  ROOT_LIST,
  sendBody,
  server,
  transactionsPath,
  WEB,
} from './section-access.ts';

// Every operation of the public interface, how to call it in a section, and what a key restricted
// to another section meets (test/section-operations.test.ts checks each one, and that none is missing).

/**
 * How each operation meets a key restricted to Alpha: `section` operations answer 403 in Beta and
 * not in Alpha; `every-section` operations (they reach the data of every section) answer 403
 * whatever the section; `account` operations read no section data and answer as for any key.
 */
export type Access = 'section' | 'every-section' | 'account';
export interface Operation {
  access: Access;
  call: (token: string, section: string) => Promise<Response>;
}

export const OPERATIONS: Record<string, Operation> = {
  'GET /audience/account': {
    access: 'account',
    call: (token) => server.request('GET', '/audience/account', { token }),
  },
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
  'POST /audience/segments': {
    access: 'every-section',
    call: async (token) => {
      const segment = (await server.request('GET', `/audience/segments/${ids[ALPHA].segment}`, { token: full })).body;
      return server.request('POST', '/audience/segments', {
        token,
        body: { name: 'Restricted', query: segment.versions[0].query },
      });
    },
  },
  'POST /audience/segments/{segment_discriminator}/versions': {
    access: 'every-section',
    call: async (token) => {
      const segment = (await server.request('GET', `/audience/segments/${ids[ALPHA].segment}`, { token: full })).body;
      return server.request('POST', `/audience/segments/${ids[ALPHA].segment}/versions`, {
        token,
        body: { query: segment.versions[0].query },
      });
    },
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
  'GET /audience/sections/{section_discriminator}/profiles': {
    access: 'section',
    call: (token, s) => server.request('GET', `/audience/sections/${s}/profiles`, { token }),
  },
  'GET /audience/sections/{section_discriminator}/profiles/growth': {
    access: 'section',
    call: (token, s) => server.request('GET', `/audience/sections/${s}/profiles/growth`, { token }),
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
  'GET /audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/sections/{section_discriminator}/attributes/history':
    {
      access: 'section',
      call: async (token, s) =>
        server.request('GET', `${profilePath(await profile(), s)}/attributes/history`, { token }),
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
  'GET /audience/sections/{section_discriminator}/imports': {
    access: 'section',
    call: (token, s) => server.request('GET', `/audience/sections/${s}/imports`, { token }),
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
  // Live segments (docs/aql.md "Live segments"): the state reads as a count does; changing it takes every section.
  'GET /audience/segments/{segment_discriminator}/live': {
    access: 'section',
    call: (token, s) => server.request('GET', `/audience/segments/${ids[s].segment}/live`, { token }),
  },
  'PUT /audience/segments/{segment_discriminator}/live': {
    access: 'every-section',
    call: (token, s) =>
      server.request('PUT', `/audience/segments/${ids[s].segment}/live`, { token, body: { time_zone: 'UTC' } }),
  },
  'DELETE /audience/segments/{segment_discriminator}/live': {
    access: 'every-section',
    call: (token, s) => server.request('DELETE', `/audience/segments/${ids[s].segment}/live`, { token }),
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
  'GET /audience/profiles/merges/keyspaces/{keyspace_discriminator}/profiles/{profile_key}': {
    access: 'every-section',
    call: async (token) =>
      server.request('GET', `/audience/profiles/merges/keyspaces/${EMAIL}/profiles/${await profile()}`, { token }),
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
  'GET /audience/profiles/reports': {
    access: 'every-section',
    call: (token) => server.request('GET', '/audience/profiles/reports', { token }),
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
  // The service's own reads of an activity's events, for its console.
  ...Object.fromEntries(
    (['emails', 'sms', 'forms-and-pages'] as const).flatMap((path) => {
      const kind = path === 'emails' ? 'email' : path;
      return (['timeline', 'events'] as const).map((read): [string, Operation] => [
        `GET /${path}/sections/{section_discriminator}/activities/{activity_id}/${read}`,
        {
          access: 'section',
          call: (token, s) =>
            server.request('GET', `/${path}/sections/${s}/activities/${kind}-${s.split('.').at(-1)}/${read}`, {
              token,
            }),
        },
      ]);
    }),
  ),
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
  'GET /emails/sections/{section_discriminator}/activities/{activity_id}/transactions': {
    access: 'section',
    call: async (token, section) => {
      await transactionsPath(section);
      return server.request(
        'GET',
        `/emails/sections/${section}/activities/tx-${section.split('.').pop()}/transactions`,
        {
          token,
        },
      );
    },
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
  ...webhookOperations(),
};

/** The webhook operations: each reaches events of every section (a key of every section is served). */
function webhookOperations(): Record<string, Operation> {
  let endpoint: Promise<{ id: string; event: string }> | undefined;
  // One endpoint of the full key, with one delivery (the events carry no section: none is needed).
  const webhook = () =>
    (endpoint ??= (async () => {
      const created = await server.request('POST', '/webhooks', {
        token: full,
        body: { url: receiver.url('/webhook'), event_types: ['export.finished'] },
      });
      await readyExport();
      const list = await readWhen(
        'a delivery of the webhook',
        () => server.request('GET', `/webhooks/${created.body.id}/deliveries`, { token: full }),
        (res) => res.body.items?.length > 0,
        STATE_BOUND_MS,
      );
      return { id: created.body.id as string, event: list.body.items[0].event_id as string };
    })());
  const op = (method: string, path: string, make: (id: string, event: string) => [string, unknown?]) => ({
    access: 'every-section' as const,
    call: async (token: string) => {
      const { id, event } = await webhook();
      const [url, body] = make(id, event);
      return server.request(method, url, { token, ...(body === undefined ? {} : { body }) });
    },
  });
  let n = 0;
  return {
    'GET /webhooks': op('GET', '', () => ['/webhooks']),
    'POST /webhooks': op('POST', '', () => [
      '/webhooks',
      { url: `https://example.com/hook-${++n}`, event_types: ['profile.deleted'] },
    ]),
    'GET /webhooks/{webhook_id}': op('GET', '', (id) => [`/webhooks/${id}`]),
    'PATCH /webhooks/{webhook_id}': op('PATCH', '', (id) => [`/webhooks/${id}`, { description: 'changed' }]),
    'DELETE /webhooks/{webhook_id}': {
      access: 'every-section',
      call: async (token) => {
        const created = await server.request('POST', '/webhooks', {
          token: full,
          body: { url: `https://example.com/gone-${++n}`, event_types: ['profile.deleted'] },
        });
        return server.request('DELETE', `/webhooks/${created.body.id}`, { token });
      },
    },
    'POST /webhooks/{webhook_id}/secret': op('POST', '', (id) => [`/webhooks/${id}/secret`, { overlap_seconds: 60 }]),
    'GET /webhooks/{webhook_id}/deliveries': op('GET', '', (id) => [`/webhooks/${id}/deliveries`]),
    'GET /webhooks/{webhook_id}/deliveries/{event_id}': op('GET', '', (id, event) => [
      `/webhooks/${id}/deliveries/${event}`,
    ]),
    'POST /webhooks/{webhook_id}/deliveries/{event_id}/replay': op('POST', '', (id, event) => [
      `/webhooks/${id}/deliveries/${event}/replay`,
    ]),
    'POST /webhooks/{webhook_id}/replay': op('POST', '', (id) => [
      `/webhooks/${id}/replay`,
      { since: '2020-01-01T00:00:00Z', until: '2100-01-01T00:00:00Z' },
    ]),
  };
}
