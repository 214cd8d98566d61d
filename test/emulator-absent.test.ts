import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../src/http/app.ts';
import { createServices, type Services } from '../src/services.ts';
import { expectProblem, TestServer, type Response } from './app.ts';

// The control API exists only in `audience emulate` (docs/emulator.md): the application `serve`
// and `api` build (the routes of every area) and the one of `worker` (health and metrics) have
// none of it, whatever token is sent. test/serve-start.test.ts asks the program itself.

const CONTROL: [string, string][] = [
  ['POST', '/_emulator/reset'],
  ['GET', '/_emulator/account'],
  ['PUT', '/_emulator/clock'],
  ['POST', '/_emulator/clock/advance'],
  ['POST', '/_emulator/jobs/run'],
  ['POST', '/_emulator/faults'],
  ['GET', '/_emulator/requests'],
  ['GET', '/_emulator/mail'],
  ['PATCH', '/_emulator/limits'],
  ['PUT', '/_emulator/snapshots/fixtures'],
];

let server: TestServer;
let workerApp: App;
let workerServices: Services;
beforeAll(async () => {
  server = await TestServer.start();
  // The worker role's application, on services of its own (each has its own metrics).
  const { config, pool, clock } = server.services;
  workerServices = await createServices(config, pool, clock, {
    adminToken: 'operator',
    serverSecret: 'test-server-secret',
  });
  workerApp = await buildApp(workerServices, { operationsOnly: true });
});
afterAll(async () => {
  await workerApp?.close();
  await workerServices?.close();
  await server?.close();
});

describe('outside emulate', () => {
  it.each(CONTROL)('serve and api: %s %s is 404, with or without the operator token', async (method, path) => {
    const body = method === 'GET' ? undefined : {};
    expectProblem(await server.request(method, path, { body }), 404, 'AUD-1');
    expectProblem(await server.admin(method, path, body), 404, 'AUD-1');
  });

  it.each(CONTROL)('worker: %s %s is 404', async (method, path) => {
    const res = await workerApp.inject({
      method: method as 'GET',
      url: path,
      ...(method === 'GET' ? {} : { payload: {} }),
      headers: { authorization: 'Bearer operator' },
    });
    const answer: Response = {
      status: res.statusCode,
      headers: new Headers(res.headers as Record<string, string>),
      text: res.body,
      body: res.json(),
    };
    expectProblem(answer, 404, 'AUD-1');
  });

  it('the OpenAPI document names no control route', async () => {
    const doc = await server.request('GET', '/openapi.json');
    expect(Object.keys(doc.body.paths).filter((p) => p.startsWith('/_emulator'))).toEqual([]);
  });
});
