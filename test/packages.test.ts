import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { expect, it } from 'vitest';
import { atFileEnd, scratchFolder } from './scratch.ts';

// The packages an integrator installs, as they install them: `npm pack` of @audience/client and
// @audience/testing, the tarballs installed offline (from npm's cache, as `npm ci` left it) into an
// empty project with TypeScript, a smoke test of the project's own type-checked under `strict` and
// compiled, then run on each Node.js found against an emulator it starts with `startEmulator`:
// the pinned Node 24, the `node` on the PATH (Debian's 20), and Node 22 when the npm package
// `node@22` is in npm's cache (the test says when it is not). Each spawned process is ended and the
// folder removed when the file ends, also when the test fails. `npm run test:packages` runs it, a
// step of `.ci/run` of its own; `npm test` leaves it out (vitest.config.ts): about 50 s of CPU.
// The Python client is built and installed the same way, with Debian's pip, into a virtual
// environment, and a pytest suite of its own runs there (skipped where Debian's packages lack).

const ROOT = path.join(import.meta.dirname, '..');
const PROGRAM = path.join(ROOT, 'bin', 'audience');
const PINNED_NODE = path.join(ROOT, 'node_modules', '.bin', 'node');

/** The machine's own Node.js: the first `node` of the PATH outside a node_modules folder (npm puts the pinned one first). */
async function systemNode(): Promise<string | undefined> {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter).filter((d) => d && !d.includes('node_modules'))) {
    const file = path.join(dir, 'node');
    if (
      await fs.access(file, fs.constants.X_OK).then(
        () => true,
        () => false,
      )
    )
      return file;
  }
  return undefined;
}

/** What an integrator's suite does first: start the emulator, call it with the typed client, drive its clock. */
const SMOKE = `
import { AudienceProblem, createAudienceClient, type KnownProblemCode } from '@audience/client';
import { startEmulator, type Emulator } from '@audience/testing';

const emulator: Emulator = await startEmulator({ vendor: 'smoke' });
process.once('SIGTERM', () => void emulator.stop().then(() => process.exit(143)));
try {
  const audience = createAudienceClient({
    baseUrl: emulator.baseUrl,
    clientId: emulator.account.clientId,
    clientSecret: emulator.account.clientSecret,
  });
  const { data } = await audience.api.GET('/audience/sections');
  const sections: string[] = data.items.map((section) => section.discriminator);
  const notFound: KnownProblemCode = 'AUD-1104';
  let code: string | undefined;
  try {
    await audience.api.GET('/audience/segments/{segment_discriminator}', {
      params: { path: { segment_discriminator: 'com.smoke1.segments.none' } },
    });
  } catch (error) {
    if (!(error instanceof AudienceProblem) || error.code !== notFound) throw error;
    code = error.code;
  }
  await emulator.control.clock.advance(24 * 3600);
  await audience.api.GET('/audience/sections');
  const tokens = await emulator.control.requests.list({ method: 'POST', path: '/oauth/token' });
  console.log(JSON.stringify({ node: process.version, sections: sections.length, code, tokens: tokens.length }));
} finally {
  await emulator.stop();
}
`;

const TSCONFIG = {
  compilerOptions: {
    strict: true,
    target: 'es2022',
    module: 'nodenext',
    moduleResolution: 'nodenext',
    types: ['node'],
    outDir: 'out',
  },
  include: ['smoke.ts'],
};

interface Run {
  code: number | null;
  output: string;
}

