// Signed storage-proxy URLs: `{storage_url}/download/<filename>?signature=..&expires_at=..`.
// The signature carries the file's identity and an HMAC, so serving a file needs no lookup.
// Expiry is rounded to a fraction of the lifetime, so the same file keeps the same URL for a while
// (a mirror comparing records by content is not flooded with URL-only changes).
import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import type { FileRef } from '../data/dataset.ts';

const fileRefSchema = z.tuple([z.string(), z.string(), z.string(), z.number().int(), z.number().int().nonnegative(), z.union([z.literal(0), z.literal(1)])]);

export type StorageKind = 'download' | 'preview';

type VerifyResult = { ok: true; ref: FileRef } | { ok: false; reason: 'expired' | 'invalid' };

export class StorageSigner {
  constructor(
    private readonly key: Buffer,
    public storageUrl: string,
    public lifetimeMs: number,
  ) {}

  private mac(kind: StorageKind, filename: string, expiresAt: number, payload: string): string {
    return createHmac('sha256', this.key).update(`${kind}|${filename}|${expiresAt}|${payload}`).digest('base64url');
  }

  expiresAt(now = Date.now()): number {
    const bucket = Math.max(1, Math.min(3_600_000, Math.floor(this.lifetimeMs / 6)));
    // Rounded up to whole seconds: a URL never expires before its lifetime (it may outlive it by < 1 s).
    return Math.ceil((Math.floor(now / bucket) * bucket + this.lifetimeMs) / 1000);
  }

  url(kind: StorageKind, ref: FileRef, now = Date.now()): string {
    const payload = Buffer.from(JSON.stringify([ref.owner, ref.resource, ref.scope, ref.index, ref.size, ref.etag ? 1 : 0])).toString('base64url');
    const expiresAt = this.expiresAt(now);
    const signature = `${payload}.${this.mac(kind, ref.filename, expiresAt, payload)}`;
    return `${this.storageUrl}/${kind}/${encodeURIComponent(ref.filename)}?signature=${signature}&expires_at=${expiresAt}`;
  }

  urls(ref: FileRef): { url: string; preview_url: string } {
    const now = Date.now();
    return { url: this.url('download', ref, now), preview_url: this.url('preview', ref, now) };
  }

  verify(kind: StorageKind, filename: string, signature: string | undefined, expiresAtRaw: string | undefined, now = Date.now()): VerifyResult {
    if (!signature || !expiresAtRaw || !/^\d+$/.test(expiresAtRaw)) return { ok: false, reason: 'invalid' };
    const dot = signature.lastIndexOf('.');
    if (dot <= 0) return { ok: false, reason: 'invalid' };
    const payload = signature.slice(0, dot);
    const given = Buffer.from(signature.slice(dot + 1));
    const expected = Buffer.from(this.mac(kind, filename, Number(expiresAtRaw), payload));
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { ok: false, reason: 'invalid' };
    if (Number(expiresAtRaw) * 1000 <= now) return { ok: false, reason: 'expired' };
    try {
      const [owner, resource, scope, index, size, etag] = fileRefSchema.parse(JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')));
      return { ok: true, ref: { owner, resource: resource as FileRef['resource'], scope, index, size, filename, etag: etag === 1 } };
    } catch {
      return { ok: false, reason: 'invalid' };
    }
  }
}
