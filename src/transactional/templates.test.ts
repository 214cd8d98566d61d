import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Problem } from '../core/problems.ts';
import { checkTemplates, htmlToText, renderParts } from './templates.ts';
import { readTracking, signTracking, trackingKey, trackLinks } from './tracking.ts';

const refusal = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (err: unknown) => err as Problem,
  );

describe('templates (Liquid through liquidjs)', () => {
  it('a template that does not parse is a 400 (AUD-2101) naming the field, line and column', async () => {
    const err = await refusal(
      checkTemplates({ subject: 'Hi', html: '<p>\n{% if x %}unclosed' }, { html: 'email_html' }),
    );
    expect(err).toBeInstanceOf(Problem);
    expect(err!.code).toBe('AUD-2101');
    expect(err!.detail).toMatch(/^email_html is not a valid template: .*line:2/);
    expect((await refusal(checkTemplates({ subject: '{{ name | no_such_filter }}' })))!.detail).toMatch(
      /^subject is not a valid template: .*no_such_filter/,
    );
  });

  it('templates are self-contained: include, render and layout are refused when checked, so no file is ever read', async () => {
    for (const tag of ['include', 'render', 'layout']) {
      expect((await refusal(checkTemplates({ html: `{% ${tag} '/etc/passwd' %}` })))!.detail).toMatch(
        new RegExp(`the ${tag} tag is not available`),
      );
    }
  });

  it('a template runs no code and reads no property an object does not own', async () => {
    const parts = await renderParts(
      { subject: '{{ name.constructor }}{{ name.__proto__ }}{{ items.size }}', preheader: '', html: '', text: '' },
      { name: 'x', items: [1, 2] },
    );
    expect(parts.subject).toBe('2');
  });

  it('a template that would hold the worker stops at the render limit, and the error names the part', async () => {
    const err = await refusal(
      renderParts(
        {
          subject: '',
          preheader: '',
          html: '{% for i in (1..100000000) %}{% for j in (1..100000000) %}x{% endfor %}{% endfor %}',
          text: null,
        },
        {},
      ),
    );
    expect(String(err)).toMatch(/the html template failed to render: .*limit/);
  });

  it('the HTML body escapes what it outputs, unless `raw`; subject and text do not', async () => {
    const parts = await renderParts(
      { subject: 'A {{ v }}', preheader: '{{ v }}', html: '{{ v }} {{ v | raw }}', text: '{{ v }}' },
      { v: '<b>&' },
    );
    expect(parts).toEqual({ subject: 'A <b>&', preheader: '<b>&', html: '&lt;b&gt;&amp; <b>&', text: '<b>&' });
  });

  it('the text alternative of HTML: blocks and breaks as lines, list items, links with their address, entities decoded, head and style left out', () => {
    const html =
      '<html><head><title>T</title><style>p{color:red}</style></head><body><h1>Hello&nbsp;there</h1><p>Line one<br>line   two</p><ul><li>first</li><li>second</li></ul><p><a href="https://x.example/?a=1&amp;b=2">the <b>link</b></a> &lt;ok&gt; &#8364;</p></body></html>';
    expect(htmlToText(html)).toBe(
      'Hello there\n\nLine one\nline two\n\n* first\n* second\n\nthe link (https://x.example/?a=1&b=2) <ok> €',
    );
  });
});

describe('tracking links', () => {
  const key = trackingKey('secret');
  const target = { accountId: '12', transactionId: crypto.randomUUID() };

  it('a signed token reads back; one changed, of another kind or signed with another key is refused (AUD-2102)', () => {
    const token = signTracking(key, 'click', { ...target, link: 3 });
    expect(readTracking(key, 'click', token)).toEqual({ ...target, link: 3 });
    const refused = (kind: 'open' | 'click' | 'unsubscribe', t: string) => {
      try {
        readTracking(key, kind, t);
      } catch (err) {
        return (err as Problem).code;
      }
      return 'read';
    };
    expect(refused('click', token.replace('.3.', '.4.'))).toBe('AUD-2102');
    expect(refused('click', token.replace(/^12\./, '13.'))).toBe('AUD-2102');
    expect(refused('open', token)).toBe('AUD-2102');
    expect(refused('click', signTracking(trackingKey('another secret'), 'click', { ...target, link: 3 }))).toBe(
      'AUD-2102',
    );
    expect(refused('open', signTracking(key, 'unsubscribe', target))).toBe('AUD-2102');
    expect(refused('open', 'garbage')).toBe('AUD-2102');
  });

  it('only http(s) links are tracked, each by its index; their title is the title attribute or the text', () => {
    const { html, links } = trackLinks(
      '<a href="https://a.example/">A <i>one</i></a><a title="Two" href=\'http://b.example/x?y=1&amp;z=2\'>b</a><a href="mailto:x@y">m</a><a href="#top">t</a><a href="https://u.example/">u</a>',
      (i) => `https://t.example/c/${i}`,
      'https://u.example/',
    );
    expect(links).toEqual([
      { url: 'https://a.example/', title: 'A one' },
      { url: 'http://b.example/x?y=1&z=2', title: 'Two' },
    ]);
    expect(html).toBe(
      '<a href="https://t.example/c/0">A <i>one</i></a><a title="Two" href="https://t.example/c/1">b</a><a href="mailto:x@y">m</a><a href="#top">t</a><a href="https://u.example/">u</a>',
    );
  });
});
