-- Accounts, API keys, signing keys and the definitions of SPEC §2.1–2.9.
-- Every tenant table leads with account_id, so the schema can be distributed by account.

create table accounts (
  account_id bigint generated always as identity primary key,
  name text not null,
  region text not null,
  -- Overrides of the default limits of SPEC §8; a null value lifts that limit.
  limits jsonb not null default '{}',
  created_at timestamptz not null default now()
);

create table api_keys (
  account_id bigint not null references accounts on delete cascade,
  client_id text not null,
  -- SHA-256 of the secret: secrets are 256 random bits, so a slow hash adds nothing.
  secret_hash bytea not null,
  name text not null default '',
  -- The sections the key may use; null grants every section.
  section_ids bigint[],
  created_at timestamptz not null default now(),
  deleted_at timestamptz,
  primary key (account_id, client_id)
);
create unique index api_keys_by_client_id on api_keys (client_id);

-- The service's own token signing keys: service-wide, so not keyed by account.
create table signing_keys (
  kid text primary key,
  private_jwk jsonb not null,
  public_jwk jsonb not null,
  created_at timestamptz not null default now(),
  retired_at timestamptz
);

create table keyspaces (
  account_id bigint not null references accounts on delete cascade,
  keyspace_id bigint generated always as identity,
  discriminator text not null,
  name text not null,
  description text not null default '',
  manage_subscriptions boolean not null default false,
  -- Whether the account permits profile access through the API in this keyspace (SPEC §2.1).
  api_access boolean not null default true,
  -- email, mobile, crm-id, export, transactional-email, web, sms or integration: how keys are normalised.
  kind text not null,
  -- The attribute this keyspace maps to in every section (SPEC §1 rule 5), if any.
  mapped_attribute text,
  primary key (account_id, keyspace_id),
  unique (account_id, discriminator)
);

create table channels (
  account_id bigint not null references accounts on delete cascade,
  channel_id bigint generated always as identity,
  discriminator text not null,
  name text not null,
  description text not null default '',
  -- The attribute that holds a profile's address on this channel (email, mobile), if any.
  address_attribute text,
  primary key (account_id, channel_id),
  unique (account_id, discriminator)
);

create table sections (
  account_id bigint not null references accounts on delete cascade,
  section_id bigint generated always as identity,
  discriminator text not null,
  name text not null,
  description text not null default '',
  ecommerce_connected boolean not null default false,
  primary key (account_id, section_id),
  unique (account_id, discriminator)
);

create table attributes (
  account_id bigint not null,
  attribute_id bigint generated always as identity,
  section_id bigint not null,
  discriminator text not null,
  name text not null,
  description text not null default '',
  hidden boolean not null default false,
  ecommerce boolean not null default false,
  keyspace_permissions jsonb not null default '{}',
  primary key (account_id, attribute_id),
  unique (account_id, section_id, discriminator),
  foreign key (account_id, section_id) references sections on delete cascade
);

create table attribute_versions (
  account_id bigint not null,
  version_id bigint generated always as identity,
  attribute_id bigint not null,
  ordinal integer not null,
  type jsonb not null,
  deprecated_at timestamptz,
  valid_from timestamptz not null default now(),
  primary key (account_id, version_id),
  unique (account_id, attribute_id, ordinal),
  foreign key (account_id, attribute_id) references attributes on delete cascade
);

create table tags (
  account_id bigint not null,
  tag_id bigint generated always as identity,
  section_id bigint not null,
  discriminator text not null,
  name text not null,
  hidden boolean not null default false,
  keyspace_permissions jsonb not null default '{}',
  created_at timestamptz not null default now(),
  primary key (account_id, tag_id),
  unique (account_id, section_id, discriminator),
  foreign key (account_id, section_id) references sections on delete cascade
);

create table events (
  account_id bigint not null,
  event_id bigint generated always as identity,
  section_id bigint not null,
  discriminator text not null,
  name text not null,
  description text not null default '',
  hidden boolean not null default false,
  keyspace_permissions jsonb not null default '{}',
  primary key (account_id, event_id),
  unique (account_id, section_id, discriminator),
  foreign key (account_id, section_id) references sections on delete cascade
);

create table event_versions (
  account_id bigint not null,
  version_id bigint generated always as identity,
  event_id bigint not null,
  ordinal integer not null,
  type jsonb not null,
  deprecated_at timestamptz,
  valid_from timestamptz not null default now(),
  primary key (account_id, version_id),
  unique (account_id, event_id, ordinal),
  foreign key (account_id, event_id) references events on delete cascade
);

create table topic_folders (
  account_id bigint not null,
  folder_id bigint generated always as identity,
  section_id bigint not null,
  discriminator text not null,
  name text not null,
  parent_folder_id bigint,
  primary key (account_id, folder_id),
  unique (account_id, section_id, discriminator),
  foreign key (account_id, section_id) references sections on delete cascade
);

create table topics (
  account_id bigint not null,
  topic_id bigint generated always as identity,
  section_id bigint not null,
  discriminator text not null,
  name text not null,
  description text not null default '',
  folder_id bigint,
  -- Set for a channel-specific topic.
  channel_id bigint,
  primary key (account_id, topic_id),
  unique (account_id, section_id, discriminator),
  foreign key (account_id, section_id) references sections on delete cascade
);

create table segments (
  account_id bigint not null references accounts on delete cascade,
  segment_id bigint generated always as identity,
  discriminator text not null,
  name text not null,
  description text not null default '',
  primary key (account_id, segment_id),
  unique (account_id, discriminator)
);

create table segment_versions (
  account_id bigint not null,
  version_id bigint generated always as identity,
  segment_id bigint not null,
  ordinal integer not null,
  query text not null,
  created_at timestamptz not null default now(),
  primary key (account_id, version_id),
  unique (account_id, segment_id, ordinal),
  foreign key (account_id, segment_id) references segments on delete cascade
);
