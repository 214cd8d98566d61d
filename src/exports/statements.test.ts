import { describe, expect, it } from 'vitest';
import type { AttributeDef, Definitions } from '../core/definitions.ts';
import { DEFAULT_LIMITS } from '../core/limits.ts';
import type { AccountScope } from '../core/scope.ts';
import { EXPORT_KINDS, type BodyOf, type ExportKindName } from './kinds.ts';

/**
 * Golden statements: for a fixed request of each kind in fixed definitions, the whole statement
 * its plan runs, with its values, in `__snapshots__/<kind>.sql`, so that a reader sees each
 * export's SQL in one piece and a change to it shows in review. (The HTTP tests of each kind run
 * these statements against PostgreSQL; this one only prints them.)
 */

const attribute = (id: string, discriminator: string, name: string, type: string, hidden = false): AttributeDef => ({
  id,
  section_id: '10',
  discriminator,
  name,
  description: '',
  hidden,
  ecommerce: false,
  keyspace_permissions: {},
  versions: [{ id: `${id}01`, type: [type], deprecated_at: null, valid_from: '2024-01-01T00:00:00Z' }],
});

const defs: Definitions = {
  accountId: '7',
  keyspaces: [k('1', 'email', 'email'), k('2', 'export', 'export'), k('3', 'crm-id', 'crm')],
  channels: [
    { channel_id: '21', discriminator: 'email', name: 'Email', description: '', address_attribute: 'email' },
    { channel_id: '22', discriminator: 'sms', name: 'SMS', description: '', address_attribute: 'mobile' },
  ],
  sections: [
    {
      id: '10',
      discriminator: 'shop',
      name: 'Shop',
      description: '',
      ecommerce_connected: false,
      attributes: [
        attribute('31', 'email', 'Email', 'Text'),
        attribute('32', 'mobile', 'Mobile', 'Text'),
        attribute('33', 'points', 'Points', 'Number'),
      ],
      tags: [
        { tag_id: '41', section_id: '10', discriminator: 'vip', name: 'VIP', hidden: false, keyspace_permissions: {} },
      ],
      events: [
        {
          id: '51',
          section_id: '10',
          discriminator: 'order',
          name: 'Order',
          description: '',
          hidden: false,
          keyspace_permissions: {},
          versions: [{ id: '5101', type: [], deprecated_at: null, valid_from: '2024-01-01T00:00:00Z' }],
        },
      ],
      folders: [],
      topics: [
        {
          topic_id: '61',
          section_id: '10',
          discriminator: 'news',
          name: 'News',
          description: '',
          folder_id: null,
          channel_id: null,
        },
      ],
    },
  ],
  segments: [
    {
      id: '71',
      discriminator: 'big',
      name: 'Big',
      description: '',
      versions: [{ id: '7101', query: 'section(10).attribute(3301).gt(100)' }],
    },
  ],
};

function k(keyspace_id: string, discriminator: string, kind: string) {
  return {
    keyspace_id,
    discriminator,
    name: discriminator,
    description: '',
    manage_subscriptions: true,
    api_access: true,
    kind,
    mapped_attribute: kind === 'email' ? 'email' : null,
  };
}

const scope: AccountScope = {
  accountId: '7',
  defs,
  limits: DEFAULT_LIMITS,
  secret: 'secret',
  now: new Date('2026-01-15T12:00:00Z'),
};

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
