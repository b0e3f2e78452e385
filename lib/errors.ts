import type { z } from 'zod';

/**
 * The first line of a parser's message: the yaml package appends a code frame (the offending line and a
 * caret) after "… at line L, column C:", and gw reports bad input in one line (docs/contract.md#processes).
 */
export function firstLine(message: string): string {
  const nl = message.indexOf('\n');
  return (nl === -1 ? message : message.slice(0, nl)).replace(/:$/, '');
}

/** A zod issue as gw names it: the field path joined with `.` (`(root)` for the value itself) and its message. */
export interface FieldIssue {
  field: string;
  message: string;
}

export function zodIssues(err: z.ZodError, prefix: (string | number)[] = []): FieldIssue[] {
  return err.issues.map((i) => ({
    field: [...prefix, ...i.path.map((p) => (typeof p === 'symbol' ? String(p) : p))].join('.') || '(root)',
    message: i.message,
  }));
}

/** One line per issue: `field.path: message`. */
export function formatZodError(err: z.ZodError, prefix: (string | number)[] = []): string {
  return zodIssues(err, prefix)
    .map((i) => `${i.field}: ${i.message}`)
    .join('; ');
}
