/**
 * Path pattern fields (endpoint paths, allowed URLs): zod refuses what the gateway's linear-time matcher
 * cannot compile (lib/path-pattern.ts), naming why; the CRD carries CEL twins for what a regex over the
 * pattern's text can tell — backreferences and lookaround assertions — so `kubectl apply` is refused by
 * the API server too, naming the field. The twin looks outside character classes only (`[(?=]` is three
 * literal characters) and skips escaped characters (`\\1` is a backslash and a 1), so it never refuses a
 * pattern zod accepts. The length bound, and the item bounds of the lists and maps that hold patterns,
 * keep the rule's estimated cost within the API server's budget.
 */
import { z } from 'zod';
import { refineEndpointPattern } from '../../lib/path-pattern.js';

export const MAX_PATTERN_LENGTH = 256;
/** An API's extended_paths rules. */
export const MAX_ENDPOINT_RULES = 1000;
/** Patterns per list of one API in a key's or policy's access_rights (allowed_urls, endpoints). */
export const MAX_PATTERNS_PER_RIGHT = 64;
/** APIs in one key's or policy's access_rights. */
export const MAX_ACCESS_RIGHTS = 100;

/**
 * RE2 (CEL's `matches`): a backreference (`\1`…`\9`, `\k`) or the opening of a lookaround (`(?=`, `(?!`,
 * `(?<=`, `(?<!`) after text read token by token — an escaped character, a character class, any other
 * character — so neither an escaped one nor one inside a class counts. One short expression: the API
 * server's cost estimate grows with the regex's length times the string's.
 */
const NON_LINEAR = String.raw`^([^\\\[]|\\.|\[([^\]\\]|\\.)*\])*(\\[1-9k]|\(\?<?[=!])`;

export const PATTERN_RULE = {
  rule: `!self.matches(r'${NON_LINEAR}')`,
  message:
    'must not use backreferences (\\1…\\9, \\k<name>) or lookaround assertions ((?=, (?!, (?<=, (?<!): they cannot be matched in linear time',
};

/** A path pattern field: a literal path, `{name}` wildcards or a regex the gateway matches in linear time. */
export function pathPattern(description: string) {
  return z
    .string()
    .min(1)
    .max(MAX_PATTERN_LENGTH)
    .meta({ 'x-kubernetes-validations': [PATTERN_RULE] })
    .superRefine(refineEndpointPattern)
    .describe(description);
}
