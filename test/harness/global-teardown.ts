import { rmSync } from 'node:fs';

export default async function globalTeardown(): Promise<void> {
  await globalThis.__GW_KUBE__?.stop();
  await globalThis.__GW_REDIS__?.stop();
  if (globalThis.__GW_TMP__) rmSync(globalThis.__GW_TMP__, { recursive: true, force: true });
}
