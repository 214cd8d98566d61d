import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import { parseBracketForm } from './plugins/body-parsers.ts';
import { Problem } from '../core/problems.ts';
import { server, httpServer } from '../../test/http-server.ts';

httpServer();

describe('form bodies (COMP-13, AUTH-02)', () => {
  it('parseBracketForm turns bracket keys into arrays of objects (COMP-13)', () => {
    expect(parseBracketForm('profiles[0][keyspace_discriminator]=a&profiles[1][profile_key]=b')).toEqual({
      profiles: [{ keyspace_discriminator: 'a' }, { profile_key: 'b' }],
    });
    expect(
      parseBracketForm(
        'profiles[0][keyspace_discriminator]=com.vendor1.keyspaces.email&profiles[0][profile_key]=a%2Bb%40c.com&x=1',
      ),
    ).toEqual({
      profiles: [{ keyspace_discriminator: 'com.vendor1.keyspaces.email', profile_key: 'a+b@c.com' }],
      x: '1',
    });
    expect(parseBracketForm('ids[]=a&ids[]=b')).toEqual({ ids: ['a', 'b'] });
    expect(parseBracketForm('a[2]=x')).toEqual({ a: { 2: 'x' } });
  });

  it('parseBracketForm refuses prototype-pollution keys and conflicting fields (COMP-13)', () => {
    for (const body of [
      '__proto__[polluted]=1',
      'a[__proto__][polluted]=1',
      'constructor[prototype][polluted]=1',
      'a[0][prototype]=1',
    ]) {
      expect(() => parseBracketForm(body), body).toThrow(Problem);
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(() => parseBracketForm('a=1&a[b]=2')).toThrow(Problem);
    expect(() => parseBracketForm('a]b=1')).toThrow(Problem);
  });

  it('POST /oauth/token accepts a form body (AUTH-02, COMP-13)', async () => {
    const { clientId, clientSecret } = await server.createAccount();
    const raw = new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: clientId,
      client_secret: clientSecret,
    }).toString();
    const res = await server.request('POST', '/oauth/token', {
      raw,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      access_token: expect.any(String),
      token_type: 'Bearer',
      expires_in: expect.any(Number),
    });
    expect((await server.request('GET', '/audience/sections', { token: res.body.access_token })).status).toBe(200);
  });

  it('POST /oauth/token refuses a form body with a prototype key as a 400 problem (COMP-13)', async () => {
    const res = await server.request('POST', '/oauth/token', {
      raw: '__proto__[x]=1&grant_type=client_credentials',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expectProblem(res, 400);
  });
});
