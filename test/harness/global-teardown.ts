export default async function globalTeardown(): Promise<void> {
  await globalThis.__GW_KUBE__?.stop();
  await globalThis.__GW_REDIS__?.stop();
}
