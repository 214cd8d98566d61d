import { expect } from 'vitest';
import type { AttributeDef, Definitions } from '../src/core/definitions.ts';
import { DEFAULT_LIMITS } from '../src/core/limits.ts';
import type { AccountScope } from '../src/core/scope.ts';

// Golden statements (as src/exports/statements.test.ts has for exports): fixed definitions and an
// account scope, and the writing of a statement whole, with its values, into a file beside the test
// that shows it, so that a reader sees each assembled statement in one piece and a change to it
// shows in review. The HTTP tests of each family run these statements against PostgreSQL.

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

export const defs: Definitions = {
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
      live_time_zone: null,
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

export const scope: AccountScope = {
  accountId: '7',
  defs,
  limits: DEFAULT_LIMITS,
  secret: 'secret',
  now: new Date('2026-01-15T12:00:00Z'),
};

/** Matches `statement` (its settings first, when it has some) with the golden file `file`. */
export async function expectGolden(
  name: string,
  statements: { text: string; values: unknown[]; settings?: string }[],
  file: string,
): Promise<void> {
  const parts = statements.map((statement) => {
    const values = statement.values.map((v, i) => `-- $${i + 1} = ${JSON.stringify(v)}`).join('\n');
    const settings = statement.settings ? `${statement.settings};\n` : '';
    return `${settings}${statement.text.trim()}\n\n${values}\n`;
  });
  await expect(`-- ${name}\n${parts.join('\n-- then\n')}`).toMatchFileSnapshot(file);
}
