/** The import graph's layering (scripts/check-layers.ts, run by `make lint`): the tree as it is, and the checker itself. */
import { describe, expect, test } from '@jest/globals';
import { layerViolations, productFiles } from '../../scripts/check-layers.js';

describe('import layering', () => {
  test('the tree: no control plane → sidecar/, no lib/ → anything above it, no cycle', () => {
    expect(layerViolations(productFiles(process.cwd()))).toEqual([]);
  });

  test('the checker finds each kind of break (type-only and dynamic imports too)', () => {
    const files = new Map([
      ['lib/a.ts', "import type { C } from '../contract/c.js';"],
      ['contract/c.ts', 'export type C = 1;'],
      ['controller/o.ts', "const m = await import('../sidecar/engine/engine.js');"],
      ['sidecar/engine/engine.ts', "import { x } from '../../controller/o.js';"],
      ['cli/x.ts', "import { y } from './y.js';"],
      ['cli/y.ts', "import { x } from './x.js';"],
      ['cli/ok.ts', "import { o } from '../controller/o.js';\nimport { s } from '../sidecar/engine/engine.js';"],
    ]);
    expect(layerViolations(files).sort()).toEqual(
      [
        'lib/a.ts imports contract/c.ts: lib/ may not import contract/',
        'controller/o.ts imports sidecar/engine/engine.ts: controller/ may not import sidecar/',
        'sidecar/engine/engine.ts imports controller/o.ts: sidecar/ may not import controller/',
        'import cycle: controller/o.ts → sidecar/engine/engine.ts',
        'import cycle: cli/x.ts → cli/y.ts',
      ].sort(),
    );
  });
});
