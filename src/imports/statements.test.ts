import { describe, it } from 'vitest';
import { expectGolden } from '../../test/golden.ts';
import * as q from './queries.ts';

/**
 * Golden statements of the imports' own table (test/golden.ts): the whole statement each
 * assembles, with its values, in `__snapshots__/<name>.sql`. The batches' writes of profiles are
 * in src/profiles/statements.test.ts; the HTTP tests of imports run all of them.
 */

const importId = '0b3a4c1e-6f0d-4b7e-9a51-2f1d7c9e8a10';

describe('the statements of an import', () => {
  it('finds one, locked for its transaction or not, and lists those of a section', async () => {
    await expectGolden(
      'import-reads',
      [
        q.findImportStatement('7', importId, false),
        q.findImportStatement('7', importId, true),
        q.listImportsStatement('7', '10', 50),
      ],
      '__snapshots__/import-reads.sql',
    );
  });

  it('sets its status, with the end time once it is finished', async () => {
    await expectGolden(
      'import-status',
      [
        q.setImportStatusStatement('7', importId, 'in_progress', null),
        q.setImportStatusStatement('7', importId, 'error', 'The file is not valid CSV'),
      ],
      '__snapshots__/import-status.sql',
    );
  });

  it("records a lane's batch: its counters, then its failed rows when it has some", async () => {
    const batch = { lane: 2, rowsDone: 1500, found: 500, new: 120, updated: 300, notChanged: 78, failures: [] };
    await expectGolden(
      'import-batch-record',
      [
        ...q.recordImportBatchStatements('7', importId, batch),
        ...q.recordImportBatchStatements('7', importId, {
          ...batch,
          failures: [
            { line: 17, reason: 'column "points": "many" is not a number' },
            { line: 42, reason: 'no key: column "email" is empty' },
          ],
        }),
      ],
      '__snapshots__/import-batch-record.sql',
    );
  });
});
