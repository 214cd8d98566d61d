import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestServer, type Response } from './app.ts';
import { documentedOperations, MANIFEST, refusals, SECTION, type DocumentedOperation } from './example-account.ts';
import { NO_LIMITS } from './exports.ts';
import { builtIn, userCreated } from './names.ts';

// Declared = observed (test/declared-problems.ts), as in test/declared-codes.test.ts, for the
// refusals of the exports' and counts' own checks: their channels, topics, segments by name and
// columns, the single profile export's key and callback URL, and the pending place every export
// holds. Each operation is sent the request its example makes with one part changed, and must
// answer the code with a detail that names what was wrong.

let server: TestServer;
let account: { accountId: string; token: string };
let operations: DocumentedOperation[];
const { eachOf } = refusals(() => ({ server, account, operations }));

const EMAIL = builtIn('keyspaces', 'email');
const LOYAL = userCreated('segments', 'loyal-customers');
const VIP = userCreated('tags', 'vip');

const CONSENTS = 'postAudienceProfilesReportsConsents';
const COUNT = 'postAudienceProfilesReportsConsentsCount';
const DUPLICATES = 'postAudienceProfilesReportsDuplicates';
const SEGMENTS = 'postAudienceProfilesReportsSegments';
const SINGLE = 'postAudienceProfilesExportSingleByExportKey';

beforeAll(async () => {
  server = await TestServer.start();
  account = await server.login(MANIFEST);
  operations = await documentedOperations(server);
});
afterAll(async () => server?.close());

async function ok(res: Promise<Response>, status: number): Promise<Response> {
  const r = await res;
  expect(r.status, r.text).toBe(status);
  return r;
}

/** The version id of the attribute of the section named `name`, in the account of `token`. */
async function attributeVersion(token: string, name: string): Promise<string> {
  const { items } = (await ok(server.request('GET', `/audience/sections/${SECTION}/attributes`, { token }), 200)).body;
  return items.find((a: { name: string }) => a.name === name).versions[0].id;
}

/** A new profile with an email key in the section, in the account of `token`; answers its export key. */
async function exportKeyOf(token: string, email: string): Promise<string> {
  await ok(
    server.request('POST', `/audience/keyspaces/${EMAIL}/sections/${SECTION}/profiles`, {
      token,
      body: { profile_key: email },
    }),
    201,
  );
  const listed = await ok(
    server.request(
      'GET',
      `/audience/sections/${SECTION}/profiles?${new URLSearchParams({ keyspace: EMAIL, key_prefix: email })}`,
      {
        token,
      },
    ),
    200,
  );
  const keys: { keyspace_discriminator: string; profile_key: string }[] = listed.body.items[0].keys;
  return keys.find((k) => k.keyspace_discriminator === builtIn('keyspaces', 'export'))!.profile_key;
}

/**
 * A request each export of profiles accepts: its example; for the duplicate export, whose example
 * names ids no account has (test/examples.test.ts), the section and `city`, the version id of City.
 */
function accepted(op: DocumentedOperation, example: any, city: string): any {
  return op.operationId === DUPLICATES
    ? { section_discriminator: SECTION, find_duplicates_by_attribute_version_id: city }
    : example;
}

