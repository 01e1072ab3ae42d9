import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { createLogger } from '../../../lib/logger.ts';

function capture() {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(chunk.toString());
      cb();
    },
  });
  return { lines, logger: createLogger({ level: 'info', destination }) };
}

describe('logger redaction', () => {
  it('redacts credentials at any of the usual depths', () => {
    const { lines, logger } = capture();
    logger.info(
      {
        headers: { 'client-secret': 'S3CRET-client', 'account-token': 'tok-123', authorization: 'Bearer abc', session: 'sess-9' },
        account_token: 'top-level-token',
        req: { headers: { 'Client-Secret': 'x', 'client-secret': 'S3CRET-nested' } },
        body: { link_token: 'lt-1', public_token: 'pt-1', authorization_header: 'wh-secret' },
      },
      'request',
    );
    const out = lines.join('');
    for (const secret of ['S3CRET-client', 'tok-123', 'Bearer abc', 'sess-9', 'top-level-token', 'S3CRET-nested', 'lt-1', 'pt-1', 'wh-secret']) {
      assert.ok(!out.includes(secret), `${secret} leaked: ${out}`);
    }
    assert.ok(out.includes('[redacted]'));
  });
});
