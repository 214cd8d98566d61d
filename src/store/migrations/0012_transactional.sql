-- Transactional mail (SPEC §2.15, §4.8; docs/mail.md). A send is a row from the moment it is
-- accepted (status queued) until its account goes; the worker renders and delivers it, and its
-- status follows what the mail server and later the recipient did. What the message was made of
-- (variables, attachments) is dropped once it has left: the row keeps what its status and its
-- tracking links need.
create table transactional_sends (
  account_id bigint not null references accounts on delete cascade,
  transaction_id uuid not null default gen_random_uuid(),
  activity_id text not null,
  section_id bigint not null,
  keyspace_id bigint not null,
  profile_key text not null,
  -- The recipient: the address an unsubscribe suppresses.
  to_address text not null,
  status text not null default 'queued' check (status in ('queued', 'sent', 'delivered', 'bounced', 'failed', 'suppressed')),
  -- Why a send ended failed, bounced or suppressed: the mail server's answer or the rule that stopped it.
  status_reason text,
  -- The body of the request (SPEC §4.8) until the message is sent.
  request jsonb,
  -- The links of the sent message, in order: a click link names one by its index, so it can only lead there.
  links jsonb not null default '[]',
  message_id text,
  created_at timestamptz not null default now(),
  sent_at timestamptz,
  primary key (account_id, transaction_id)
);

-- The built-in outbox: with SMTP_URL unset, messages are kept here, whole, instead of being sent,
-- and the operator reads them (GET /admin/accounts/{id}/outbox, audience outbox list).
create table transactional_outbox (
  account_id bigint not null references accounts on delete cascade,
  message_id bigint generated always as identity,
  transaction_id uuid,
  created_at timestamptz not null default now(),
  sender text not null,
  recipients text[] not null,
  subject text not null,
  -- The message as it would have gone over SMTP (RFC 5322), DKIM signature included when configured.
  source bytea not null,
  primary key (account_id, message_id)
);