describe('one part of an export or count request refused by its checks, on the operations that take it', () => {
  /** The version id of City; of Balance, hidden once the tests start. */
  let city: string;
  let hidden: string;

  beforeAll(async () => {
    city = await attributeVersion(account.token, 'City');
    const balance = (flag: boolean) =>
      ok(
        server.admin('PUT', `/admin/accounts/${account.accountId}/manifest`, {
          sections: [
            { name: 'Shop', attributes: [{ name: 'Balance', hidden: flag, versions: [{ type: ['Number'] }] }] },
          ],
        }),
        200,
      );
    await balance(false);
    hidden = await attributeVersion(account.token, 'Balance');
    await balance(true);
  });

  /**
   * Sends each operation of `ids` its accepted request with `change` made to it (given the
   * operation), which must answer `code` naming `names`.
   */
  const refused = (code: string, ids: string[], change: (body: any, op: string) => unknown, names: string) =>
    eachOf(code, ids, (op) => ({ body: (example) => change(accepted(op, example, city), op.operationId) }), names);

  /** `segments` by name in the requests that take them, `segment` in the segment export's. */
  const segments = (byName: Record<string, unknown>, segment: Record<string, unknown>) => (body: any, op: string) =>
    op === SEGMENTS ? { ...body, segment: { ...body.segment, ...segment } } : { ...body, segments: byName };

  it('a channel the account does not have, or one without addresses in the section: 400 AUD-1607, AUD-1608', async () => {
    const none = 'com.vendor1.channels.pigeon';
    await refused('AUD-1607', [CONSENTS, COUNT, DUPLICATES], (b) => ({ ...b, channel_discriminator: none }), none);
    const web = builtIn('channels', 'web');
    await refused('AUD-1608', [CONSENTS, COUNT, DUPLICATES], (b) => ({ ...b, channel_discriminator: web }), web);
  });

  it('a topic the section does not have: 400 AUD-1610 naming topic_discriminators[0]', async () => {
    const none = userCreated('topics', 'none');
    await refused(
      'AUD-1610',
      [CONSENTS, COUNT, DUPLICATES],
      (b) => ({ ...b, topic_discriminators: [none] }),
      'topic_discriminators[0]',
    );
  });

  it('a stored segment the account does not have, or a time zone that is none: 400 AUD-1711, AUD-1712', async () => {
    const none = userCreated('segments', 'none');
    await refused(
      'AUD-1711',
      [CONSENTS, COUNT, DUPLICATES, SEGMENTS],
      segments({ timezone: 'UTC', segment_discriminators: { Gone: none } }, { segment_discriminator: none }),
      none,
    );
    const mars = 'Mars/Olympus_Mons';
    await refused(
      'AUD-1712',
      [CONSENTS, COUNT, DUPLICATES, SEGMENTS],
      segments({ timezone: mars, segment_discriminators: { Loyal: LOYAL } }, { timezone: mars }),
      mars,
    );
  });

  it('EXP-07: a filter that does not parse, or an empty segment name: 400 AUD-1906, AUD-1925', async () => {
    await refused(
      'AUD-1906',
      [CONSENTS, COUNT, DUPLICATES],
      (b) => ({ ...b, segments: { timezone: 'UTC', segment_discriminators: { Loyal: LOYAL }, filter: 'Loyal &' } }),
      'segments.filter',
    );
    await refused(
      'AUD-1925',
      [CONSENTS, COUNT, DUPLICATES],
      (b) => ({ ...b, segments: { timezone: 'UTC', segment_discriminators: { '': LOYAL } } }),
      'segment name',
    );
  });

  it('an attribute column the section does not have, or a hidden one: 400 AUD-1206, AUD-1211 naming the column', async () => {
    const column = (version: string) => (b: any) => ({
      ...b,
      attributes: [{ field_name: 'value', attribute_version_id: version }],
    });
    const ids = [CONSENTS, DUPLICATES, SEGMENTS];
    await refused('AUD-1206', ids, column('999999999'), 'attributes[0].attribute_version_id');
    await refused('AUD-1211', ids, column(hidden), 'attributes[0].attribute_version_id');
  });

  it('a tag column the section does not have, or two columns of one name: 400 AUD-1218, AUD-1908', async () => {
    const ids = [CONSENTS, DUPLICATES, SEGMENTS];
    const none = userCreated('tags', 'none');
    await refused(
      'AUD-1218',
      ids,
      (b) => ({ ...b, tags: [{ field_name: 'none', tag_discriminator: none }] }),
      'tags[0].tag_discriminator',
    );
    const vip = { field_name: 'vip', tag_discriminator: VIP };
    await refused('AUD-1908', ids, (b) => ({ ...b, tags: [vip, vip] }), 'tags[1].field_name');
  });
});

describe('the single profile export: its callback URL and export key', () => {
  it('SPE-04: a callback URL that is no URL though of the form of one (a port past 65535): 400 AUD-1922', async () => {
    await eachOf(
      'AUD-1922',
      [SINGLE],
      () => ({ body: (example: any) => ({ ...example, callback_url: 'https://shop.example:70000/hooks' }) }),
      'callback_url',
    );
  });

  it('ERR-05: the export key of a locked profile: 410 AUD-1202', async () => {
    const exportKey = await exportKeyOf(account.token, 'single-locked@example.org');
    await ok(
      server.request('PUT', `/audience/keyspaces/${EMAIL}/profiles/single-locked@example.org/locks`, {
        token: account.token,
      }),
      204,
    );
    await eachOf('AUD-1202', [SINGLE], () => ({ params: { export_key: exportKey } }), exportKey);
  });
});

describe('an account whose pending places are all taken', () => {
  it('LIM-11: every request that would hold one: 429 AUD-1905', async () => {
    const full = await server.login(MANIFEST, {
      ...NO_LIMITS,
      event_export_requests_per_minute: null,
      pending_exports: 0,
    });
    const city = await attributeVersion(full.token, 'City');
    const exportKey = await exportKeyOf(full.token, 'pending@example.org');
    const { eachOf: eachOfFull } = refusals(() => ({ server, account: full, operations }));
    /** The bodies the examples of the event exports do not make: theirs name a section as a segment. */
    const bodies: Record<string, unknown> = {
      postAudienceProfilesExports: {},
      postEmailsReports: { start_at: '2026-11-01T00:00:00Z' },
    };
    await eachOfFull(
      'AUD-1905',
      [CONSENTS, COUNT, DUPLICATES, SEGMENTS, SINGLE, 'postAudienceProfilesExports', 'postEmailsReports'],
      (op) => ({
        params: { export_key: exportKey },
        body: (example) => bodies[op.operationId] ?? accepted(op, example, city),
      }),
      'at most 0',
    );
  });
});
