// Webhook subscriptions and their delivery: HTTP POST of the contract's event body to the callback
// URL, with `Authorization` = the registered header. Delivery is at-least-once and unordered on
// purpose when the quirks are turned on (duplicates, reordering, delays, loss).
import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import { z } from 'zod';
import type { Logger } from '../../lib/logger.ts';
import { Rng } from '../data/random.ts';

const webhookEvents = ['CREATE', 'UPDATE', 'DELETE'] as const;

export const createWebhookSchema = z.object({
  callback_url: z.url({ protocol: /^https?$/ }),
  authorization_header: z.string().max(4096).optional(),
  event: z.enum(webhookEvents),
  type: z.string().min(1).max(100),
  /** `<type>:*` (default) or the service UUID of one object. */
  target: z.string().optional(),
});
type CreateWebhook = z.infer<typeof createWebhookSchema>;

export const deliverySettingsSchema = z.object({
  duplicate_probability: z.number().min(0).max(1).default(0),
  reorder: z.boolean().default(false),
  delay_ms: z.number().int().nonnegative().default(0),
  loss_probability: z.number().min(0).max(1).default(0),
});
type DeliverySettings = z.infer<typeof deliverySettingsSchema>;

interface Webhook {
  id: string;
  source_id: string;
  callback_url: string;
  authorizationHeader: string | undefined;
  event: (typeof webhookEvents)[number];
  type: string;
  target: string;
  project_id: string | undefined;
  accountId: string;
  /** Data key of the account: mutations of the same source data reach it. */
  dataKey: string;
  createdAt: string;
}

interface WebhookEventBody {
  id: string;
  source_id: string;
  callback_url: string;
  event: string;
  project_id?: string;
  target: string;
  type: string;
  source_data: { path: string; content_type: string; data: unknown };
}

interface DeliveryRecord {
  webhook_id: string;
  delivery_id: string;
  event: string;
  type: string;
  target: string;
  status: number | 'lost' | 'error';
  at: string;
}

export class WebhookRegistry {
  private readonly hooks = new Map<string, Webhook>();
  private readonly inFlight = new Set<Promise<void>>();
  private readonly deliveries: DeliveryRecord[] = [];
  private rng = new Rng('webhooks');
  private sourceCounter = 0;
  settings: DeliverySettings = { duplicate_probability: 0, reorder: false, delay_ms: 0, loss_probability: 0 };

  constructor(private readonly logger: Logger | undefined) {}

  create(accountId: string, dataKey: string, body: CreateWebhook, projectId: string | undefined): Webhook {
    const hook: Webhook = {
      id: randomUUID(),
      source_id: String(900_000 + ++this.sourceCounter),
      callback_url: body.callback_url,
      authorizationHeader: body.authorization_header,
      event: body.event,
      type: body.type,
      target: body.target ?? `${body.type}:*`,
      project_id: projectId,
      accountId,
      dataKey,
      createdAt: new Date().toISOString(),
    };
    this.hooks.set(hook.id, hook);
    return hook;
  }

  list(accountId: string): Webhook[] {
    return [...this.hooks.values()].filter((h) => h.accountId === accountId);
  }

  get(accountId: string, id: string): Webhook | undefined {
    const h = this.hooks.get(id);
    return h && h.accountId === accountId ? h : undefined;
  }

  remove(accountId: string, id: string): boolean {
    const h = this.get(accountId, id);
    if (!h) return false;
    this.hooks.delete(id);
    return true;
  }

  /** Webhooks that want this change: same source data, event and type; same project if project-level. */
  matching(dataKey: string, event: string, type: string, projectId: string | undefined, targetId: string): Webhook[] {
    return [...this.hooks.values()].filter(
      (h) =>
        h.dataKey === dataKey &&
        h.event === event &&
        h.type === type &&
        (h.project_id === undefined || h.project_id === projectId) &&
        (h.target === `${type}:*` || h.target === targetId),
    );
  }

  /** Sends one event to one webhook, applying the configured quirks. Never throws. */
  deliver(hook: Webhook, event: Omit<WebhookEventBody, 'id' | 'source_id' | 'callback_url'>): void {
    const body: WebhookEventBody = { id: hook.id, source_id: hook.source_id, callback_url: hook.callback_url, ...event };
    const deliveryId = randomUUID();
    const s = this.settings;
    if (s.loss_probability > 0 && this.rng.next() < s.loss_probability) {
      this.record(hook, body, deliveryId, 'lost');
      return;
    }
    const copies = s.duplicate_probability > 0 && this.rng.next() < s.duplicate_probability ? 2 : 1;
    for (let c = 0; c < copies; c++) {
      // Reordering: each delivery waits an independent random delay, so later events may overtake.
      const wait = s.reorder ? Math.floor(this.rng.next() * Math.max(200, s.delay_ms * 2)) : s.delay_ms;
      const p = this.send(hook, body, deliveryId, wait).finally(() => this.inFlight.delete(p));
      this.inFlight.add(p);
    }
  }

  private async send(hook: Webhook, body: WebhookEventBody, deliveryId: string, waitMs: number): Promise<void> {
    if (waitMs > 0) await new Promise((r) => setTimeout(r, waitMs));
    try {
      const res = await request(hook.callback_url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'sandbox-webhooks/1',
          'x-webhook-delivery-id': deliveryId,
          ...(hook.authorizationHeader ? { authorization: hook.authorizationHeader } : {}),
        },
        body: JSON.stringify(body),
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      });
      await res.body.dump();
      this.record(hook, body, deliveryId, res.statusCode);
    } catch (error) {
      this.logger?.warn({ webhook: hook.id, err: (error as Error).message }, 'webhook delivery failed');
      this.record(hook, body, deliveryId, 'error');
    }
  }

  private record(hook: Webhook, body: WebhookEventBody, deliveryId: string, status: DeliveryRecord['status']): void {
    this.deliveries.push({
      webhook_id: hook.id,
      delivery_id: deliveryId,
      event: body.event,
      type: body.type,
      target: body.target,
      status,
      at: new Date().toISOString(),
    });
    if (this.deliveries.length > 10_000) this.deliveries.splice(0, this.deliveries.length - 10_000);
  }

  deliveryLog(): DeliveryRecord[] {
    return [...this.deliveries];
  }

  /** Resolves when every delivery under way has finished (tests, shutdown). */
  async drain(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }
}

export function webhookView(h: Webhook) {
  return {
    id: h.id,
    source_id: h.source_id,
    callback_url: h.callback_url,
    event: h.event,
    ...(h.project_id ? { project_id: h.project_id } : {}),
    target: h.target,
    type: h.type,
  };
}
