/**
 * The count by consent agrees with the other two ways of counting a segment (EXP-16; issue:
 * "the count result agrees with /audience/profiles/reports/segments/count and with the in-memory
 * evaluator"): over generated populations and generated stored segments, the count's
 * `profile_count` for a generated filter over the segments' names is the number of profiles for
 * which the filter, computed here over the evaluator's verdicts (the evaluation route), holds; and
 * the count of each segment alone is the one POST /audience/profiles/reports/segments/count gives;
 * and the count per channel is the number of those for which maySend (consents area, profile by
 * profile) holds on one of the topics.
 *
 * Each fast-check run makes an account whose manifest holds three generated segments (attribute
 * and event terms, `&&` and `||`, event windows), stores a population straight into the database
 * (values sometimes missing or of another JSON type, profiles without a section row, events inside
 * and outside the windows, some profiles members of the first one's merge cluster, consents on two
 * topics given at different times, addresses written otherwise and some suppressed), then asks the
 * three through HTTP.
 */
import fc from 'fast-check';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { readWhen, STATE_BOUND_MS } from '../../test/until.ts';
import { serverWithPool, TestServer } from '../../test/app.ts';
import { exportHelpers, NO_LIMITS, pollPath, V } from '../../test/exports.ts';
import { maySend } from '../consents/consents.ts';
import type { Manifest } from '../definitions/schemas.ts';
import { locate } from '../profiles/locate.ts';
import { insertEventsBulk } from '../profiles/queries.ts';
import { accountScope } from '../services.ts';

const RUNS = 25;
const SHOP = `${V}.sections.user-created.shop`;
const EXPORT = `${V}.keyspaces.export`;
const CH_EMAIL = `${V}.channels.email`;
const NEWS = `${V}.topics.user-created.news`;
const OFFERS = `${V}.topics.user-created.offers`;
const TYPES = ['opt-in', 'confirmed-opt-in', 'opt-out'] as const;
const PURCHASE = `${V}.events.purchase`;
const NAMES = ['big', 'fresh', 'buyer'] as const;
const HOUR = 3_600_000;

let server: TestServer;
let db: pg.Pool;
serverWithPool({ worker: true }, (s, d) => {
  server = s;
  db = d;
});
const { ok } = exportHelpers(() => ({ server, db }));

// ---- Segments ----

type Term =
  | { kind: 'points'; comparator: 'eq' | 'neq' | 'lt' | 'lte' | 'gt' | 'gte'; value: number }
  | { kind: 'member'; comparator: 'eq' | 'neq'; value: boolean }
  | { kind: 'birthday'; comparator: 'lt' | 'gte'; value: string }
  | { kind: 'purchase'; amount: number | null; days: number | null };
type Query = Term | { kind: 'and' | 'or'; terms: Query[] };

const term: fc.Arbitrary<Term> = fc.oneof(
  fc.record({
    kind: fc.constant('points' as const),
    comparator: fc.constantFrom(
      'eq' as const,
      'neq' as const,
      'lt' as const,
      'lte' as const,
      'gt' as const,
      'gte' as const,
    ),
    value: fc.integer({ min: 0, max: 4 }),
  }),
  fc.record({
    kind: fc.constant('member' as const),
    comparator: fc.constantFrom('eq' as const, 'neq' as const),
    value: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant('birthday' as const),
    comparator: fc.constantFrom('lt' as const, 'gte' as const),
    value: fc.constantFrom('1980-01-01', '1995-06-15'),
  }),
  fc.record({
    kind: fc.constant('purchase' as const),
    amount: fc.option(fc.integer({ min: 0, max: 4 }), { nil: null }),
    days: fc.option(fc.constantFrom(1, 7, 30), { nil: null }),
  }),
);
const query: fc.Arbitrary<Query> = fc.oneof(
  { weight: 2, arbitrary: term },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constantFrom('and' as const, 'or' as const),
      terms: fc.array(term, { minLength: 2, maxLength: 3 }),
    }),
  },
);

/** A query as a manifest writes it (ids by placeholder). */
function render(q: Query): string {
  const attribute = (name: string) => `section({section}).attribute({attribute:${V}.attributes.user-created.${name}})`;
  switch (q.kind) {
    case 'and':
    case 'or':
      return `(${q.terms.map(render).join(q.kind === 'and' ? ' && ' : ' || ')})`;
    case 'points':
      return `${attribute('points')}.${q.comparator}(${q.value})`;
    case 'member':
      return `${attribute('member')}.${q.comparator}(${q.value})`;
    case 'birthday':
      return `${attribute('birthday')}.${q.comparator}("${q.value}")`;
    case 'purchase':
      return `section({section}).event({event:${PURCHASE}})${q.amount === null ? '' : `.eventData("amount").gte(${q.amount})`}${q.days === null ? '' : `.inLast("events.day", 0, ${q.days})`}`;
  }
}

