/**
 * Migrations that convert data, run on a database of their own migrated up to the one before,
 * with rows of the old shape.
 */
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { listAttributeChangesByProfiles } from '../profiles/queries.ts';
import { withDatabase } from './embedded.ts';

const MIGRATIONS = path.join(import.meta.dirname, 'migrations');
const name = `test_migrate_${crypto.randomBytes(6).toString('hex')}`;
let db: pg.Pool;

beforeAll(async () => {
  const admin = new pg.Client({ connectionString: inject('databaseUrl') });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  db = new pg.Pool({ connectionString: withDatabase(inject('databaseUrl'), name), max: 1 });
});
afterAll(async () => {
  await db?.end();
  const admin = new pg.Client({ connectionString: inject('databaseUrl') });
  await admin.connect();
  await admin.query(`drop database if exists ${name}`);
  await admin.end();
});

/** Runs the migration files that `files` accepts, in order. */
async function run(files: (f: string) => boolean): Promise<void> {
  for (const file of (await fs.readdir(MIGRATIONS)).filter(files).sort())
    await db.query(await fs.readFile(path.join(MIGRATIONS, file), 'utf8'));
}

describe('migration 0015: attribute history of replaced values', () => {
  it('SPE-14, AQL-08: past values become closed spans, the last value of each attribute its current set time; the changes read as before', async () => {
    await run((f) => f < '0015');
    const {
      rows: [{ account_id: account }],
    } = await db.query("insert into accounts (name, region) values ('m', 'eu') returning account_id");
    const [a, b] = (
      await db.query("insert into profiles (account_id, export_key) values ($1, 'a'), ($1, 'b') returning profile_id", [
        account,
      ])
    ).rows.map((r) => r.profile_id as string);
    const t = (minute: number) => new Date(Date.UTC(2026, 0, 1, 0, minute));
    const micros = (minute: number) => t(minute).getTime() * 1000;
    // a: attribute 10 set, changed, cleared and set again; 11 set once; 12 set and cleared.
    // b, the canonical profile of a cluster: 10 set, then cleared after the merge (a null entry of
    // its own), and 13 taken over from the cluster on an unmerge, without history.
    await db.query(
      `insert into profile_sections (account_id, profile_id, section_id, attributes, cluster_attributes, updated_at) values
       ($1, $2, 1, '{"10": 4, "11": "x"}', null, $4), ($1, $3, 1, '{"10": null, "13": "w"}', '{}', $5)`,
      [account, a, b, t(4), t(5)],
    );
    const old: [string, number, unknown, number][] = [
      [a, 10, 1, 1],
      [a, 10, 2, 2],
      [a, 10, null, 3],
      [a, 10, 4, 4],
      [a, 11, 'x', 1],
      [a, 12, 5, 1],
      [a, 12, null, 2],
      [b, 10, 7, 1],
      [b, 10, null, 2],
    ];
    for (const [profile, version, value, minute] of old) {
      await db.query(
        'insert into attribute_history (account_id, profile_id, section_id, version_id, value, changed_at) values ($1, $2, 1, $3, $4, $5)',
        [account, profile, version, value === null ? null : JSON.stringify(value), t(minute)],
      );
    }

    await run((f) => f.startsWith('0015_'));

    const { rows: spans } = await db.query(
      'select profile_id, version_id::int as version, value, set_at, replaced_at from attribute_history order by profile_id, version_id, set_at',
    );
    expect(spans).toEqual([
      { profile_id: a, version: 10, value: 1, set_at: t(1), replaced_at: t(2) },
      { profile_id: a, version: 10, value: 2, set_at: t(2), replaced_at: t(3) },
      { profile_id: a, version: 12, value: 5, set_at: t(1), replaced_at: t(2) },
      { profile_id: b, version: 10, value: 7, set_at: t(1), replaced_at: t(2) },
    ]);
    const { rows: sections } = await db.query(
      'select profile_id, attribute_set_at from profile_sections order by profile_id',
    );
    expect(sections).toEqual([
      { profile_id: a, attribute_set_at: { 10: micros(4), 11: micros(1) } },
      { profile_id: b, attribute_set_at: { 10: micros(2), 13: micros(5) } },
    ]);
    // The changes as the single profile export reads them: the old rows, and the value without history at its row's time.
    const byTime = (x: { profile_id: string; version_id: string; changed_at: Date }, y: typeof x) =>
      x.changed_at.getTime() - y.changed_at.getTime() ||
      x.profile_id.localeCompare(y.profile_id) ||
      x.version_id.localeCompare(y.version_id);
    const changes = (await listAttributeChangesByProfiles(db, account, [a, b])).map((c) => ({
      ...c,
      section_id: String(c.section_id),
    }));
    expect(changes.toSorted(byTime)).toEqual(
      [
        ...old.map(([profile_id, version, value, minute]) => ({
          profile_id,
          section_id: '1',
          version_id: String(version),
          value,
          changed_at: t(minute),
        })),
        { profile_id: b, section_id: '1', version_id: '13', value: 'w', changed_at: t(5) },
      ].toSorted(byTime),
    );
  });
});
