import path from 'node:path';
import { createNamespace, startEmulator, type Emulator, type Namespace } from '../clients/testing/src/index.ts';

// What test/emulator-namespaces.test.ts and bench/emulator-parallel.ts share (docs/emulator.md
// "Namespaces"): the emulator of the one-file fixture with manual jobs, a request made as a
// namespace's account, and one test of a parallel worker, which checks that it sees only its own
// data, request log and mail.

export const FIXTURE = path.join(import.meta.dirname, '..', 'examples', 'emulator-fixture.json');
export const SHOP = 'com.acme1.sections.user-created.shop';
export const EMAIL = 'com.acme1.keyspaces.email';

/** `audience emulate` of the one-file fixture (vendor `acme`), its jobs manual. */
export function startFixtureEmulator(timeoutMs: number): Promise<Emulator> {
  return startEmulator({ vendor: 'acme', manifest: FIXTURE, jobs: 'manual', timeoutMs });
}

/** A request as the namespace's account (with one of its tokens); answers the status and the parsed body. */
export async function call(
  ns: Namespace,
  token: string,
  method: string,
  url: string,
  body?: unknown,
): Promise<{ status: number; body: any }> {
  const res = await fetch(ns.baseUrl + url, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** Sends the fixture's transactional order confirmation of `order` to `to`, as the namespace's account. */
export function sendOrder(ns: Namespace, token: string, to: string, name: string, order: string) {
  return call(ns, token, 'POST', `/emails/sections/${SHOP}/activities/transactional/order-confirmation/transactions`, {
    keyspace_discriminator: EMAIL,
    profile_key: to,
    to_name: name,
    to_email_address: to,
    variables: { order },
  });
}

/**
 * One test of a parallel worker: it makes its namespace, creates a tag named `Tag <name>` and sends
 * a transactional message to `<name>@example.com`, runs its namespace's jobs, and checks that the
 * tags tests made are its own one only, that its request log holds its 4 requests and none of
 * another namespace, and that its mail is its one message. Answers what went wrong, if anything.
 */
export async function isolatedTest(baseUrl: string, name: string): Promise<string | undefined> {
  const ns = await createNamespace(baseUrl);
  const token = await ns.token();
  const tag = `Tag ${name}`;
  const to = `${name}@example.com`;
  const created = await call(ns, token, 'POST', `/audience/sections/${SHOP}/tags`, { name: tag });
  if (created.status !== 201) return `tag: ${created.status}`;
  const sent = await sendOrder(ns, token, to, name, name);
  if (sent.status !== 201) return `send: ${sent.status}`;
  await ns.control.jobs.run();
  // Data: of the tags tests made, only its own.
  const tags = (await call(ns, token, 'GET', `/audience/sections/${SHOP}/tags`)).body.items.map(
    (t: { name: string }) => t.name,
  );
  const made = tags.filter((t: string) => t.startsWith('Tag '));
  if (made.length !== 1 || made[0] !== tag) return `tags seen: ${made.join(', ')}`;
  // The request log: its requests only, all of them there.
  const log = await ns.control.requests.list();
  if (log.some((r) => r.namespace !== ns.id)) return 'a request of another namespace in the log';
  if (log.length !== 4) return `${log.length} requests in the log, not 4`;
  // Mail: its message only.
  const mail = await ns.control.mail.list();
  if (mail.length !== 1 || mail[0].to.join() !== to || mail[0].subject !== `Your order ${name}`)
    return `mail seen: ${mail.map((m) => m.to.join()).join('; ')}`;
  return undefined;
}
