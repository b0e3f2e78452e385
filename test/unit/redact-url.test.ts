import { redactUrl, scrub, urlSecrets } from '../../lib/redact-url.js';

describe('URLs in log lines', () => {
  test.each([
    ['http://user:URLPASS@127.0.0.1:22998/x?api_key=QUERYKEY', 'http://***@127.0.0.1:22998/x?api_key=***'],
    ['https://:pw@h.example/a/b?x=1&y=&TOKEN', 'https://***@h.example/a/b?x=***&y=***&***'],
    ['https://user@h.example/', 'https://***@h.example/'],
    ['http://h.example/p#frag', 'http://h.example/p'],
    ['https://h.example:8443/p?q=s%20t', 'https://h.example:8443/p?q=***'],
    ['redis://:secret@redis:6379/0', 'redis://***@redis:6379/0'],
    ['not a url', '[unparseable URL]'],
  ])('%s → %s', (raw, safe) => {
    expect(redactUrl(raw)).toBe(safe);
  });

  test('scrub removes the credentials of a URL from a text quoting it, raw or decoded; short values are left alone', () => {
    const url = 'http://us%40er:p%3Ass!@h.example/x?api_key=QUERY%2FKEY&v=1';
    const text = `GET ${url} failed (user us@er, password p:ss!, key QUERY/KEY) at 127.0.0.1`;
    const out = scrub(text, urlSecrets(url));
    for (const s of ['us%40er', 'us@er', 'p%3Ass!', 'p:ss!', 'QUERY%2FKEY', 'QUERY/KEY']) expect(out).not.toContain(s);
    expect(out).toContain('127.0.0.1'); // "1" (v=1) is too short to scrub
  });
});
