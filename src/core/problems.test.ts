import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROBLEMS } from './problems.ts';

describe('the error code table', () => {
  it('ERR-04 keeps the published codes of the platform', () => {
    expect(PROBLEMS['AUD-0'].status).toBe(400);
    expect(PROBLEMS['AUD-1'].status).toBe(404);
    expect(PROBLEMS['AUD-2'].status).toBe(503);
    expect(PROBLEMS['AUD-4'].status).toBe(500);
    expect(PROBLEMS['AUD-8'].status).toBe(401);
    expect(PROBLEMS['AUD-9'].status).toBe(403);
  });

  it('is documented row for row in docs/errors.md', async () => {
    const doc = await fs.readFile(path.resolve(import.meta.dirname, '../../docs/errors.md'), 'utf8');
    const rows = [...doc.matchAll(/^\| (AUD-\d+) \| (\d{3}) \| (.+) \|$/gm)].map((m) => [m[1], Number(m[2]), m[3]]);
    expect(rows).toEqual(Object.entries(PROBLEMS).map(([code, p]) => [code, p.status, p.title]));
  });
});
