import type { z } from 'zod';

/** One line per issue: `field.path: message`. */
export function formatZodError(err: z.ZodError, prefix: (string | number)[] = []): string {
  return err.issues
    .map((i) => {
      const path = [...prefix, ...i.path.map((p) => (typeof p === 'symbol' ? String(p) : p))].join('.');
      return `${path || '(root)'}: ${i.message}`;
    })
    .join('; ');
}
