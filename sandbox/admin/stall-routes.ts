// Lists that stall on demand (`POST /_admin/faults/stall`): one page of a list that never moves on, as
// a real upstream's cursor that does not advance, or a query that never returns, does. A stall is an
// ordinary fault (listed, counted and removed with the others): `same-page` answers the page as the
// page before it (its records, `has_more_results` true), `timeout` never answers it.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { SandboxContext } from '../context.ts';
import { parseInput } from '../http/validate.ts';

const stallSchema = z
  .object({
    /** The list: a resource (`customers`) or a list path (`/ap-invoices/<id>/line-items`). */
    resource: z
      .string()
      .min(1)
      .regex(/^\/?[A-Za-z0-9][A-Za-z0-9._~\-/]*$/, 'a resource name or a list path, without a query'),
    /** The page that stalls; the pages before it answer as usual. */
    page: z.number().int().min(1).default(2),
    mode: z.enum(['same-page', 'timeout']),
    source_system: z.string().min(1).optional(),
    /** How many requests of the page stall; every one when absent. */
    times: z.number().int().positive().optional(),
  })
  .refine((s) => s.mode !== 'same-page' || s.page >= 2, { path: ['page'], message: 'same-page repeats the page before: page must be 2 or more' });

const escapeRegex = (v: string) => v.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

export function registerStallRoutes(app: FastifyInstance, ctx: SandboxContext, opts: { config: { kind: 'admin' } }): void {
  app.post('/_admin/faults/stall', opts, async (request, reply) => {
    const body = parseInput(stallSchema, request.body);
    const path = body.resource.startsWith('/') ? body.resource : `/${body.resource}`;
    // The page's own requests only (`page=` as a parameter of its own, not the end of `per_page=`).
    const match = {
      method: 'GET',
      path: `^${escapeRegex(path)}\\?(?:.*&)?page=${body.page}(?:&|$)`,
      ...(body.source_system ? { source_system: body.source_system } : {}),
    };
    const kind = body.mode === 'same-page' ? ('stuck-page' as const) : ('timeout' as const);
    const fault = ctx.faults.add({ match, kind, ...(body.times ? { times: body.times } : {}) });
    return reply.code(201).send({ id: fault.id, kind, match });
  });
}
