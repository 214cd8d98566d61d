import type { ManifestAttribute } from './schemas.ts';

/**
 * The identifiers every account has (SPEC §1 rule 5, §2.1, §2.3; ENDPOINTS.md "What existing
 * clients rely on"). They are built from the configured vendor word, never written out, so that an
 * operator can give this service the word of the platform its integrations expect.
 */
export function namespace(vendor: string): string {
  return `com.${vendor}1`;
}

export type KeyspaceKind =
  'email' | 'mobile' | 'crm-id' | 'export' | 'transactional-email' | 'web' | 'sms' | 'integration';

export interface BuiltinKeyspace {
  discriminator: string;
  name: string;
  description: string;
  kind: KeyspaceKind;
  manage_subscriptions: boolean;
  mapped_attribute: string | null;
}

export function builtinKeyspaces(vendor: string): BuiltinKeyspace[] {
  const ns = namespace(vendor);
  const ks = (
    kind: KeyspaceKind,
    name: string,
    description: string,
    manage: boolean,
    mapped: string | null,
  ): BuiltinKeyspace => ({
    discriminator: `${ns}.keyspaces.${kind}`,
    name,
    description,
    kind,
    manage_subscriptions: manage,
    mapped_attribute: mapped,
  });
  return [
    ks('email', 'Email', 'Profiles keyed by email address', true, `${ns}.attributes.email`),
    ks('mobile', 'Mobile', 'Profiles keyed by mobile phone number (E.164)', true, `${ns}.attributes.mobile`),
    ks('crm-id', 'CRM ID', 'Profiles keyed by the id given to them in a CRM system', true, `${ns}.attributes.crmid`),
    ks('export', 'Export key', 'The key the service gives every profile; read-only for profile data', false, null),
    ks('transactional-email', 'Transactional email', 'Recipients of transactional sendings', false, null),
    ks('web', 'Web', 'Anonymous visitors, keyed by the tracking cookie', false, null),
    ks('sms', 'SMS', 'Recipients of SMS sendings', false, null),
  ];
}

export function builtinChannels(vendor: string) {
  const ns = namespace(vendor);
  return [
    {
      discriminator: `${ns}.channels.email`,
      name: 'Email',
      description: 'Email messages',
      address_attribute: `${ns}.attributes.email`,
    },
    {
      discriminator: `${ns}.channels.sms`,
      name: 'SMS',
      description: 'Text messages to mobile phones',
      address_attribute: `${ns}.attributes.mobile`,
    },
    {
      discriminator: `${ns}.channels.web`,
      name: 'Web',
      description: 'Website personalisation and web push',
      address_attribute: null,
    },
  ];
}

/** The default attributes of every section: same discriminators everywhere, values per section (SPEC §1 rule 6). */
export function defaultAttributes(vendor: string): ManifestAttribute[] {
  const ns = namespace(vendor);
  const text = (key: string, name: string, description: string): ManifestAttribute => ({
    discriminator: `${ns}.attributes.${key}`,
    name,
    description,
    versions: [{ type: ['Text'] }],
  });
  return [
    text('email', 'Email', 'Email address; mapped to the email keyspace'),
    text('mobile', 'Mobile', 'Mobile phone number; mapped to the mobile keyspace'),
    text('crmid', 'CRM ID', 'Id in a CRM system; mapped to the CRM keyspace'),
    text('firstname', 'First name', 'First name'),
    text('lastname', 'Last name', 'Last name'),
  ];
}

/** The discriminator a user-created item gets from its name, e.g. `com.vendor1.sections.user-created.shop`. */
export function userCreatedDiscriminator(
  vendor: string,
  kind: 'sections' | 'attributes' | 'tags' | 'events' | 'topics' | 'topic-folders' | 'segments',
  name: string,
): string {
  const slug =
    name
      .normalize('NFKD')
      .replace(/[\u0300-\u036f]/g, '')
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-+|-+$/g, '') || 'item';
  return `${namespace(vendor)}.${kind}.user-created.${slug}`;
}

/** The root of every section's topic folder tree. */
export function rootFolderDiscriminator(vendor: string): string {
  return `${namespace(vendor)}.topic-folders.root`;
}

/** The channels whose activities have events (docs/activities.md "Built-in event types"). */
export type ActivityChannel = 'email' | 'sms' | 'forms';

/**
 * The built-in event types that activities' events are recorded as, one per channel: profile
 * events like any other, so that segments, profile events and exports see them. `activityId`
 * names the activity, as in the page-view sample of SPEC §2.7 (ACT-21); `type` the event type.
 */
export function activityEventTypes(vendor: string): {
  channel: ActivityChannel;
  discriminator: string;
  name: string;
  description: string;
  fields: { name: string; type: string }[];
}[] {
  const ns = namespace(vendor);
  const text = (...names: string[]) => names.map((name) => ({ name, type: 'Text' }));
  const links = [
    ...text('linkId', 'linkUrl', 'linkTitle'),
    { name: 'bounceCode', type: 'Number' },
    ...text('unsubscribeTopic'),
  ];
  return [
    {
      channel: 'email',
      discriminator: `${ns}.events.email`,
      name: 'Email activity event',
      description: 'SENT, DELIVERED, OPENED, CLICKED, BOUNCED, UNSUBSCRIBED or ABUSE of an email activity',
      fields: [...text('activityId', 'type', 'splitId', 'variation', 'device', 'location'), ...links],
    },
    {
      channel: 'sms',
      discriminator: `${ns}.events.sms`,
      name: 'SMS activity event',
      description: 'SENT, DELIVERED, CLICKED, BOUNCED or UNSUBSCRIBED of an SMS activity',
      fields: [...text('activityId', 'type'), ...links],
    },
    {
      channel: 'forms',
      discriminator: `${ns}.events.form`,
      name: 'Form event',
      description: 'VIEWED, STARTED, REJECTED or SUBMITTED of a form',
      fields: text('activityId', 'type'),
    },
  ];
}
