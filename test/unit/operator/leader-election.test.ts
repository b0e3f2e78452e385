import {
  LeaderElector,
  microTime,
  type LeaseClient,
  type LeaseRecord,
  type LeaseSpec,
} from '../../../controller/leader-election.js';
import { FakeTimers } from './fake-timers.js';

/** One Lease in memory with resourceVersion checks, shared by candidates; writes are counted. */
class MemoryLease implements LeaseClient {
  rec?: LeaseRecord;
  rv = 0;
  writes = 0;
  down = false;
  async get(): Promise<LeaseRecord | undefined> {
    if (this.down) throw new Error('apiserver down');
    return this.rec && { spec: { ...this.rec.spec }, resourceVersion: this.rec.resourceVersion };
  }
  async create(spec: LeaseSpec): Promise<LeaseRecord> {
    if (this.down) throw new Error('apiserver down');
    if (this.rec) throw Object.assign(new Error('exists'), { statusCode: 409 });
    this.writes++;
    this.rec = { spec: { ...spec }, resourceVersion: String(++this.rv) };
    return this.rec;
  }
  async update(spec: LeaseSpec, resourceVersion: string | undefined): Promise<LeaseRecord> {
    if (this.down) throw new Error('apiserver down');
    if (!this.rec || resourceVersion !== this.rec.resourceVersion)
      throw Object.assign(new Error('conflict'), { statusCode: 409 });
    this.writes++;
    this.rec = { spec: { ...spec }, resourceVersion: String(++this.rv) };
    return this.rec;
  }
}

function candidate(lease: LeaseClient, identity: string, timers: FakeTimers, log: string[]) {
  return new LeaderElector({
    client: lease,
    identity,
    leaseDurationMs: 15_000,
    renewDeadlineMs: 10_000,
    retryPeriodMs: 2_000,
    timers,
    onStartedLeading: () => log.push(`${identity}+`),
    onStoppedLeading: () => log.push(`${identity}-`),
  });
}

describe('leader election on a Lease', () => {
  test('one of two candidates leads; the other waits while the lease is renewed', async () => {
    const timers = new FakeTimers();
    const lease = new MemoryLease();
    const log: string[] = [];
    const a = candidate(lease, 'a', timers, log);
    const b = candidate(lease, 'b', timers, log);
    a.start();
    await timers.advance(0);
    b.start();
    await timers.advance(60_000);
    expect(log).toEqual(['a+']);
    expect(a.isLeader()).toBe(true);
    expect(b.isLeader()).toBe(false);
    expect(lease.rec?.spec.holderIdentity).toBe('a');
  });

  test('a dead leader is replaced after the lease duration (measured from the last observed change), not before', async () => {
    const timers = new FakeTimers();
    const lease = new MemoryLease();
    const log: string[] = [];
    const a = candidate(lease, 'a', timers, log);
    const b = candidate(lease, 'b', timers, log);
    a.start();
    await timers.advance(0);
    b.start();
    await timers.advance(10_000);
    await a.stop(false); // crash: no release
    const killedAt = timers.now();
    let tookOverAt = 0;
    for (let i = 0; i < 400 && !b.isLeader(); i++) {
      await timers.advance(100);
      if (b.isLeader()) tookOverAt = timers.now();
    }
    const handover = tookOverAt - killedAt;
    expect(handover).toBeGreaterThan(15_000 - 2_000 - 1); // not before the lease could have expired
    expect(handover).toBeLessThanOrEqual(15_000 + 2_000); // within lease + one retry period
    expect(lease.rec?.spec.holderIdentity).toBe('b');
    expect(lease.rec?.spec.leaseTransitions).toBe(1);
  });

  test('a released lease is taken over at the next retry', async () => {
    const timers = new FakeTimers();
    const lease = new MemoryLease();
    const log: string[] = [];
    const a = candidate(lease, 'a', timers, log);
    const b = candidate(lease, 'b', timers, log);
    a.start();
    await timers.advance(0);
    b.start();
    await timers.advance(4_000);
    await a.stop(true);
    await timers.advance(2_100);
    expect(b.isLeader()).toBe(true);
    expect(log).toEqual(['a+', 'a-', 'b+']);
  });

  test('a leader that cannot renew steps down within the renew deadline, before anyone may take over', async () => {
    const timers = new FakeTimers();
    const lease = new MemoryLease();
    const log: string[] = [];
    const a = candidate(lease, 'a', timers, log);
    a.start();
    await timers.advance(0);
    expect(a.isLeader()).toBe(true);
    lease.down = true;
    const downAt = timers.now();
    let steppedDown = 0;
    for (let i = 0; i < 200 && a.isLeader(); i++) {
      await timers.advance(100);
      if (!a.isLeader()) steppedDown = timers.now();
    }
    expect(steppedDown - downAt).toBeGreaterThanOrEqual(10_000 - 2_000);
    expect(steppedDown - downAt).toBeLessThan(15_000);
    expect(log).toEqual(['a+', 'a-']);
  });

  test('renewals: one write per retry period by the leader only', async () => {
    const timers = new FakeTimers();
    const lease = new MemoryLease();
    const log: string[] = [];
    const a = candidate(lease, 'a', timers, log);
    const b = candidate(lease, 'b', timers, log);
    a.start();
    await timers.advance(0);
    b.start();
    const before = lease.writes;
    await timers.advance(20_000);
    expect(lease.writes - before).toBe(10);
  });

  test('MicroTime has six fractional digits', () => {
    expect(microTime(Date.UTC(2026, 0, 2, 3, 4, 5, 678))).toBe('2026-01-02T03:04:05.678000Z');
  });
});
