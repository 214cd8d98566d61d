import { spawn, spawnSync } from 'node:child_process';
import { expect, it } from 'vitest';
import { PYTHON_CLIENT } from '../scripts/generate-python-client.ts';
import { atFileEnd } from './scratch.ts';

// The Python client's own suite (clients/python/tests, pytest) against the real emulator, on
// Debian's Python with Debian's python3-httpx and python3-pytest: what an integrator runs. The
// suite's fixture starts `bin/audience emulate` and stops it, and removes its temporary folder,
// also when a test fails. `.ci/run` installs both packages when it runs as root; where they are
// missing, this test says so and skips.

const PYTHON = '/usr/bin/python3';
const probe = spawnSync(PYTHON, ['-c', 'import httpx, pytest'], { encoding: 'utf8' });
const missing = probe.error
  ? `${PYTHON} is missing`
  : probe.status !== 0
    ? `${PYTHON} lacks httpx or pytest (${probe.stderr.trim().split('\n').pop()}): apt-get install python3-httpx python3-pytest`
    : undefined;
if (missing) console.warn(`The Python client's tests are skipped: ${missing}`);

it.skipIf(missing !== undefined)(
  "the Python client's pytest suite passes against the emulator",
  async () => {
    // No bytecode or pytest cache left in the checkout; the emulator's folder goes to the run's TMPDIR.
    // The fixture finds the program as an integrator's checkout has it: bin/audience of this repository.
    const child = spawn(PYTHON, ['-m', 'pytest', '-p', 'no:cacheprovider', '-q', '-rfE', 'tests'], {
      cwd: PYTHON_CLIENT,
      env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    // A run cut short (the test's timeout) is ended as a cancelled CI job would end it: the fixture
    // takes SIGTERM as an interrupt, stops the emulator and removes its folder.
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    atFileEnd(async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
      await exited;
      clearTimeout(timer);
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const code = await exited;
    expect(code, `pytest failed:\n${output}`).toBe(0);
    expect(output).toMatch(/\d+ passed/);
    expect(output).not.toMatch(/skipped|failed|error/i);
  },
  300_000,
);