/** Runs a command to its end; ended (its process group) when the test file ends before it does. */
function run(command: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<Run> {
  const child = spawn(command, args, {
    cwd,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const exited = new Promise<Run>((resolve) => {
    child.once('error', (err) => resolve({ code: -1, output: String(err) }));
    child.once('exit', (code) => resolve({ code, output }));
  });
  atFileEnd(async () => {
    if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
    process.kill(-child.pid, 'SIGTERM');
    const timer = setTimeout(() => child.pid && process.kill(-child.pid, 'SIGKILL'), 30_000);
    await exited;
    clearTimeout(timer);
  });
  return exited;
}

/**
 * An empty project that depends on the two tarballs, TypeScript and Node's types, with a lockfile
 * of the versions this repository's lockfile holds: `npm ci --offline` then takes each from npm's
 * cache by its integrity (an `npm install` of a name would need the registry's listing of it).
 */
async function writeProject(project: string, packs: string): Promise<void> {
  const lock = JSON.parse(await fs.readFile(path.join(ROOT, 'package-lock.json'), 'utf8')).packages;
  const tarball = (name: string) => `file:${path.join(packs, `audience-${name}-0.1.0.tgz`)}`;
  const dependencies = {
    '@audience/client': tarball('client'),
    '@audience/testing': tarball('testing'),
    typescript: lock['node_modules/typescript'].version,
    '@types/node': lock['node_modules/@types/node'].version,
  };
  const packages: Record<string, unknown> = {
    '': { name: 'smoke', dependencies },
    'node_modules/@audience/client': {
      version: '0.1.0',
      resolved: dependencies['@audience/client'],
      dependencies: lock['clients/typescript'].dependencies,
    },
    'node_modules/@audience/testing': { version: '0.1.0', resolved: dependencies['@audience/testing'] },
  };
  const add = (name: string) => {
    const key = `node_modules/${name}`;
    if (packages[key]) return;
    const { dev: _dev, devOptional: _devOptional, ...entry } = lock[key];
    packages[key] = entry;
    for (const dependency of Object.keys({ ...entry.dependencies, ...entry.optionalDependencies })) add(dependency);
  };
  for (const name of ['openapi-fetch', 'typescript', '@types/node']) add(name);
  const manifest = { name: 'smoke', private: true, type: 'module', dependencies };
  await fs.writeFile(path.join(project, 'package.json'), JSON.stringify(manifest));
  const lockfile = { name: 'smoke', lockfileVersion: 3, requires: true, packages };
  await fs.writeFile(path.join(project, 'package-lock.json'), JSON.stringify(lockfile));
}

it('the packed client and testing packages install offline, type-check under strict, and run on Node 20, 22 and 24', async () => {
  const dir = await scratchFolder('audience-packages-');
  // npm pack builds each package (prepack) and removes the build after (postpack); a pack cut
  // short leaves it, which the file's end removes.
  for (const pkg of ['typescript', 'testing'])
    atFileEnd(() => fs.rm(path.join(ROOT, 'clients', pkg, 'dist'), { recursive: true, force: true }));
  const packs = path.join(dir, 'packs');
  await fs.mkdir(packs);
  const packed = await run(
    'npm',
    ['pack', '-w', 'clients/typescript', '-w', 'clients/testing', '--pack-destination', packs],
    ROOT,
  );
  expect(packed.code, packed.output).toBe(0);
  expect((await fs.readdir(packs)).sort()).toEqual(['audience-client-0.1.0.tgz', 'audience-testing-0.1.0.tgz']);

  const project = path.join(dir, 'project');
  await fs.mkdir(project);
  await writeProject(project, packs);
  await fs.writeFile(path.join(project, 'tsconfig.json'), JSON.stringify(TSCONFIG));
  await fs.writeFile(path.join(project, 'smoke.ts'), SMOKE);
  const installed = await run('npm', ['ci', '--offline', '--no-audit', '--no-fund'], project);
  expect(installed.code, installed.output).toBe(0);
  // Nothing of the service in the installed packages: their files are JavaScript and declarations.
  for (const pkg of ['client', 'testing']) {
    const files = await fs.readdir(path.join(project, 'node_modules', '@audience', pkg, 'dist'));
    expect(
      files.filter((f) => !f.endsWith('.js') && !f.endsWith('.d.ts')),
      pkg,
    ).toEqual([]);
  }
  // Type-checked on the machine's own Node.js (Debian's 20), as an integrator's CI on it would.
  const system = await systemNode();
  const checked = await run(
    system ?? PINNED_NODE,
    [path.join(project, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', '.'],
    project,
  );
  expect(checked.code, `tsc --strict of the smoke test on ${system ?? PINNED_NODE}:\n${checked.output}`).toBe(0);

  // Node 22 from npm's cache, when an earlier install left it there (offline: no download here).
  const node22 = path.join(dir, 'node22');
  await fs.mkdir(node22);
  await fs.writeFile(path.join(node22, 'package.json'), '{"private":true}');
  const got22 = await run('npm', ['install', '--offline', '--no-audit', '--no-fund', 'node@22'], node22);
  const nodes = [
    PINNED_NODE,
    ...(system ? [system] : []),
    ...(got22.code === 0 ? [path.join(node22, 'node_modules', '.bin', 'node')] : []),
  ];
  if (got22.code !== 0) console.warn(`Node 22 is not in npm's cache (npm install node@22 fills it): not tested on it`);

  const majors: string[] = [];
  for (const node of nodes) {
    const smoke = await run(node, [path.join('out', 'smoke.js')], project, { AUDIENCE_COMMAND: PROGRAM });
    expect(smoke.code, `the smoke test on ${node}:\n${smoke.output}`).toBe(0);
    const result = JSON.parse(smoke.output.trim().split('\n').pop()!);
    expect(result).toMatchObject({ code: 'AUD-1104', tokens: 2 });
    expect(result.sections).toBeGreaterThan(0);
    majors.push(result.node.split('.')[0]);
  }
  console.log(`the packages' smoke test passed on Node ${majors.join(', ')}`);
  expect(majors[0]).toBe('v24');
  if (got22.code === 0) expect(majors).toContain('v22');
}, 900_000);

const PYTHON = '/usr/bin/python3';
const PYTHON_CLIENT = path.join(ROOT, 'clients', 'python');

/**
 * What an integrator's pytest suite does with the installed Python package: no conftest.py (the
 * package's pytest entry point loads the fixtures), a client of the ready account on the emulator's
 * clock, and a namespace of its own.
 */
const PY_SMOKE = `
import pytest

from audience_client import AudienceClient, AudienceProblem, EmulatorControl, Namespace


def test_the_ready_account(audience_client: AudienceClient, audience_control: EmulatorControl):
    assert audience_client.get_audience_sections()["items"]
    audience_control.clock.advance(24 * 3600)
    audience_client.get_audience_sections()
    assert len(audience_control.requests.list(path="/oauth/token")) == 2


def test_a_namespace(audience_namespace: Namespace, audience_namespace_client: AudienceClient):
    with pytest.raises(AudienceProblem) as refused:
        audience_namespace_client.get_audience_segments_by_segment_discriminator("com.smoke1.segments.none")
    assert refused.value.code == "AUD-1104"
    log = audience_namespace.control.requests.list()
    assert log and all(r["namespace"] == audience_namespace.id for r in log)
`;

const pythonMissing = (() => {
  const probe = spawnSync(PYTHON, ['-c', 'import httpx, pytest, setuptools, wheel, pip'], { encoding: 'utf8' });
  if (probe.error) return `${PYTHON} is missing`;
  if (probe.status !== 0)
    return `${PYTHON} lacks a package (${probe.stderr.trim().split('\n').pop()}): apt-get install python3-httpx python3-pytest python3-pip`;
  return undefined;
})();
if (pythonMissing) console.warn(`The packed Python client's smoke test is skipped: ${pythonMissing}`);

it.skipIf(pythonMissing !== undefined)(
  'the Python client builds and installs with pip (no index) into a virtual environment, and its smoke test passes',
  async () => {
    const dir = await scratchFolder('audience-python-package-');
    // A copy of the package's source: building writes build/ and egg-info beside it.
    const source = path.join(dir, 'source');
    await fs.cp(PYTHON_CLIENT, source, {
      recursive: true,
      filter: (from) => !/(__pycache__|\.pytest_cache|[/\\]tests)$/.test(from),
    });
    // Debian's httpx, pytest and pip come from the system's packages: nothing from a Python registry.
    const venv = path.join(dir, 'venv');
    const made = await run(PYTHON, ['-m', 'venv', '--system-site-packages', '--without-pip', venv], dir);
    expect(made.code, made.output).toBe(0);
    const python = path.join(venv, 'bin', 'python');
    const env = { PYTHONDONTWRITEBYTECODE: '1', PIP_DISABLE_PIP_VERSION_CHECK: '1' };
    const installed = await run(
      python,
      ['-m', 'pip', 'install', '--no-index', '--no-build-isolation', '--no-deps', '--no-cache-dir', source],
      dir,
      env,
    );
    expect(installed.code, installed.output).toBe(0);
    const suite = path.join(dir, 'suite');
    await fs.mkdir(suite);
    await fs.writeFile(path.join(suite, 'test_smoke.py'), PY_SMOKE);
    const smoke = await run(python, ['-m', 'pytest', '-p', 'no:cacheprovider', '-q', '-rfE'], suite, {
      ...env,
      AUDIENCE_COMMAND: PROGRAM,
      AUDIENCE_VENDOR: 'smoke',
    });
    expect(smoke.code, `the Python smoke test:\n${smoke.output}`).toBe(0);
    expect(smoke.output).toMatch(/2 passed/);
  },
  600_000,
);
