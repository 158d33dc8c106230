import { describe, expect, it } from 'vitest';
import { reapExpiredLeases } from '../../../src/engine';
import { claimOne, client, createKey, enqueueJob, request, success, uniqueName } from './support/api';
import { sharedDatabase } from './support/database';

const api = client();

describe('GET /v1/stats health', () => {
  it("reports a tenant's oldest waiting job and its reaped leases; the database's vacuum signs only to an unbound key", async () => {
    const tenant = uniqueName('health-tenant');
    const queue = uniqueName('health');
    const tenantKey = await createKey(['read'], tenant);
    const before = (await success(client(tenantKey).v1.stats.$get())).health;
    expect(before).toMatchObject({ oldestWaitingSeconds: null, expiredLeasesReaped: 0 });

    // A worker that claims a job and vanishes: once its lease is over, the reaper hands the job back.
    await enqueueJob(queue, { tenant });
    const { id } = await claimOne(queue);
    await sharedDatabase().query({
      text: "UPDATE skiplock.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
      params: [id],
    });
    expect((await reapExpiredLeases(sharedDatabase())).map((job) => job.id)).toContain(id);
    await sharedDatabase().query({
      text: "UPDATE skiplock.jobs SET run_at = now() - interval '90 seconds' WHERE id = $1",
      params: [id],
    });

    const { health } = await success(client(tenantKey).v1.stats.$get());
    // The tenant's own signs, and none of the database's (other tenants' rows, other sessions).
    expect(health).toEqual({ expiredLeasesReaped: 1, oldestWaitingSeconds: expect.any(Number) });
    expect(health.oldestWaitingSeconds).toBeGreaterThanOrEqual(89);

    const admin = (await success(api.v1.stats.$get())).health;
    expect(admin.expiredLeasesReaped).toBeGreaterThanOrEqual(1);
    expect(admin.oldestWaitingSeconds).toBeGreaterThanOrEqual(89);
    // Vacuum's signs are the database's, for keys that see every tenant.
    expect(admin.deadTuples!.map((table) => table.table)).toEqual(expect.arrayContaining(['jobs', 'job_events']));
    expect(admin.deadTuples!.every((table) => Number.isInteger(table.deadTuples) && table.deadTuples >= 0)).toBe(true);
    expect(Object.keys(admin)).toEqual(expect.arrayContaining(['oldestSnapshotSeconds', 'oldestSnapshotPid']));
  });

  it('is described in the OpenAPI document', async () => {
    const document = await (await request('/v1/openapi.json')).json<{
      components: { schemas: Record<string, { properties?: object }> };
    }>();
    expect(Object.keys(document.components.schemas.Stats?.properties ?? {})).toEqual(['stats', 'health']);
    expect(Object.keys(document.components.schemas.QueueHealth?.properties ?? {})).toEqual([
      'oldestWaitingSeconds',
      'expiredLeasesReaped',
      'deadTuples',
      'oldestSnapshotSeconds',
      'oldestSnapshotPid',
    ]);
  });
});