// ---- Filters ----

type Filter =
  | { kind: 'name'; name: (typeof NAMES)[number] }
  | { kind: 'not'; operand: Filter }
  | { kind: 'and' | 'or'; terms: Filter[] };
const filter: fc.Arbitrary<Filter> = fc.letrec<{ f: Filter }>((tie) => ({
  f: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.record({ kind: fc.constant('name' as const), name: fc.constantFrom(...NAMES) }),
    fc.record({ kind: fc.constant('not' as const), operand: tie('f') }),
    fc.record({
      kind: fc.constantFrom('and' as const, 'or' as const),
      terms: fc.array(tie('f'), { minLength: 2, maxLength: 3 }),
    }),
  ),
})).f;

/** A filter as text, each operand in parentheses, with some white space. */
function filterText(f: Filter, space: string): string {
  switch (f.kind) {
    case 'name':
      return f.name;
    case 'not':
      return `!${filterText(f.operand, space)}`;
    case 'and':
    case 'or':
      return `(${f.terms.map((t) => filterText(t, space)).join(`${space}${f.kind === 'and' ? '&' : '|'}${space}`)})`;
  }
}

function holds(f: Filter, matches: Record<string, boolean>): boolean {
  switch (f.kind) {
    case 'name':
      return matches[f.name];
    case 'not':
      return !holds(f.operand, matches);
    case 'and':
      return f.terms.every((t) => holds(t, matches));
    case 'or':
      return f.terms.some((t) => holds(t, matches));
  }
}

// ---- Populations ----

