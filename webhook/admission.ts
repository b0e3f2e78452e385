/**
 * The admission.k8s.io/v1 AdmissionReview envelope, validated with zod. Only the fields the webhook
 * reads are typed; the Pod itself is kept loose (every unknown field passes through untouched).
 */
import { z } from 'zod';

const ContainerPort = z.looseObject({
  name: z.string().optional(),
  containerPort: z.number().int(),
  protocol: z.string().optional(),
});

const Container = z.looseObject({
  name: z.string(),
  ports: z.array(ContainerPort).optional(),
});

export const PodSchema = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.string().optional(),
  metadata: z
    .looseObject({
      name: z.string().optional(),
      generateName: z.string().optional(),
      namespace: z.string().optional(),
      annotations: z.record(z.string(), z.string()).optional(),
      labels: z.record(z.string(), z.string()).optional(),
    })
    .optional(),
  spec: z.looseObject({
    containers: z.array(Container).min(1),
    automountServiceAccountToken: z.boolean().optional(),
  }),
});
export type Pod = z.infer<typeof PodSchema>;
export type PodContainer = z.infer<typeof Container>;

export const AdmissionReviewSchema = z.object({
  apiVersion: z.literal('admission.k8s.io/v1'),
  kind: z.literal('AdmissionReview'),
  request: z.looseObject({
    uid: z.string().min(1),
    kind: z.looseObject({ group: z.string(), version: z.string(), kind: z.string() }),
    namespace: z.string().optional(),
    operation: z.string(),
    dryRun: z.boolean().optional(),
    object: z.unknown(),
  }),
});

export interface JsonPatchOp {
  op: 'add' | 'replace' | 'remove';
  path: string;
  value?: unknown;
}

export interface AdmissionResponseBody {
  apiVersion: 'admission.k8s.io/v1';
  kind: 'AdmissionReview';
  response: {
    uid: string;
    allowed: boolean;
    patchType?: 'JSONPatch';
    patch?: string;
    warnings?: string[];
    status?: { code: number; message: string };
  };
}

export function admissionResponse(
  uid: string,
  patch: JsonPatchOp[] | undefined,
  warnings: string[],
): AdmissionResponseBody {
  const response: AdmissionResponseBody['response'] = { uid, allowed: true };
  if (patch && patch.length > 0) {
    response.patchType = 'JSONPatch';
    response.patch = Buffer.from(JSON.stringify(patch)).toString('base64');
  }
  if (warnings.length > 0) response.warnings = warnings;
  return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response };
}

/** A zod error as one line naming the field. */
export function describeZodError(e: z.ZodError): string {
  const i = e.issues[0];
  return i ? `${i.path.join('.') || '(root)'}: ${i.message}` : 'invalid';
}
