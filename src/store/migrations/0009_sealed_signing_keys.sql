-- Signing keys' private halves are kept sealed (AES-256-GCM under a key derived from SERVER_SECRET,
-- src/api-keys/sealing.ts), never in plain text. Keys stored before this migration are sealed by
-- the first program that starts after it, which also empties their private_jwk.
alter table signing_keys add column private_key_sealed bytea;
alter table signing_keys alter column private_jwk drop not null;
