import { beforeAll, describe, expect, it } from 'vitest';
import type { ReceivedMail } from '../../test/smtp.ts';
import {
  accountId,
  activity,
  body,
  eventsOf,
  mailOf,
  sendSettled,
  server,
  transactionalServer,
} from '../../test/transactional-http.ts';

// Transactional sends end to end (SPEC §6.3; docs/mail.md): the tracking links of a sent message
// and the events they record.

transactionalServer();

describe('tracking links', () => {
  let id: string;
  let mail: ReceivedMail;
  const key = 'tracked@example.com';
  /** A tracking link of the message, on this server rather than TRACKING_URL. */
  const local = (url: string) => url.replace('https://track.example', '');
  const get = (url: string, headers: Record<string, string> = {}) =>
    fetch(server.url + local(url), { redirect: 'manual', headers });
  beforeAll(async () => {
    ({ id } = await sendSettled(body(key)));
    mail = await mailOf(id);
  });

  it('the open pixel answers a GIF and records OPENED once, with the device', async () => {
    const pixel = /<img src="([^"]+)"/.exec(mail.parsed.html as string)![1];
    for (let i = 0; i < 2; i++) {
      const res = await get(pixel, {
        'user-agent': 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) Mobile/15E148',
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('image/gif');
    }
    const opened = (await eventsOf(key)).filter((e) => e.data.type === 'OPENED');
    expect(opened).toEqual([
      expect.objectContaining({ correlation_id: id, data: { activityId: activity, type: 'OPENED', device: 'MOBILE' } }),
    ]);
  });

  it('a click link redirects to the link the message held and records CLICKED once, with the link', async () => {
    const click = /href="(https:\/\/track\.example\/mail\/click\/[^"]+)"/.exec(mail.parsed.html as string)![1];
    for (let i = 0; i < 2; i++) {
      const res = await get(click, { 'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0' });
      expect(res.status).toBe(302);
      expect(res.headers.get('location')).toBe('https://shop.example/orders/A-17');
    }
    const clicked = (await eventsOf(key)).filter((e) => e.data.type === 'CLICKED');
    expect(clicked).toEqual([
      expect.objectContaining({
        data: {
          activityId: activity,
          type: 'CLICKED',
          device: 'DESKTOP',
          linkId: '0',
          linkUrl: 'https://shop.example/orders/A-17',
          linkTitle: 'Your order',
        },
      }),
    ]);
  });

  it('a forged or altered link is refused (404) and records nothing', async () => {
    const click = /href="(https:\/\/track\.example\/mail\/click\/[^"]+)"/.exec(mail.parsed.html as string)![1];
    const altered = click.replace(/\.0\.([^.]+)$/, '.1.$1');
    const forged = `/mail/click/${accountId}.${id}.0.AAAAAAAAAAAAAAAAAAAAAA`;
    for (const url of [
      altered,
      forged,
      `/mail/open/${accountId}.${id}.AAAAAAAAAAAAAAAAAAAAAA`,
      '/mail/unsubscribe/nothing',
    ]) {
      const res = await get(url);
      expect(res.status).toBe(404);
      expect(res.headers.get('location')).toBeNull();
    }
    expect((await server.request('POST', `/mail/unsubscribe/${accountId}.${id}.AAAAAAAAAAAAAAAAAAAAAA`)).status).toBe(
      404,
    );
  });

  it('List-Unsubscribe-Post one-click (RFC 8058) records UNSUBSCRIBED once and suppresses the address: later sends to it are suppressed', async () => {
    const header = mail.parsed.headerLines.find((h) => h.key === 'list-unsubscribe')!.line;
    const url = /<([^>]+)>/.exec(header)![1];
    expect(mail.parsed.html).toContain(`href="${url}"`);
    // A GET (a mail scanner following the link) shows the page and changes nothing.
    const page = await get(url);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<form method="post">');
    expect((await eventsOf(key)).filter((e) => e.data.type === 'UNSUBSCRIBED')).toEqual([]);
    for (let i = 0; i < 2; i++) {
      const res = await server.request('POST', local(url), {
        raw: 'List-Unsubscribe=One-Click',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      expect(res.status, res.text).toBe(200);
    }
    expect((await eventsOf(key)).filter((e) => e.data.type === 'UNSUBSCRIBED')).toEqual([
      expect.objectContaining({ correlation_id: id }),
    ]);
    expect((await sendSettled(body(key))).status).toBe('suppressed');
  });
});
