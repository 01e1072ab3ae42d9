// Input validation with zod: a 400 whose message says what to fix.
import type { z } from 'zod';
import { BadRequestError } from '../../lib/errors.ts';

export function parseInput<S extends z.ZodType>(schema: S, value: unknown, what = 'body'): z.infer<S> {
  const r = schema.safeParse(value ?? {});
  if (!r.success) {
    const issues = r.error.issues.map((i) => (i.path.length ? `${i.path.join('.')}: ${i.message}` : i.message));
    throw new BadRequestError(`Invalid ${what}: ${issues.join('; ')}`, {
      details: r.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })),
    });
  }
  return r.data;
}

export function headerValue(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const v = headers[name.toLowerCase()];
  return Array.isArray(v) ? v[0] : v;
}
