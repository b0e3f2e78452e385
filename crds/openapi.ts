/**
 * zod schema → Kubernetes structural openAPIV3Schema.
 * zod emits OpenAPI 3.0 JSON Schema; this pass removes what a structural schema forbids
 * (additionalProperties: false, propertyNames, empty schemas) and keeps what it allows.
 */
import { z } from 'zod';

export type JsonSchema = { [k: string]: unknown };

const PRESERVE = 'x-kubernetes-preserve-unknown-fields';

function isObj(v: unknown): v is JsonSchema {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function toStructural(node: unknown): JsonSchema {
  if (!isObj(node)) return { [PRESERVE]: true };
  const out: JsonSchema = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === '$schema' || k === 'propertyNames' || k === 'id' || k === '$id') continue;
    if (k === 'properties' && isObj(v)) {
      out.properties = Object.fromEntries(Object.entries(v).map(([p, s]) => [p, toStructural(s)]));
    } else if (k === 'items') {
      out.items = toStructural(v);
    } else if (k === 'additionalProperties') {
      if (v === false) continue;
      if (isObj(v) && Object.keys(v).length === 0) {
        out[PRESERVE] = true; // loose object / record of unknown
        continue;
      }
      out.additionalProperties = toStructural(v);
    } else if ((k === 'anyOf' || k === 'oneOf' || k === 'allOf') && Array.isArray(v)) {
      out[k] = v.map((s) => toStructural(s));
    } else {
      out[k] = v;
    }
  }
  // An object with both properties and additionalProperties is not structural: keep the properties.
  if (out.properties && out.additionalProperties) {
    delete out.additionalProperties;
    out[PRESERVE] = true;
  }
  if (!out.type && !out.anyOf && !out.oneOf && !out.allOf && !out[PRESERVE]) out[PRESERVE] = true;
  if (out[PRESERVE] && out.type === undefined && !out.properties) delete out.type;
  return out;
}

export function openApiSchema(schema: z.ZodType): JsonSchema {
  const json = z.toJSONSchema(schema, { target: 'openapi-3.0', io: 'input', unrepresentable: 'any' });
  return toStructural(json);
}
