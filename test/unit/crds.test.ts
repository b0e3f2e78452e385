/**
 * The generated CRDs: committed YAML is never stale, `generate --check` fails on a stale file, every
 * field carries a description (kubectl explain), and each kind has its status subresource, printer
 * columns and short names.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parse } from 'yaml';
import { generatedFiles } from '../../crds/generate.js';
import { KINDS, KIND_NAMES } from '../../crds/kinds.js';

type Node = {
  description?: string;
  properties?: Record<string, Node>;
  items?: Node;
  additionalProperties?: Node | boolean;
  [k: string]: unknown;
};

interface Crd {
  metadata: { name: string };
  spec: {
    scope: string;
    names: { kind: string; plural: string; shortNames: string[] };
    versions: {
      name: string;
      subresources?: { status?: object };
      additionalPrinterColumns: { name: string; jsonPath: string }[];
      schema: { openAPIV3Schema: Node };
    }[];
  };
}

/** Dotted paths of every property without a description. */
function undescribed(node: Node, path: string, out: string[] = []): string[] {
  for (const [k, v] of Object.entries(node.properties ?? {})) {
    const p = `${path}.${k}`;
    if (!v.description) out.push(p);
    undescribed(v, p, out);
  }
  if (node.items) undescribed(node.items, `${path}[]`, out);
  if (typeof node.additionalProperties === 'object') undescribed(node.additionalProperties, `${path}{}`, out);
  return out;
}

const GENERATOR = resolve('dist/crds/generate.js');

describe('generated CRDs', () => {
  const files = generatedFiles();
  const crds = new Map([...files].map(([f, t]) => [f, parse(t) as Crd]));

  test('the committed crds/*.yaml are what the zod schemas generate (a stale file fails the run)', () => {
    expect(files.size).toBe(KIND_NAMES.length);
    for (const [file, text] of files) {
      expect(`${file}\n${readFileSync(join('crds', file), 'utf8')}`).toBe(`${file}\n${text}`);
    }
  });

  test('`generate --check` exits 1 naming a stale file and 0 when all are fresh', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-crds-'));
    try {
      execFileSync(process.execPath, [GENERATOR, dir]);
      const ok = spawnSync(process.execPath, [GENERATOR, '--check', dir], { encoding: 'utf8' });
      expect(ok.status).toBe(0);
      const victim = join(dir, 'policies.gw.io.yaml');
      writeFileSync(
        victim,
        readFileSync(victim, 'utf8').replace('Maximum requests permitted per window.', 'edited by hand'),
      );
      const stale = spawnSync(process.execPath, [GENERATOR, '--check', dir], { encoding: 'utf8' });
      expect(stale.status).toBe(1);
      expect(stale.stderr).toContain('stale CRD');
      expect(stale.stderr).toContain('policies.gw.io.yaml');
      cpSync(join('crds', 'policies.gw.io.yaml'), victim);
      rmSync(join(dir, 'oauthclients.gw.io.yaml'));
      expect(spawnSync(process.execPath, [GENERATOR, '--check', dir], { encoding: 'utf8' }).status).toBe(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test.each(KIND_NAMES)('%s: every field of spec and status has a description (kubectl explain)', (kind) => {
    const crd = crds.get(`${KINDS[kind].plural}.gw.io.yaml`)!;
    const root = crd.spec.versions[0]!.schema.openAPIV3Schema;
    expect(root.description).toBeTruthy();
    expect(root.properties!.spec!.description).toBeTruthy();
    expect(root.properties!.status!.description).toBeTruthy();
    const missing = [
      ...undescribed(root.properties!.spec!, 'spec'),
      ...undescribed(root.properties!.status!, 'status'),
    ];
    expect(missing).toEqual([]);
  });

  test.each(KIND_NAMES)(
    '%s: namespaced, gw.io/v1alpha1, status subresource with observedGeneration and conditions, short names',
    (kind) => {
      const crd = crds.get(`${KINDS[kind].plural}.gw.io.yaml`)!;
      expect(crd.metadata.name).toBe(`${KINDS[kind].plural}.gw.io`);
      expect(crd.spec.scope).toBe('Namespaced');
      expect(crd.spec.names.shortNames.length).toBeGreaterThan(0);
      const v = crd.spec.versions[0]!;
      expect(v.name).toBe('v1alpha1');
      expect(v.subresources).toEqual({ status: {} });
      const status = v.schema.openAPIV3Schema.properties!.status!;
      expect(status.properties!.observedGeneration!.type).toBe('integer');
      const cond = status.properties!.conditions!.items!;
      expect(Object.keys(cond.properties!)).toEqual(
        expect.arrayContaining(['type', 'status', 'reason', 'message', 'lastTransitionTime', 'observedGeneration']),
      );
      expect(cond.properties!.status!.enum).toEqual(['True', 'False', 'Unknown']);
      expect(v.additionalPrinterColumns.map((c) => c.name)).toContain('Ready');
    },
  );

  test('apidefinitions print listen path, rate, per and Ready', () => {
    const cols = crds.get('apidefinitions.gw.io.yaml')!.spec.versions[0]!.additionalPrinterColumns;
    expect(cols.map((c) => [c.name, c.jsonPath])).toEqual(
      expect.arrayContaining([
        ['Listen', '.status.listenPath'],
        ['Rate', '.status.rate'],
        ['Per', '.status.per'],
        ['Ready', '.status.conditions[?(@.type=="Ready")].status'],
      ]),
    );
  });

  test('the OAS form validates x-gw-streaming with the streaming schema (no free-form hole)', () => {
    const oas =
      crds.get('apidefinitions.gw.io.yaml')!.spec.versions[0]!.schema.openAPIV3Schema.properties!.spec!.properties!
        .oas!;
    const xs = oas.properties!['x-gw-streaming']!;
    expect(Object.keys(xs.properties!)).toEqual(['rate_limit_resources', 'streams']);
  });
});
