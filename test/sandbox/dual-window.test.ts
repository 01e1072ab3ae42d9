// Contract test of a source system that enforces two windows at once (an hourly and a
// 10-second limit, scaled down here to 6 per 3 s and 3 per 1 s): every request counts in both, a
// request is refused when either is spent, and the headers report the window nearer to running out
// (the fewest left; of two as near, the one that resets later).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call, link, sleep, start } from './helpers.ts';

test('two windows at once: both enforced, the nearer one reported', async () => {
  const sb = await start({
    rateLimits: {
      accountLimit: 1_000,
      sourceSystemWindows: {
        crmcloud: [
          { limit: 6, windowMs: 3_000 },
          { limit: 3, windowMs: 1_000 },
        ],
      },
    },
  });
  try {
    const a = await link(sb, 'crmcloud');
    const seen: string[] = [];
    const hit = async () => {
      const r = await call(sb, 'GET', '/customers?per_page=1', { headers: a.headers });
      seen.push(`${r.status}:${r.headers.get('crmcloud-ratelimit-total')}/${r.headers.get('crmcloud-ratelimit-remaining')}`);
      return r;
    };
    // The short window is nearer while the long one has more left: 3 per second.
    for (let k = 0; k < 3; k++) assert.equal((await hit()).status, 200);
    assert.equal((await hit()).status, 429);
    assert.deepEqual(seen, ['200:3/2', '200:3/1', '200:3/0', '429:3/0']);
    await sleep(1_050);
    // A new short window (3 left), the long one with 3 left too: as near, the later reset is reported.
    const r = await hit();
    assert.equal(r.status, 200);
    assert.equal(seen.at(-1), '200:6/2');
    const resetsAt = Number(r.headers.get('crmcloud-ratelimit-resetsattimestamp')) * 1000;
    assert.ok(resetsAt - Date.now() > 1_000, 'the long window resets later');
    await hit();
    await hit();
    // The long window is spent (6 in it), though the short one has 0 left too: refused until the long one resets.
    assert.equal((await hit()).status, 429);
    await sleep(1_050);
    const still = await hit();
    assert.equal(still.status, 429, `the long window keeps refusing: ${seen.join(' ')}`);
    assert.equal(still.headers.get('crmcloud-ratelimit-total'), '6');
    assert.equal(still.headers.get('crmcloud-ratelimit-remaining'), '0');
  } finally {
    await sb.close();
  }
});

test('a profile without two windows keeps its one, as before', async () => {
  const sb = await start({
    rateLimits: {
      accountLimit: 1_000,
      sourceSystemLimits: { crmcloud: 2 },
      windowMs: 1_000,
      sourceSystemWindows: { fieldops: [{ limit: 1, windowMs: 1_000 }] },
    },
  });
  try {
    const a = await link(sb, 'crmcloud');
    const r = await call(sb, 'GET', '/customers?per_page=1', { headers: a.headers });
    assert.equal(r.headers.get('crmcloud-ratelimit-total'), '2');
    assert.equal(r.headers.get('crmcloud-ratelimit-remaining'), '1');
  } finally {
    await sb.close();
  }
  await assert.rejects(async () => {
    const bad = await start({ rateLimits: { sourceSystemWindows: { crmcloud: [{ limit: 0, windowMs: 1_000 }] } } });
    await bad.close();
  }, /sourceSystemWindows\.crmcloud/);
});

test('SiteCloud enforces its 10-second burst limit beside its hourly one, as its profile declares', async () => {
  const sb = await start({ rateLimits: { accountLimit: 1_000 } });
  try {
    const a = await link(sb, 'sitecloud');
    const statuses: number[] = [];
    let last = await call(sb, 'GET', '/projects?per_page=1', { headers: a.headers });
    statuses.push(last.status);
    for (let k = 1; k < 21; k++) {
      last = await call(sb, 'GET', '/projects?per_page=1', { headers: a.headers });
      statuses.push(last.status);
    }
    assert.deepEqual(statuses.slice(0, 20), Array<number>(20).fill(200), 'the first 20 within 10 s pass');
    assert.equal(statuses[20], 429, 'the 21st within 10 s is refused, though the hour has 3,580 left');
    const h = (name: string) => [...last.headers.entries()].find(([k]) => k.endsWith(`-ratelimit-${name}`))?.[1];
    assert.equal(h('total'), '20', 'the nearer window is reported: the burst one');
    assert.equal(h('remaining'), '0');
  } finally {
    await sb.close();
  }
});
