import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import zlib from 'node:zlib';
import { Type } from 'typebox';
import { Problem } from '../../core/problems.ts';
import { operation, type OperationTable } from '../operation.ts';

// The web console (docs/console.md): static files of web/console and a few libraries of
// node_modules, served as they are (native ES modules, no build step), each compressed once and
// kept in memory. The console is a client of this same HTTP interface: it holds no path to data.

const ROOT = path.resolve(import.meta.dirname, '../../..');
const CONSOLE_DIR = path.join(ROOT, 'web/console');

/**
 * The libraries the console loads, by the name under /console/vendor/: only these files of
 * node_modules are served. The import map of index.html names them for the modules' bare imports.
 */
export const VENDOR_FILES: Record<string, string> = {
  'preact.js': 'preact/dist/preact.mjs',
  'preact-hooks.js': 'preact/hooks/dist/hooks.mjs',
  'htm.js': 'htm/dist/htm.mjs',
  'uplot.js': 'uplot/dist/uPlot.esm.js',
  'uplot.css': 'uplot/dist/uPlot.min.css',
};

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
};

/** A file ready to send: its bytes, their compressed forms, its type and tag. */
interface StaticFile {
  type: string;
  etag: string;
  identity: Buffer;
  gzip: Buffer;
  br: Buffer;
}

/**
 * The Content-Security-Policy of every console answer: scripts only from this origin, plus the
 * one inline import map by its hash; no inline script, no eval, no inline style attribute in
 * markup, no plugin, no framing of the console, forms posting nowhere (the console sends JSON
 * with fetch). `frame-src 'self'` lets a message be shown in a sandboxed frame.
 */
export function contentSecurityPolicy(importMapHash: string): string {
  return [
    "default-src 'none'",
    `script-src 'self' '${importMapHash}'`,
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "font-src 'self'",
    "frame-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** The sha256 source expression of index.html's import map, which the policy allows. */
function importMapHash(html: string): string {
  const map = /<script type="importmap">([\s\S]*?)<\/script>/.exec(html);
  if (!map) throw new Error('web/console/index.html has no import map');
  return `sha256-${crypto.createHash('sha256').update(map[1]).digest('base64')}`;
}

function prepare(identity: Buffer, type: string): StaticFile {
  return {
    type,
    etag: `"${crypto.createHash('sha256').update(identity).digest('base64url').slice(0, 22)}"`,
    identity,
    gzip: zlib.gzipSync(identity, { level: 9 }),
    br: zlib.brotliCompressSync(identity, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 11 } }),
  };
}

/** Where a console path's file is on disk, or undefined when the console serves no such file. */
function fileOf(name: string): string | undefined {
  if (name.startsWith('vendor/')) {
    const vendored = VENDOR_FILES[name.slice('vendor/'.length)];
    return vendored && path.join(ROOT, 'node_modules', vendored);
  }
  // Only plain names of files of web/console: no dot segments, no hidden files, no other folder.
  if (!/^(?:[a-z0-9-]+\/)*[a-z0-9-]+\.[a-z]+$/.test(name)) return undefined;
  return path.join(CONSOLE_DIR, name);
}

/** The console's routes; files are read on first request and kept. */
export function consoleRoutes(): OperationTable {
  const files = new Map<string, Promise<StaticFile | undefined>>();
  let policy: Promise<string> | undefined;
  const load = (name: string) => {
    let file = files.get(name);
    if (!file) {
      const at = fileOf(name);
      // The type by the name served (a vendored module may be an .mjs file).
      const type = TYPES[path.extname(name)];
      file =
        at === undefined || type === undefined
          ? Promise.resolve(undefined)
          : fs.readFile(at).then(
              (bytes) => prepare(bytes, type),
              () => undefined,
            );
      files.set(name, file);
    }
    return file;
  };
  const cspOf = () =>
    (policy ??= fs
      .readFile(path.join(CONSOLE_DIR, 'index.html'), 'utf8')
      .then((html) => contentSecurityPolicy(importMapHash(html))));

  const send = async (
    name: string,
    request: { headers: Record<string, string | string[] | undefined> },
    reply: import('fastify').FastifyReply,
  ) => {
    const file = await load(name);
    if (!file) throw new Problem('AUD-1', `No console file ${name}`);
    reply.headers({
      'content-security-policy': await cspOf(),
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
      'cross-origin-opener-policy': 'same-origin',
      // Revalidated every time (by its tag): a new release is never mixed with cached modules.
      'cache-control': 'no-cache',
      etag: file.etag,
      vary: 'accept-encoding',
      'content-type': file.type,
    });
    if (request.headers['if-none-match'] === file.etag) return reply.code(304).send();
    const accepted = String(request.headers['accept-encoding'] ?? '');
    const encoding = /\bbr\b/.test(accepted) ? 'br' : /\bgzip\b/.test(accepted) ? 'gzip' : undefined;
    if (encoding) reply.header('content-encoding', encoding);
    return reply.send(encoding ? file[encoding] : file.identity);
  };

  return {
    tags: ['console'],
    operations: [
      operation({
        method: 'GET',
        path: '/console',
        summary: 'The web console',
        hide: true,
        scope: 'public',
        handle: async ({ request, reply }) => send('index.html', request, reply),
      }),
      operation({
        method: 'GET',
        path: '/favicon.ico',
        summary: "The console's icon, where browsers and tools look for a site's",
        hide: true,
        scope: 'public',
        handle: async ({ request, reply }) => send('favicon.svg', request, reply),
      }),
      operation({
        method: 'GET',
        path: '/console/*',
        summary: 'A file of the web console',
        hide: true,
        params: Type.Object({ '*': Type.String() }),
        scope: 'public',
        errors: ['AUD-1'],
        // The console's pages are addressed by the fragment (#/accounts): every path names a file.
        handle: async ({ params, request, reply }) => send(params['*'] || 'index.html', request, reply),
      }),
    ],
  };
}
