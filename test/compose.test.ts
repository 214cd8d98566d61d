import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

// compose.yaml as an operator starts it: no secret filled in silently, nothing published beyond
// this machine, no demo account, a health check that sees the database, images that do not move.
// (The machines the tests run on have no docker compose, so the file is read as text.)

const ROOT = path.resolve(import.meta.dirname, '..');
const SECRETS = ['POSTGRES_PASSWORD', 'MINIO_ROOT_PASSWORD', 'ADMIN_TOKEN', 'SERVER_SECRET'];

describe('compose.yaml', async () => {
  const compose = await fs.readFile(path.join(ROOT, 'compose.yaml'), 'utf8');
  const example = await fs.readFile(path.join(ROOT, '.env.example'), 'utf8').catch(() => '');

  it('requires every secret (compose stops naming it while it is unset) and lists each in .env.example', () => {
    for (const secret of SECRETS) {
      const uses = [...compose.matchAll(new RegExp(`\\$\\{${secret}(:?[-?][^}]*)?\\}`, 'g'))].map((m) => m[0]);
      expect(uses.length, secret).toBeGreaterThan(0);
      for (const use of uses) expect(use, secret).toMatch(new RegExp(`^\\$\\{${secret}:\\?.*\\.env`));
      expect(example, secret).toMatch(new RegExp(`^${secret}=$`, 'm'));
    }
  });

  it('creates no demo account', () => {
    expect(compose).toMatch(/^\s+DEMO_ACCOUNT: "false"$/m);
  });

  it('publishes its ports on loopback unless told otherwise, each port configurable', () => {
    const ports = [...compose.matchAll(/^\s+ports: \[(.*)\]$/gm)].flatMap((m) => m[1].split(','));
    expect(ports.length).toBeGreaterThan(0);
    for (const port of ports)
      expect(port.trim()).toMatch(/^"\$\{API_BIND:-127\.0\.0\.1\}:\$\{API_\d_PORT:-\d+\}:8080"$/);
  });

  it("checks the audience processes' health on /readyz (the database answers), not only /healthz", () => {
    const check = compose.slice(compose.indexOf('x-audience:'), compose.indexOf('services:'));
    expect(check).toMatch(/healthcheck:[\s\S]*\/readyz/);
    expect(check).not.toContain('/healthz');
  });

  it('pins every image to an exact version', () => {
    const images = [...compose.matchAll(/^\s+image: (\S+)$/gm)].map((m) => m[1]).filter((i) => i !== 'audience:local');
    expect(images.length).toBe(4);
    for (const image of images)
      expect(image).toMatch(/:(\d+\.\d+(\.\d+)?(-alpine)?|RELEASE\.\d{4}-\d\d-\d\dT[\d-]+Z)$/);
  });
});
