import { describe, it } from 'vitest';
import { defs, expectGolden } from '../../test/golden.ts';
import * as q from './queries.ts';

/**
 * Golden statements of profile writes, segment evaluations and imports (test/golden.ts): for fixed
 * writes in fixed definitions, the whole statement each runs, with its values, in
 * `__snapshots__/<name>.sql`.
 */

const at = new Date('2026-01-15T12:00:00Z');
const [email] = defs.keyspaces;

describe('the statements of profile writes', () => {
  it('a patch of attributes and tags of one profile (tags, events, v1 and v2 attribute PATCHes in a transaction)', async () => {
    const statement = q.patchSectionDataStatement('7', {
      profileId: '1001',
      sectionId: '10',
      attributes: { '3301': 120, '3201': null },
      tags: { '41': true },
      at,
    });
    await expectGolden('patch-section-data', [statement], '__snapshots__/patch-section-data.sql');
  });

  it('patches of attributes by key, shared by the writes of one turn (the common attribute PATCH)', async () => {
    const statement = q.patchByKeysStatement('7', [
      { keyspaceId: '1', key: 'ann@example.com', sectionId: '10', attributes: { '3301': 120 }, changedAt: at },
      { keyspaceId: '1', key: 'bob@example.com', sectionId: '10', attributes: { '3201': null }, changedAt: at },
    ]);
    await expectGolden('patch-by-keys', [statement], '__snapshots__/patch-by-keys.sql');
  });
});

describe('the statement of a segment evaluation', () => {
  it('what an evaluation reads of a profile found by key, with the events of one version', async () => {
    await expectGolden(
      'evaluation',
      [q.factsByKeyStatement('7', email, 'ann@example.com', ['5101'])],
      '__snapshots__/evaluation.sql',
    );
  });
});

describe('the statements of an import batch', () => {
  it('new profiles, their identifiers, their first section data; patches of existing ones; events', async () => {
    await expectGolden(
      'import-batch',
      [
        q.insertProfilesStatement('7', ['e-1', 'e-2'], at),
        q.insertIdentifiersStatement('7', [
          { keyspaceId: '1', key: 'ann@example.com', profileId: '1001' },
          { keyspaceId: '1', key: 'bob@example.com', profileId: '1002' },
        ]),
        q.insertSectionDataStatement(
          '7',
          '10',
          [
            { profileId: '1001', attributes: { '3301': 7, '3201': null }, tags: { '41': true } },
            { profileId: '1002', attributes: {}, tags: { '41': false } },
          ],
          at,
        ),
        q.patchSectionDataBulkStatement(
          '7',
          '10',
          [{ profileId: '1003', attributes: { '3301': 9 }, tags: { '41': false } }],
          at,
        ),
        ...q.insertEventsStatements(
          '7',
          '10',
          [
            {
              profileId: '1001',
              versionId: '5101',
              eventTime: new Date('2026-01-14T08:00:00Z'),
              correlationId: 'c-1',
              data: { total: 12 },
            },
          ],
          at,
        ),
      ],
      '__snapshots__/import-batch.sql',
    );
  });
});
