/**
 * The floor of the profile attribute GET and PATCH (bench/profiles.ts starts it as a child process,
 * like bench/bare.ts): a `node:http` server without framework, auth, schemas, logging or metrics
 * that does only the physical work of each request against the audience server's own database and
 * data. It calls the very query functions the routes end in, so it sends the same named statements
 * batched in the same way (src/store/coalesce.ts):
 *
 * - GET …/profiles/{key}/sections/{section}/attributes: findSectionDataByKey, then the readable
 *   values as JSON (200), or 404;
 * - PATCH /v2/…/attributes: the body's discriminators mapped to their current version ids, then
 *   patchSectionDataByKey (the fast path of patchAttributesV2), 204, or 404.
 *
 * Settings from the environment (set by bench/profiles.ts): BENCH_DATABASE_URL, BENCH_ACCOUNT_ID,
 * BENCH_KEYSPACE (JSON: keyspace_id, kind), BENCH_SECTION_ID, BENCH_VERSIONS (JSON: attribute
 * discriminator → current version id; their version ids are what a GET shows). It sends its port
 * to its parent.
 */
import http from 'node:http';
import type net from 'node:net';
import { findSectionDataByKey, patchSectionDataByKey, type ValueMap } from '../src/profiles/queries.ts';
import { createPool } from '../src/store/pool.ts';

const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const accountId = env('BENCH_ACCOUNT_ID');
const keyspace = JSON.parse(env('BENCH_KEYSPACE')) as { keyspace_id: string; kind: string };
const sectionId = env('BENCH_SECTION_ID');
const versions = new Map(Object.entries(JSON.parse(env('BENCH_VERSIONS')) as Record<string, string>));
const readable = new Set(versions.values());
// As many connections as the audience server's pool (src/server.ts).
const pool = createPool(env('BENCH_DATABASE_URL'), 20);

/** The profile key of /[v2/]audience/keyspaces/{keyspace}/profiles/{key}/sections/{section}/attributes. */
function keyOf(url: string): string | undefined {
  const parts = url.split('/');
  const at = parts.indexOf('profiles');
  return at > 0 && parts.length > at + 1 ? decodeURIComponent(parts[at + 1]) : undefined;
}

const answer = (res: http.ServerResponse, status: number, body?: string) => {
  if (body === undefined) res.writeHead(status).end();
  else
    res
      .writeHead(status, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(body),
      })
      .end(body);
};

async function get(key: string, res: http.ServerResponse): Promise<void> {
  const found = await findSectionDataByKey(pool, accountId, keyspace, key, sectionId);
  if (!found) return answer(res, 404, '{}');
  const shown: ValueMap = {};
  for (const versionId in found.attributes) if (readable.has(versionId)) shown[versionId] = found.attributes[versionId];
  answer(res, 200, JSON.stringify(shown));
}

async function patch(key: string, body: string, res: http.ServerResponse): Promise<void> {
  const attributes: ValueMap = {};
  for (const [discriminator, value] of Object.entries(JSON.parse(body) as ValueMap)) {
    const versionId = versions.get(discriminator);
    if (!versionId) return answer(res, 400, '{}');
    attributes[versionId] = value;
  }
  const written = await patchSectionDataByKey(pool, accountId, {
    keyspaceId: keyspace.keyspace_id,
    key,
    sectionId,
    attributes,
    changedAt: new Date(),
  });
  answer(res, written ? 204 : 404);
}

const server = http.createServer((req, res) => {
  const key = keyOf(req.url ?? '');
  const fail = (err: Error) => {
    process.stderr.write(`floor: ${err.message}\n`);
    if (!res.headersSent) answer(res, 500, '{}');
  };
  if (key === undefined) return answer(res, 404, '{}');
  if (req.method === 'GET') {
    get(key, res).catch(fail);
    return;
  }
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (chunk: string) => {
    body += chunk;
  });
  req.on('end', () => patch(key, body, res).catch(fail));
});
server.keepAliveTimeout = 72_000;
server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as net.AddressInfo).port }));
const stop = () => void pool.end().finally(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('disconnect', stop);
