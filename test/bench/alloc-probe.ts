/**
 * Preloaded (`node --import dist/test/bench/alloc-probe.js`) into a proxy measured by alloc.ts: over the
 * IPC channel, 'start' begins counting heap bytes allocated and 'stop' answers with the count.
 * V8 has no running total of allocated bytes, so it is summed from v8.GCProfiler: what the heap grew by
 * between consecutive GCs (used before a GC − used after the previous one) plus the growth since the last.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { GCProfiler, getHeapStatistics } from 'node:v8';

/** GW_ALLOC_PROFILE=file: also a sampling allocation profile of the counted requests (every allocation
 * sampled, collected or not, unlike --heap-prof which keeps only what is alive at exit); open in DevTools. */
const PROFILE = process.env.GW_ALLOC_PROFILE;
let session: Session | undefined;

let profiler: GCProfiler | undefined;
let startUsed = 0;

process.on('message', async (m: unknown) => {
  if (m === 'start') {
    if (PROFILE) {
      session = new Session();
      session.connect();
      await session.post('HeapProfiler.startSampling', {
        samplingInterval: 1024,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      });
    }
    profiler = new GCProfiler();
    profiler.start();
    startUsed = getHeapStatistics().used_heap_size;
    process.send?.({ started: true });
  } else if (m === 'stop' && profiler) {
    const endUsed = getHeapStatistics().used_heap_size;
    const r = profiler.stop();
    profiler = undefined;
    let allocated = 0;
    let prev = startUsed;
    let scavenges = 0;
    let scavengeMs = 0;
    for (const s of r?.statistics ?? []) {
      allocated += Math.max(0, s.beforeGC.heapStatistics.usedHeapSize - prev);
      prev = s.afterGC.heapStatistics.usedHeapSize;
      if (s.gcType === 'Scavenge') {
        scavenges++;
        scavengeMs += s.cost / 1000;
      }
    }
    allocated += Math.max(0, endUsed - prev);
    if (session) {
      const { profile } = await session.post('HeapProfiler.stopSampling');
      writeFileSync(PROFILE!, JSON.stringify(profile));
      session.disconnect();
      session = undefined;
    }
    process.send?.({ allocated, gcs: r?.statistics.length ?? 0, scavenges, scavengeMs });
  }
});
