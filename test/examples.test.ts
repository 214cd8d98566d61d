import { afterAll, beforeAll, expect, it } from 'vitest';
import { TestServer } from './app.ts';
import { documentedOperations, MANIFEST, sendExample, type DocumentedOperation } from './example-account.ts';
import { declaredIn } from './problem-codes.ts';

// Every example of /openapi.json, sent to the service: the request body and the parameters of
// each operation, as /docs shows them and a reader copies them. The answer is one the operation
// documents, and never a refusal of the example itself: a 2xx, or a problem of a code the
// operation declares that says the account lacks what the example names (a profile, an export),
// never one that says the request is malformed. The account is made of what the examples name
// (test/example-account.ts), and the account's id is this account's.

/**
 * Answers that say the account lacks what an example names, not that the example is wrong: the
 * example's shape was accepted. Refusals of the example itself (400 malformed, missing or
 * conflicting fields, 413, 415) never are.
 */
const ABSENT = new Set([403, 404, 409, 410]);

/**
 * Examples still refused, by operation id, with why: made from the schemas by name, they name
 * what no account can have or break a rule the schema does not state. Each is to be given an
 * example of its own (the operation's `examples`), and leave this table.
 */
const KNOWN: Record<string, string> = {
  getErrorsByCode: 'the code example is "Example", not a code',
  getAudienceSectionsProfiles: 'the cursor example is "Example", not the next_cursor of a page the list answered',
  postOauthToken: 'the credentials of the example are no API key of any account',
  postAudienceSegments: 'the query example is "Example", not a query',
  postAudienceSegmentsVersions: 'the query example is "Example", not a query',
  putAudienceProfilesMerges: 'the example names one profile; a merge takes exactly two',
  postAudienceChannelsAddressesConsents: 'the consent type example is "Example"',
  postV2AudienceSectionsImports: 'the attribute version ids of the example are UUIDs, where ids are numbers',
  postAudienceProfilesReportsDuplicates: 'the attribute version id of the example is a UUID, where ids are numbers',
  postAudienceProfilesExports: "segment_filter.discriminator of the example is the section's discriminator",
  postEmailsReports: "segment_filter.discriminator of the example is the section's discriminator",
  postFilesUploads: 'a multipart form: the document shows no example of it',
  putAdminManifest: 'the example names the account "Shop", which several accounts of a run share',
  putAdminAccountsManifest: 'the limits example is keyed by an attribute discriminator, not a limit name',
  postAdminAccountsManifestPreview: 'the limits example is keyed by an attribute discriminator, not a limit name',
  postAdminAccountsActivities: 'the example carries description, not a field of email activities',
  putAdminAccountsActivitiesByActivityId: 'the example carries description, not a field of email activities',
  postAdminAccountsActivityEvents: 'the example names an activity id no account has (an error of the batch, 400)',
  getV2AudienceKeyspacesProfilesSectionsConsents: 'the consent_types example is "Example", not a consent type',
  getMarketingAutomationSectionsActivities: 'the trigger_types example is "Example", where only api is taken',
  patchAdminAccountsByAccountId: 'the example sets every limit to 0, which refuses every later request',
};

let server: TestServer;
let token: string;
let accountId: string;
let operations: DocumentedOperation[];

beforeAll(async () => {
  server = await TestServer.start();
  ({ token, accountId } = await server.login(MANIFEST));
  operations = await documentedOperations(server);
});
afterAll(async () => server?.close());

it('every example of /openapi.json is answered as its operation documents', async () => {
  // The operator's examples go last (they change the account), the account's deletion last of all.
  const rank = (op: DocumentedOperation) =>
    op.operationId === 'deleteAdminAccountsByAccountId' ? 2 : op.path.startsWith('/admin') ? 1 : 0;
  const ordered = [...operations].sort((a, b) => rank(a) - rank(b));
  const refused: string[] = [];
  for (const op of ordered) {
    if (KNOWN[op.operationId]) continue;
    const res = await sendExample(server, op, { accountId, token });
    // The per-second limits are spent by the clock of the test's server.
    server.clock.advance(2000);
    const documented = [String(res.status), `${String(res.status)[0]}XX`].some((s) => s in op.responses);
    const code = /\/errors\/(AUD-\d+)$/.exec(res.body?.type ?? '')?.[1];
    const accepted =
      res.status < 300 || (ABSENT.has(res.status) && code !== undefined && declaredIn(op.description).includes(code));
    if (!documented || !accepted)
      refused.push(`${op.method} ${op.path}: ${res.status} ${code ?? ''} ${res.body?.detail ?? ''}`);
  }
  expect(refused.join('\n')).toBe('');
});
