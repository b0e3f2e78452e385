/**
 * What zod cannot see in a parsed JSON/YAML document, checked before it is validated:
 * - an own key named `__proto__`: JSON.parse and the yaml package keep it as a plain key, but zod's
 *   records drop it without a word, so `access_rights: {"__proto__": …}` would come out as an empty
 *   map — a key restricted to one API would reach every API;
 * - nesting deeper than MAX_JSON_DEPTH: further on (YAML output, structured clone) deep values overflow
 *   the stack, and no field of gw's resources nests anywhere near that deep.
 * The walk is iterative, so the check itself cannot overflow.
 */
import { MAX_JSON_DEPTH } from './json-depth.js';

export { MAX_JSON_DEPTH };

export interface ShapeProblem {
  path: (string | number)[];
  message: string;
}

const isNested = (v: unknown): v is object => typeof v === 'object' && v !== null;

export function jsonShapeProblem(value: unknown, maxDepth = MAX_JSON_DEPTH): ShapeProblem | undefined {
  const stack: { value: object; path: (string | number)[] }[] = isNested(value) ? [{ value, path: [] }] : [];
  while (stack.length > 0) {
    const { value: v, path } = stack.pop()!;
    if (path.length >= maxDepth) return { path, message: `nested deeper than ${maxDepth} levels` };
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) if (isNested(v[i])) stack.push({ value: v[i], path: [...path, i] });
      continue;
    }
    const keys = Object.keys(v);
    if (keys.includes('__proto__'))
      return { path: [...path, '__proto__'], message: 'the field name __proto__ is not allowed' };
    for (let i = keys.length - 1; i >= 0; i--) {
      const child = (v as Record<string, unknown>)[keys[i]!];
      if (isNested(child)) stack.push({ value: child, path: [...path, keys[i]!] });
    }
  }
  return undefined;
}

/** `a.b.0.c: message`, the way formatZodError names a field. */
export function formatShapeProblem(p: ShapeProblem, prefix: (string | number)[] = []): string {
  return `${[...prefix, ...p.path].join('.') || '(root)'}: ${p.message}`;
}
