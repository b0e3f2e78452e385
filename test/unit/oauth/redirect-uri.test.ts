/** A client's redirect URI is checked by its pattern and parsed as a URL (docs/oauth.md). */
import { OAuthClientSpec, RedirectUri } from '../../../crds/schemas/oauth-client.js';

const spec = (redirect_uri: string): unknown => ({
  api_id: 'orders',
  client_id: 'c1',
  redirect_uri,
  secretRef: { name: 's', key: 'secret' },
});

describe('redirect_uri', () => {
  test.each([
    'https://app.example/cb',
    'https://app.example:8443/cb?x=1',
    'http://127.0.0.1:65535/cb',
    'http://[::1]/cb',
  ])('%s is accepted', (uri) => {
    expect(RedirectUri.safeParse(uri).success).toBe(true);
    expect(OAuthClientSpec.safeParse(spec(uri)).success).toBe(true);
  });

  test.each(['https://evil.example:99999/cb', 'http://localhost:70000/cb', 'https://exa%mple/cb'])(
    '%s matches the pattern but does not parse as a URL: refused, the message says why',
    (uri) => {
      const r = RedirectUri.safeParse(uri);
      expect(r.success).toBe(false);
      expect(r.error?.issues[0]?.message).toMatch(/must parse as a URL/);
      const s = OAuthClientSpec.safeParse(spec(uri));
      expect(s.success).toBe(false);
      expect(s.error?.issues[0]?.path).toEqual(['redirect_uri']);
    },
  );

  test('an empty redirect_uri on a client is still allowed (client_credentials only)', () => {
    expect(OAuthClientSpec.safeParse(spec('')).success).toBe(true);
  });
});
