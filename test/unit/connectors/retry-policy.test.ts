import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { retryDecision } from '../../../connectors/retry-policy.ts';

const fixed = () => 0.5;

describe('retryDecision', () => {
  it('does not retry a success', () => {
    assert.deepEqual(retryDecision({ attempt: 1, status: 200, idempotent: true }), { retry: false, reason: 'success' });
  });
  it('retries connection errors and 5xx with capped, jittered exponential backoff', () => {
    assert.deepEqual(retryDecision({ attempt: 1, idempotent: true, random: fixed }), { retry: true, delayMs: 150 });
    assert.deepEqual(retryDecision({ attempt: 2, status: 502, idempotent: true, random: fixed }), { retry: true, delayMs: 300 });
    const capped = retryDecision({ attempt: 2, status: 500, idempotent: true, maxAttempts: 20, baseDelayMs: 5000, maxDelayMs: 2000, random: () => 0 });
    assert.deepEqual(capped, { retry: true, delayMs: 1000 });
  });
  it('stops after the last attempt: the long tail belongs to Temporal', () => {
    assert.deepEqual(retryDecision({ attempt: 3, status: 503, idempotent: true }), { retry: false, reason: 'attempts-exhausted' });
  });
  it('hands a 429 back instead of retrying it', () => {
    assert.deepEqual(retryDecision({ attempt: 1, status: 429, idempotent: true }), { retry: false, reason: 'rate-limited' });
  });
  it('never retries 4xx other than 408 and 429', () => {
    for (const status of [400, 401, 403, 404, 409, 413, 422]) {
      assert.deepEqual(retryDecision({ attempt: 1, status, idempotent: true }), { retry: false, reason: 'not-retryable' }, String(status));
    }
    assert.equal(retryDecision({ attempt: 1, status: 408, idempotent: true }).retry, true);
  });
  it('honours a short Retry-After and leaves a long one to Temporal', () => {
    assert.deepEqual(retryDecision({ attempt: 1, status: 503, idempotent: true, retryAfterSeconds: 1 }), { retry: true, delayMs: 1000 });
    assert.deepEqual(retryDecision({ attempt: 1, status: 503, idempotent: true, retryAfterSeconds: 120 }), { retry: false, reason: 'attempts-exhausted' });
  });
  it('does not resend a non-idempotent write after a 500', () => {
    assert.deepEqual(retryDecision({ attempt: 1, status: 500, idempotent: false }), { retry: false, reason: 'not-idempotent' });
  });
});
