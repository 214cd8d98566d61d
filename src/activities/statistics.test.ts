import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { activityEvent, serverWithAccount, SHOP, type AccountAdmin } from '../../test/activities.ts';
import type { TestServer } from '../../test/app.ts';
import type { Manifest } from '../definitions/schemas.ts';
import { countSegment } from '../segments/segments.ts';
import { accountScope } from '../services.ts';
import { checkCounters } from './activities.ts';
import {
  EMAIL_AQL_KEYS,
  EMAIL_EVENT_TYPES,
  FORM_AQL_KEYS,
  FORM_EVENT_TYPES,
  SMS_AQL_KEYS,
  SMS_EVENT_TYPES,
} from './schemas.ts';

// Statistics and aql_queries (SPEC §2.14; ACT-05, ACT-09, ACT-19): over generated event sets, the
// counters equal a recount from the stored events and a count by hand, and each aql_queries
// string selects exactly the profiles its unique statistic counts.

const MANIFEST: Manifest = { sections: [{ name: 'Shop' }] };
const PROFILES = ['a', 'b', 'c', 'd', 'e', 'f'].map((p) => `${p}@example.com`);

let server: TestServer;
let accountId: string;
let token: string;
let admin: AccountAdmin;
let run = 0;
serverWithAccount(MANIFEST, (a) => {
  ({ server, accountId, token, admin } = a);
});

interface Generated {
  activity: number;
  type: string;
  profile: number;
  correlation: number;
}

/** The statistics by hand: events after removing repeats of (activity, type, correlation id), and their distinct profiles. */
function byHand(events: Generated[], activity: number) {
  const seen = new Map<string, Generated>();
  for (const e of events)
    if (e.activity === activity) seen.set(`${e.type}/${e.correlation}`, seen.get(`${e.type}/${e.correlation}`) ?? e);
  const of = (type: string) => [...seen.values()].filter((e) => e.type === type);
  return {
    events: (type: string) => of(type).length,
    profiles: (type: string) => new Set(of(type).map((e) => e.profile)).size,
  };
}

const KINDS = [
  { kind: 'email', types: EMAIL_EVENT_TYPES, aql: EMAIL_AQL_KEYS, path: '/emails' },
  { kind: 'email', types: EMAIL_EVENT_TYPES, aql: EMAIL_AQL_KEYS, path: '/emails' },
  { kind: 'sms', types: SMS_EVENT_TYPES, aql: SMS_AQL_KEYS, path: '/sms' },
  { kind: 'forms-and-pages', types: FORM_EVENT_TYPES, aql: FORM_AQL_KEYS, path: '/forms-and-pages' },
] as const;

const generatedEvent = fc.integer({ min: 0, max: KINDS.length - 1 }).chain((activity) =>
  fc.record({
    activity: fc.constant(activity),
    type: fc.constantFrom(...KINDS[activity].types),
    profile: fc.integer({ min: 0, max: PROFILES.length - 1 }),
    // Few correlation ids, so that repeats (a source sending again) happen.
    correlation: fc.integer({ min: 0, max: 12 }),
  }),
);

describe('statistics and aql_queries over generated events', () => {
  it('ACT-05, ACT-09, ACT-19: counters equal a recount and a count by hand; each aql_queries string counts its statistic', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(generatedEvent, { maxLength: 25 }), { minLength: 1, maxLength: 3 }),
        async (batches) => {
          run++;
          const ids = KINDS.map((k, i) => `run${run}-${i}`);
          for (const [i, k] of KINDS.entries()) {
            const put = await admin('PUT', `/activities/${ids[i]}`, {
              kind: k.kind,
              section_discriminator: SHOP,
              name: ids[i],
              status: 'sent',
            });
            expect(put.status, put.text).toBe(201);
          }
          for (const batch of batches) {
            const items = batch.map((e) =>
              activityEvent(ids[e.activity], e.type, PROFILES[e.profile], `c${e.correlation}`),
            );
            const res = await admin('POST', '/activity-events', items);
            expect(res.status, res.text).toBe(200);
          }
          const all = batches.flat();
          const scope = await accountScope(server.services, accountId);
          for (const [i, k] of KINDS.entries()) {
            const hand = byHand(all, i);
            const { kept, recounted } = await checkCounters(server.services.pool, scope, ids[i]);
            expect(kept).toEqual(recounted);
            for (const type of k.types) {
              const row = kept.find((r) => r.type === type);
              expect([Number(row?.events ?? 0), Number(row?.profiles ?? 0)]).toEqual([
                hand.events(type),
                hand.profiles(type),
              ]);
            }
            const read = await server.request(
              'GET',
              `${k.path}/sections/${SHOP}/activities/${ids[i]}?include_statistics=true`,
              { token },
            );
            expect(read.status, read.text).toBe(200);
            const statistics = read.body.statistics;
            expect(statistics === undefined).toBe(k.kind === 'forms-and-pages' || !all.some((e) => e.activity === i));
            for (const [key, type] of Object.entries(k.aql)) {
              const { profile_count } = await countSegment(server.services.pool, scope, {
                section_discriminator: SHOP,
                segment: { timezone: 'UTC', segment_definition: read.body.aql_queries[key] },
              });
              expect(profile_count).toBe(hand.profiles(type));
              if (statistics) {
                const unique =
                  k.kind === 'email' && (key === 'opens' || key === 'clicks')
                    ? statistics[`unique_${key}`]
                    : statistics[key];
                expect(unique).toBe(profile_count);
              }
            }
          }
        },
      ),
      { numRuns: 10 },
    );
  }, 300_000);
});
