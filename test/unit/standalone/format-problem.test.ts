/**
 * `gw validate`'s text lines hold names and values from the manifests: control, bidi and other format
 * characters are escaped, so a manifest cannot forge a line (CR/LF) or colours (ESC) in a CI log.
 */
import { describe, expect, test } from '@jest/globals';
import { formatProblem } from '../../../standalone/validate.js';

describe('formatProblem', () => {
  test('CR, LF, ESC, BEL, U+202E and U+2028 in a name, a file or a message are shown as escapes, on one line', () => {
    const line = formatProblem({
      severity: 'error',
      file: 'a\ngw validate: 0 error(s)\r.yaml',
      document: 0,
      kind: 'Policy',
      namespace: 'default',
      name: 'x\rerror fake.yaml is fine\u001b[31m\u0007\u202e\u2028',
      field: 'metadata.name',
      message: 'must be a DNS-1123 name',
      rule: 'schema',
    });
    expect(line).not.toMatch(/[\p{Cc}\p{Cf}\u2028]/u);
    expect(line).toBe(
      'error a\\u{a}gw validate: 0 error(s)\\u{d}.yaml[0] Policy default/x\\u{d}error fake.yaml is fine\\u{1b}[31m\\u{7}\\u{202e}\\u{2028} metadata.name: must be a DNS-1123 name (schema)',
    );
  });

  test('an ordinary line is unchanged, letters of any script included', () => {
    expect(
      formatProblem({
        severity: 'warning',
        file: 'café.yaml',
        field: '(file)',
        message: 'ключ: not found',
        rule: 'reference',
      }),
    ).toBe('warning café.yaml (file): ключ: not found (reference)');
  });
});
