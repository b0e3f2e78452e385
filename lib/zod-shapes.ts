/**
 * A zod schema's validation made cheaper for values that use few of its fields, the schema still the
 * rule. For each shape of value (which of an object schema's fields are present, at every nesting level
 * where the schema has an object), the schema is narrowed once to those fields: an optional field that is
 * absent is dropped (zod would only have checked that it is absent), every other field, check and
 * catch-all is the schema's own. The narrowed schema accepts exactly what the whole one accepts for that
 * shape and returns the same value (fields in the schema's order); when it refuses a value, the whole
 * schema is run again for its error, so the messages are the schema's. A resource kind with ~45 optional
 * fields of which a manifest sets three validates several times faster.
 */
import type { z } from 'zod';
import { util, type $ZodType } from 'zod/v4/core';

type Any = $ZodType;
type Def = Any['_zod']['def'] & {
  shape?: Record<string, Any>;
  in?: Any;
  out?: Any;
  innerType?: Any;
};

const defOf = (s: Any): Def => s._zod.def as Def;
const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The object schema a value at this position is checked against (through optional, nullable, a non-transforming pipe). */
function objectAt(s: Any): Any | undefined {
  for (let i = 0; i < 8; i++) {
    const d = defOf(s);
    if (d.type === 'object') return s;
    if ((d.type === 'optional' || d.type === 'nullable') && d.innerType) s = d.innerType;
    else if (d.type === 'pipe' && d.in && d.out && passesThrough(d.in)) s = d.out;
    else return undefined;
  }
  return undefined;
}

/** A pipe's input side that returns its input unchanged (z.unknown()/z.any() with refinements). */
const passesThrough = (s: Any): boolean => defOf(s).type === 'unknown' || defOf(s).type === 'any';

/** `value`'s shape against `schema`: its fields that the object schemas name, nested ones in braces. */
function signature(schema: Any, value: unknown, out: string[]): void {
  const obj = objectAt(schema);
  if (!obj || !isPlainObject(value)) return;
  const shape = defOf(obj).shape!;
  out.push('{');
  for (const k in value) {
    if (!Object.hasOwn(value, k) || !Object.hasOwn(shape, k)) continue;
    out.push(k, ',');
    signature(shape[k]!, value[k], out);
  }
  out.push('}');
}

/** `schema` narrowed to `value`'s shape (see the file comment). */
function narrow(schema: Any, value: unknown): Any {
  if (!isPlainObject(value)) return schema;
  const d = defOf(schema);
  if ((d.type === 'optional' || d.type === 'nullable') && d.innerType) {
    const inner = narrow(d.innerType, value);
    return inner === d.innerType ? schema : util.clone(schema, util.mergeDefs(d, { innerType: inner }));
  }
  if (d.type === 'pipe' && d.in && d.out && passesThrough(d.in)) {
    const out = narrow(d.out, value);
    return out === d.out ? schema : util.clone(schema, util.mergeDefs(d, { out }));
  }
  if (d.type !== 'object') return schema;
  const shape = d.shape!;
  const next: Record<string, Any> = {};
  for (const k of Object.keys(shape)) {
    const field = shape[k]!;
    if (Object.hasOwn(value, k)) next[k] = narrow(field, value[k]);
    else if (defOf(field).type !== 'optional') next[k] = field; // a default or a required field: zod decides
  }
  return util.clone(schema, util.mergeDefs(d, { shape: next }));
}

/** At most this many shapes are kept per schema; values of other shapes are checked by the whole schema. */
const MAX_SHAPES = 256;

export interface ShapeValidator<T> {
  safeParse(value: unknown): z.ZodSafeParseResult<T>;
}

/** `schema.safeParse`, through the narrowed schema of each value's shape (the whole schema's error on failure). */
export function shapeValidator<S extends z.ZodType>(schema: S): ShapeValidator<z.output<S>> {
  const whole = schema as unknown as Any;
  const narrowed = new Map<string, S>();
  const parts: string[] = [];
  return {
    safeParse(value) {
      parts.length = 0;
      signature(whole, value, parts);
      const sig = parts.join('');
      let s = narrowed.get(sig);
      if (!s && narrowed.size < MAX_SHAPES) {
        s = narrow(whole, value) as unknown as S;
        narrowed.set(sig, s);
      }
      if (s) {
        const r = s.safeParse(value);
        if (r.success) return r as z.ZodSafeParseResult<z.output<S>>;
      }
      return schema.safeParse(value) as z.ZodSafeParseResult<z.output<S>>;
    },
  };
}
