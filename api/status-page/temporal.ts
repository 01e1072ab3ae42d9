// The status page's view of Temporal: the account passes running now (with their progress query) and
// links into the Temporal UI for each workflow and schedule. Bounded in time: a slow or absent
// Temporal makes the page say so, never hang.
import { passWorkflowAccount } from '../../lib/workflow-ids.ts';
import type { SyncControl } from '../sync-control.ts';

/** The dev server's UI listens 1000 ports above its frontend (`temporal server start-dev`). */
export function defaultTemporalUiUrl(address: string): string {
  const i = address.lastIndexOf(':');
  const host = address.slice(0, i) || '127.0.0.1';
  const port = Number(address.slice(i + 1)) || 7233;
  return `http://${host}:${port + 1000}`;
}

interface TemporalLinks {
  workflow(workflowId: string, runId?: string): string | undefined;
  schedule(scheduleId: string): string | undefined;
}

export function temporalLinks(uiUrl: string | undefined, namespace: string): TemporalLinks {
  const base = uiUrl?.replace(/\/+$/, '');
  const ns = encodeURIComponent(namespace);
  return {
    workflow(workflowId, runId) {
      if (!base) return undefined;
      if (runId) return `${base}/namespaces/${ns}/workflows/${encodeURIComponent(workflowId)}/${encodeURIComponent(runId)}/history`;
      return `${base}/namespaces/${ns}/workflows?query=${encodeURIComponent(`WorkflowId="${workflowId}"`)}`;
    },
    schedule(scheduleId) {
      return base ? `${base}/namespaces/${ns}/schedules/${encodeURIComponent(scheduleId)}` : undefined;
    },
  };
}

export interface RunningPass {
  accountId: string;
  workflowId: string;
  runId: string;
  startedAt: string;
  progress?: { phase: string; streamsTotal: number; streamsDone: number; streamsFailed: number; records: number };
}

const accountOf = passWorkflowAccount;

/** Account passes running on this mirror's task queue, each with its progress (where it answers in time). */
export async function runningPasses(sync: SyncControl, timeoutMs = 1500): Promise<RunningPass[]> {
  const work = (async () => {
    const found: RunningPass[] = [];
    const query = `WorkflowType = 'accountSyncWorkflow' AND ExecutionStatus = 'Running' AND TaskQueue = '${sync.taskQueue.replace(/'/g, "''")}'`;
    for await (const wf of sync.client.workflow.list({ query, pageSize: 100 })) {
      const m = accountOf.exec(wf.workflowId);
      if (m) found.push({ accountId: m[1]!.toLowerCase(), workflowId: wf.workflowId, runId: wf.runId, startedAt: wf.startTime.toISOString() });
      if (found.length >= 100) break;
    }
    await Promise.all(
      found.map(async (p) => {
        const progress = await sync.progress(sync.client.workflow.getHandle(p.workflowId, p.runId));
        if (progress) p.progress = progress;
      }),
    );
    return found;
  })();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Temporal did not answer within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
    work.catch(() => undefined);
  }
}
