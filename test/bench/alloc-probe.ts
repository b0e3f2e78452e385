/**
 * Preloaded (`node --import dist/test/bench/alloc-probe.js`) into a proxy measured by alloc.ts: over the
 * IPC channel, 'start' begins counting heap bytes allocated and 'stop' answers with the count.
 * V8 has no running total of allocated bytes, so it is summed from v8.GCProfiler: what the heap grew by
 * between consecutive GCs (used before a GC − used after the previous one) plus the growth since the last.
 */
import { GCProfiler, getHeapStatistics } from 'node:v8';

let profiler: GCProfiler | undefined;
let startUsed = 0;

process.on('message', (m: unknown) => {
  if (m === 'start') {
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
    process.send?.({ allocated, gcs: r?.statistics.length ?? 0, scavenges, scavengeMs });
  }
});