interface Person {
  /** undefined: no value; a value of another JSON type now and then. */
  points: unknown;
  member: unknown;
  birthday: unknown;
  /** No row in the section at all (when it has no value either). */
  row: boolean;
  /** Merged into the first profile (not the first itself): a member, whose events and consents count for the first. */
  merged: boolean;
  /** Its email address (another case, white space around it, empty), and whether it is suppressed. */
  email: string | undefined;
  suppressed: boolean;
  /** Email consents on News (0) or Offers (1), given that many minutes ago. */
  consents: { topic: 0 | 1; type: (typeof TYPES)[number]; minutesAgo: number }[];
  purchases: { hoursAgo: number; amount: unknown }[];
}
const person: fc.Arbitrary<Person> = fc.record({
  points: fc.option(
    fc.oneof(
      { weight: 5, arbitrary: fc.integer({ min: 0, max: 4 }) },
      { weight: 1, arbitrary: fc.constantFrom('3', true, 2.5) },
    ),
    { nil: undefined, freq: 4 },
  ),
  member: fc.option(
    fc.oneof({ weight: 5, arbitrary: fc.boolean() }, { weight: 1, arbitrary: fc.constantFrom('true', 1) }),
    { nil: undefined, freq: 4 },
  ),
  birthday: fc.option(fc.constantFrom('1970-03-01', '1980-01-01', '1990-12-31', '1995-06-15', '2001-01-01', 'soon'), {
    nil: undefined,
    freq: 4,
  }),
  row: fc.boolean(),
  merged: fc.oneof({ weight: 2, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
  email: fc.option(fc.constantFrom('a@x.io', 'B@X.io', ' c@x.io ', '', 'd@x.io'), { nil: undefined, freq: 5 }),
  suppressed: fc.oneof({ weight: 4, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
  consents: fc.array(
    fc.record({
      topic: fc.constantFrom(0 as const, 1 as const),
      type: fc.constantFrom(...TYPES),
      minutesAgo: fc.integer({ min: 0, max: 3 }),
    }),
    { maxLength: 4 },
  ),
  // Hours ago: well inside or well outside the windows of 1, 7 and 30 days.
  purchases: fc.array(
    fc.record({
      hoursAgo: fc.constantFrom(2, 30, 100, 300, 1000),
      amount: fc.oneof(fc.integer({ min: 0, max: 4 }), fc.constant('2')),
    }),
    { maxLength: 3 },
  ),
});

/** Stores the people as the account's profiles, straight into the database; answers their export keys. */
async function store(accountId: string, people: Person[], now: number): Promise<string[]> {
  const ids = (
    await db.query<{ kind: string; discriminator: string; id: string }>(
      `select 'section' as kind, discriminator, section_id::text as id from sections where account_id = $1::bigint
     union all select 'attribute', a.discriminator, v.version_id::text from attributes a join attribute_versions v using (account_id, attribute_id) where a.account_id = $1::bigint
     union all select 'event', e.discriminator, v.version_id::text from events e join event_versions v using (account_id, event_id) where e.account_id = $1::bigint`,
      [accountId],
    )
  ).rows;
  const id = (kind: string, discriminator: string) =>
    ids.find((r) => r.kind === kind && r.discriminator === discriminator)!.id;
  const section = id('section', SHOP);
  const { rows } = await db.query<{ export_key: string; profile_id: string }>(
    `insert into profiles (account_id, export_key) select $1::bigint, 'count-' || n from generate_series(1, $2::int) n returning export_key, profile_id::text`,
    [accountId, people.length],
  );
  // Their export keys, which the evaluation route locates them by (no identifier rows: migration 0016).
  const keys = people.map((_, i) => `count-${i + 1}`);
  const profileOf = new Map(rows.map((r) => [r.export_key, r.profile_id]));
  for (const [i, p] of people.entries()) {
    const profile = profileOf.get(keys[i])!;
    const values = Object.fromEntries(
      (
        [
          ['user-created.points', p.points],
          ['user-created.member', p.member],
          ['user-created.birthday', p.birthday],
          ['email', p.email],
        ] as const
      )
        .filter(([, x]) => x !== undefined)
        .map(([name, x]) => [id('attribute', `${V}.attributes.${name}`), x]),
    );
    if (p.row || Object.keys(values).length > 0) {
      await db.query(
        'insert into profile_sections (account_id, profile_id, section_id, attributes) values ($1::bigint, $2::bigint, $3::bigint, $4)',
        [accountId, profile, section, values],
      );
    }
    for (const consent of p.consents) {
      await db.query(
        `insert into consents (account_id, profile_id, topic_id, channel_id, section_id, type, reason, source, address, modified_at)
         select $1::bigint, $2::bigint, t.topic_id, c.channel_id, $3::bigint, $5, 'test', 'test', null, $6
         from topics t, channels c where t.account_id = $1::bigint and t.discriminator = $4 and c.account_id = $1::bigint and c.discriminator = $7
         on conflict (account_id, profile_id, topic_id, channel_id) do update set type = excluded.type, modified_at = excluded.modified_at`,
        [
          accountId,
          profile,
          section,
          [NEWS, OFFERS][consent.topic],
          consent.type,
          new Date(now - consent.minutesAgo * 60_000),
          CH_EMAIL,
        ],
      );
    }
    if (p.suppressed && p.email) {
      await db.query(
        `insert into suppressions (account_id, channel_id, address, reason) select $1::bigint, channel_id, $2, 'Hard bounce' from channels where account_id = $1::bigint and discriminator = $3 on conflict do nothing`,
        [accountId, p.email.trim().toLowerCase(), CH_EMAIL],
      );
    }
    // Through the service's statement, which also keeps the profile's sums of events.
    if (p.purchases.length > 0)
      await insertEventsBulk(
        db,
        accountId,
        section,
        p.purchases.map((purchase) => ({
          profileId: profile,
          versionId: id('event', PURCHASE),
          eventTime: new Date(now - purchase.hoursAgo * HOUR),
          correlationId: 'count',
          data: { amount: purchase.amount },
        })),
        new Date(now),
      );
  }
  // A merge cluster, as a merge leaves it for what is judged here: members point to their canonical
  // profile, whose events are the cluster's.
  const members = people.flatMap((p, i) => (p.merged && i > 0 ? [profileOf.get(keys[i])!] : []));
  await db.query(
    'update profiles set canonical_id = $2::bigint where account_id = $1::bigint and profile_id = any($3::bigint[])',
    [accountId, profileOf.get(keys[0]), members],
  );
  return keys;
}

const manifest = (queries: Query[]): Manifest => ({
  sections: [
    {
      name: 'Shop',
      attributes: [
        { name: 'Points', versions: [{ type: ['Number'] }] },
        { name: 'Member', versions: [{ type: ['True/False'] }] },
        { name: 'Birthday', versions: [{ type: ['Date'] }] },
      ],
      events: [
        { name: 'Purchase', discriminator: PURCHASE, versions: [{ type: [{ name: 'amount', type: 'Number' }] }] },
      ],
      topics: [{ name: 'News' }, { name: 'Offers' }],
    },
  ],
  segments: queries.map((q, i) => ({ name: NAMES[i], section: SHOP, versions: [{ query: render(q) }] })),
});
const segmentOf = (name: string) => `${V}.segments.user-created.${name}`;

/** The result of a count by consent, through HTTP: requested, then polled until ready. */
async function consentCount(token: string, body: unknown): Promise<Record<string, number>> {
  const created = await ok(server.request('POST', '/audience/profiles/reports/consents/count', { token, body }), 201);
  const res = await readWhen(
    'the count ready',
    () => server.request('GET', pollPath(created.body.poll_url), { token }),
    (r) => r.status !== 404,
    STATE_BOUND_MS,
  );
  expect(res.status, res.text).toBe(200);
  return res.body;
}

describe('the count by consent, the segment count and the evaluator agree', () => {
  it(
    'EXP-07 EXP-14 EXP-15 EXP-16 CONS-23: over generated populations, segments, filters and consents',
    { timeout: 300_000 },
    async () => {
      let cases = 0;
      let selectedSome = 0;
      let contacted = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.tuple(query, query, query),
          fc.array(person, { minLength: 5, maxLength: 20 }),
          filter,
          fc.constantFrom('', ' ', '  '),
          async (queries, people, f, space) => {
            const { accountId, token } = await server.login(manifest(queries), NO_LIMITS);
            const keys = await store(accountId, people, server.clock.now);
            // The evaluator's verdicts, through the evaluation route, per profile and segment; and
            // maySend (consents area, profile by profile) on either topic by email.
            const scope = await accountScope(server.services, accountId);
            const verdicts: Record<string, boolean>[] = [];
            const sendable: boolean[] = [];
            for (const [i, key] of keys.entries()) {
              // Counted are canonical profiles: a member is judged as its cluster, through the first.
              if (people[i].merged && i > 0) continue;
              const res = await ok(
                server.request('POST', `/audience/keyspaces/${EXPORT}/profiles/${key}/evaluations`, {
                  token,
                  body: { segments: NAMES.map((n) => ({ discriminator: segmentOf(n) })), time_zone: 'UTC' },
                }),
                200,
              );
              verdicts.push(
                Object.fromEntries(NAMES.map((n) => [n, res.body.matches.segments[segmentOf(n)] as boolean])),
              );
              const { canonicalId } = await locate(server.services.pool, scope, {
                keyspace_discriminator: EXPORT,
                profile_key: key,
              });
              sendable.push(
                (await maySend(server.services.pool, scope, canonicalId, {
                  topic_discriminator: NEWS,
                  channel_discriminator: CH_EMAIL,
                  section_discriminator: SHOP,
                })) ||
                  (await maySend(server.services.pool, scope, canonicalId, {
                    topic_discriminator: OFFERS,
                    channel_discriminator: CH_EMAIL,
                    section_discriminator: SHOP,
                  })),
              );
            }
            const base = {
              section_discriminator: SHOP,
              topic_discriminators: [NEWS, OFFERS],
              channels: [{ field_name: 'mail', channel_discriminator: CH_EMAIL }],
            };
            const segments = Object.fromEntries(NAMES.map((n) => [n, segmentOf(n)]));
            // Each segment alone: the count by consent, the segment count route and the evaluator.
            for (const name of NAMES) {
              const direct = await ok(
                server.request('POST', '/audience/profiles/reports/segments/count', {
                  token,
                  body: {
                    section_discriminator: SHOP,
                    segment: { timezone: 'UTC', segment_discriminator: segmentOf(name) },
                  },
                }),
                200,
              );
              const byConsent = await consentCount(token, {
                ...base,
                segments: { timezone: 'UTC', segment_discriminators: { [name]: segmentOf(name) } },
              });
              const evaluated = verdicts.filter((v) => v[name]).length;
              expect(
                {
                  route: direct.body.profile_count,
                  consent: byConsent.profile_count,
                  total: byConsent.total_profile_count,
                },
                `${name}: ${render(queries[NAMES.indexOf(name)])}`,
              ).toEqual({ route: evaluated, consent: evaluated, total: evaluated });
            }
            // The filter over the three, and no filter (any of them).
            const text = filterText(f, space);
            const filtered = await consentCount(token, {
              ...base,
              segments: { timezone: 'UTC', segment_discriminators: segments, filter: text },
            });
            const expected = verdicts.filter((v) => holds(f, v)).length;
            expect(filtered.profile_count, `filter ${text} over ${queries.map(render).join(' ; ')}`).toBe(expected);
            expect(filtered.total_profile_count).toBe(expected);
            // Of them, those that may be contacted by email (CONS-23: suppression wins over consent).
            expect(filtered.mail, `mail, filter ${text}`).toBe(
              verdicts.filter((v, i) => holds(f, v) && sendable[i]).length,
            );
            if (filtered.mail > 0) contacted++;
            const any = await consentCount(token, {
              ...base,
              segments: { timezone: 'UTC', segment_discriminators: segments },
            });
            expect(any.profile_count).toBe(verdicts.filter((v) => NAMES.some((n) => v[n])).length);
            cases++;
            if (expected > 0 && expected < verdicts.length) selectedSome++;
          },
        ),
        { numRuns: RUNS },
      );
      expect(cases).toBeGreaterThanOrEqual(RUNS);
      // Not vacuous: some filters selected some profiles and left others.
      expect(selectedSome).toBeGreaterThan(0);
      expect(contacted).toBeGreaterThan(0);
    },
  );
});
