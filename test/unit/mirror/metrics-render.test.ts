// The Prometheus text format of the Postgres-derived metrics, and the process registry's upstream
// counters (requests by status class, 429s per source system).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderFamilies } from '../../../mirror/ops/metrics.ts';
import { createProcessMetrics } from '../../../lib/process-metrics.ts';

describe('metrics text format', () => {
  it('renders HELP, TYPE and samples with escaped label values', () => {
    const text = renderFamilies([
      { name: 'mirror_records', type: 'gauge', help: 'Live records.\nPer resource.', samples: [{ labels: { resource: 'a"b\\c\nd' }, value: 3 }] },
      { name: 'mirror_inbox_backlog', type: 'gauge', help: 'Pending.', samples: [{ labels: {}, value: 0 }] },
    ]);
    assert.equal(
      text,
      [
        '# HELP mirror_records Live records.\\nPer resource.',
        '# TYPE mirror_records gauge',
        'mirror_records{resource="a\\"b\\\\c\\nd"} 3',
        '# HELP mirror_inbox_backlog Pending.',
        '# TYPE mirror_inbox_backlog gauge',
        'mirror_inbox_backlog 0',
        '',
      ].join('\n'),
    );
  });

  it('names histogram buckets, sum and count as Prometheus expects', () => {
    const text = renderFamilies([
      {
        name: 'mirror_webhook_apply_latency_seconds',
        type: 'histogram',
        help: 'Latency.',
        samples: [
          { labels: { le: '1' }, value: 2 },
          { labels: { le: '+Inf' }, value: 3 },
          { labels: { __suffix: '_sum' }, value: 4.5 },
          { labels: { __suffix: '_count' }, value: 3 },
        ],
      },
    ]);
    assert.match(text, /^mirror_webhook_apply_latency_seconds_bucket\{le="1"\} 2$/m);
    assert.match(text, /^mirror_webhook_apply_latency_seconds_bucket\{le="\+Inf"\} 3$/m);
    assert.match(text, /^mirror_webhook_apply_latency_seconds_sum 4\.5$/m);
    assert.match(text, /^mirror_webhook_apply_latency_seconds_count 3$/m);
  });

  it('counts upstream requests by source system and status class, 429s apart', async () => {
    const m = createProcessMetrics({ process: 'test', defaultMetrics: false });
    const base = { method: 'GET' as const, path: '/projects', durationMs: 12, attempt: 1 };
    m.observeUpstream({ ...base, sourceSystem: 'sqlerp', status: 200 });
    m.observeUpstream({ ...base, sourceSystem: 'sqlerp', status: 429 });
    m.observeUpstream({ ...base, sourceSystem: 'sqlerp', status: 429 });
    m.observeUpstream({ ...base, sourceSystem: undefined, status: undefined });
    m.observeApi({ method: 'GET', route: '/projects/:id', status: 404, seconds: 0.003 });
    const text = await m.registry.metrics();
    assert.match(text, /^mirror_upstream_requests_total\{source_system="sqlerp",status="2xx",process="test"\} 1$/m);
    assert.match(text, /^mirror_upstream_requests_total\{source_system="sqlerp",status="429",process="test"\} 2$/m);
    assert.match(text, /^mirror_upstream_rate_limited_total\{source_system="sqlerp",process="test"\} 2$/m);
    assert.match(text, /^mirror_upstream_requests_total\{source_system="none",status="error",process="test"\} 1$/m);
    assert.match(text, /^mirror_api_request_duration_seconds_count\{process="test",method="GET",route="\/projects\/:id",status="4xx"\} 1$/m);
  });
});
