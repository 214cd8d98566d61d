import { describe, expect, it } from 'vitest';
import { scope } from '../../test/golden.ts';
import { EXPORT_KINDS, type BodyOf, type ExportKindName } from './kinds.ts';

/**
 * Golden statements: for a fixed request of each kind in fixed definitions, the whole statement
 * its plan runs, with its values, in `__snapshots__/<kind>.sql`, so that a reader sees each
 * export's SQL in one piece and a change to it shows in review. (The HTTP tests of each kind run
 * these statements against PostgreSQL; this one only prints them.)
 */

/** A fixed request of each kind, using most of what it takes. */
const requests: { [K in ExportKindName]: BodyOf<K> } = {
  consents: {
    section_discriminator: 'shop',
    topic_discriminators: ['news'],
    channels: [
      { field_name: 'mail', channel_discriminator: 'email' },
      { field_name: 'phone', channel_discriminator: 'sms' },
    ],
    segments: { timezone: 'Europe/Oslo', segment_discriminators: { big: 'big' }, filter: 'big' },
    duplicate_address_filter: 'oldest',
    attributes: [{ field_name: 'points', attribute_version_id: '3301' }],
    tags: [{ field_name: 'vip', tag_discriminator: 'vip' }],
    limit: 10,
    exclude_unsubscribed_profiles: true,
  },
  'consents-count': {
    section_discriminator: 'shop',
    topic_discriminators: ['news'],
    channels: [{ field_name: 'mail', channel_discriminator: 'email' }],
    segments: { timezone: 'UTC', segment_discriminators: { big: 'big' } },
  },
  duplicates: {
    section_discriminator: 'shop',
    find_duplicates_by_attribute_version_id: '3101',
    topic_discriminators: ['news'],
    channel_discriminator: 'email',
    segments: { timezone: 'UTC', segment_definitions: { small: 'section(10).attribute(3301).lt(5)' } },
    attributes: [{ field_name: 'points', attribute_version_id: '3301' }],
    limit: 5,
  },
  segments: {
    section_discriminator: 'shop',
    segment: { timezone: 'UTC', segment_discriminator: 'big' },
    known_profiles: true,
    attributes: [{ field_name: 'points', attribute_version_id: '3301' }],
    tags: [{ field_name: 'vip', tag_discriminator: 'vip' }],
  },
  events: {
    segment_filter: { timezone: 'UTC', discriminator: 'big' },
    attributes: [{ section_discriminator: 'shop', attribute_version_id: '3301' }],
    tags: [{ section_discriminator: 'shop', tag_discriminator: 'vip' }],
    events: { start_at: '2026-01-01T00:00:00Z', types: [{ section_discriminator: 'shop', event_version_id: '5101' }] },
  },
  'email-events': {
    start_at: '2026-01-01T00:00:00Z',
    end_at: '2026-02-01T00:00:00Z',
    segment_filter: { timezone: 'UTC', discriminator: 'big' },
    additional_attribute_mappings: [
      { field_name: 'points', section_discriminator: 'shop', attribute_version_id: '3301' },
    ],
    additional_tag_mappings: [{ field_name: 'vip', section_discriminator: 'shop', tag_discriminator: 'vip' }],
  },
};

describe('the statement of each export kind', () => {
  for (const name of Object.keys(EXPORT_KINDS) as ExportKindName[]) {
    it(`${name}: its statement for a fixed request, whole`, async () => {
      const kind = EXPORT_KINDS[name] as (typeof EXPORT_KINDS)[ExportKindName];
      const plan = kind.plan(scope, requests[name] as never);
      // The plan is stored with the job as JSON: the statement of the stored plan is the same.
      const stored = JSON.parse(JSON.stringify(plan));
      const statement = kind.statement(scope, stored as never);
      expect(kind.statement(scope, plan as never)).toEqual(statement);
      const values = statement.values.map((v, i) => `-- $${i + 1} = ${JSON.stringify(v)}`).join('\n');
      await expect(`-- ${name}\n${statement.text.trim()}\n\n${values}\n`).toMatchFileSnapshot(
        `__snapshots__/${name}.sql`,
      );
    });
  }
});
