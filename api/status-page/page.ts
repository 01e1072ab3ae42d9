// The status page: plain server-rendered HTML with a little script that re-fetches the page's main
// part every few seconds. No framework, no external asset: it loads in one request.
import type { StatusOverview } from './overview.ts';

function escapeHtml(v: string | number | null | undefined): string {
  return String(v ?? '').replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const num = (n: number | null | undefined) => (n === null || n === undefined ? '–' : n.toLocaleString('en-US'));

function age(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return 'never';
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 90 * 60) return `${Math.round(seconds / 60)} min`;
  if (seconds < 36 * 3600) return `${Math.round(seconds / 360) / 10} h`;
  return `${Math.round(seconds / 8640) / 10} d`;
}

const since = (iso: string | null, now: number) => (iso ? age((now - Date.parse(iso)) / 1000) : 'never');

function link(href: string | undefined, text: string, title = 'Open in the Temporal UI'): string {
  return href ? `<a href="${escapeHtml(href)}" target="_blank" rel="noopener" title="${escapeHtml(title)}">${escapeHtml(text)}</a>` : escapeHtml(text);
}

/** A progress bar: a share of a known total, or moving stripes when the total is unknown. */
function bar(done: number, total: number | null, label: string): string {
  if (total === null || total <= 0) {
    return `<div class="bar indeterminate" role="progressbar" aria-label="${escapeHtml(label)}"><span></span></div>`;
  }
  const pct = Math.max(0, Math.min(100, Math.round((done / total) * 100)));
  return `<div class="bar" role="progressbar" aria-label="${escapeHtml(label)}" aria-valuenow="${pct}" aria-valuemin="0" aria-valuemax="100"><span style="width:${pct}%"></span></div>`;
}

function stateChips(states: Record<string, number>): string {
  const order = ['syncing', 'failed', 'stalled', 'synced', 'never_synced', 'paused'];
  return Object.entries(states)
    .sort(([a], [b]) => ((order.indexOf(a) + 99) % 99) - ((order.indexOf(b) + 99) % 99))
    .map(([s, n]) => `<span class="chip ${escapeHtml(s)}">${escapeHtml(s.replace('_', ' '))} ${num(n)}</span>`)
    .join(' ');
}

const short = (id: string) => id.slice(0, 8);

function renderTotals(o: StatusOverview): string {
  const t = o.totals;
  return `<section class="tiles" id="totals">
<div class="tile"><b>${num(t.accounts)}</b>accounts</div>
<div class="tile"><b>${num(t.streams)}</b>streams</div>
<div class="tile ${t.syncing ? 'busy' : ''}"><b id="total-syncing">${num(t.syncing)}</b>syncing</div>
<div class="tile ${t.failed ? 'bad' : ''}"><b>${num(t.failed)}</b>failed</div>
<div class="tile ${t.stalled ? 'bad' : ''}" title="Streams whose checkpoint does not move: tried again after a backoff"><b id="total-stalled">${num(t.stalled)}</b>stalled</div>
<div class="tile"><b id="total-records">${num(t.records)}</b>records</div>
<div class="tile ${t.inboxPending ? 'busy' : ''}"><b>${num(t.inboxPending)}</b>inbox backlog</div>
<div class="tile ${t.deliveriesFailing ? 'bad' : ''}"><b>${num(t.deliveryBacklog)}</b>delivery backlog</div>
</section>`;
}

type AccountRow = StatusOverview['accounts'][number];

/** The pass an account runs now: a bar of its streams and a line of counts, or "idle". */
function passProgress(p: AccountRow['pass']): string {
  if (!p) return '<span class="muted">none</span>';
  return `${bar(p.progress?.streamsDone ?? 0, p.progress && p.progress.phase !== 'planning' ? p.progress.streamsTotal : null, 'streams done')}
<div class="small pass-progress">${link(p.link, p.progress ? p.progress.phase : 'running')}: ${num(p.progress?.streamsDone ?? 0)}/${num(p.progress?.streamsTotal ?? 0)} streams, ${num(p.progress?.records ?? 0)} records${p.progress?.streamsFailed ? `, <span class="bad">${num(p.progress.streamsFailed)} failed</span>` : ''}</div>`;
}

function accountRow(a: AccountRow): string {
  const why = a.statusReason ?? a.lastError ?? '';
  return `<tr class="account" data-account="${escapeHtml(a.id)}" data-status="${escapeHtml(a.status)}" data-syncing="${a.states.syncing ?? 0}">
<td class="nowrap"><code title="${escapeHtml(a.id)}">${short(a.id)}</code> <span class="small">${escapeHtml(a.referenceId)}</span></td>
<td class="nowrap" title="${escapeHtml(a.sourceSystem)}">${escapeHtml(a.sourceSystemName)}</td>
<td class="nowrap">${a.status !== 'linked' ? `<b class="${a.status === 'credentials_refused' ? 'bad' : 'muted'}"${a.statusReason ? ` title="${escapeHtml(a.statusReason)}"` : ''}>${escapeHtml(a.status.replace('_', ' '))}</b>` : 'linked'}</td>
<td class="nowrap">${stateChips(a.states) || '<span class="muted">no streams yet</span>'}</td>
<td class="progress-cell">${passProgress(a.pass)}</td>
<td class="num">${num(a.liveRecords)}</td>
<td class="nowrap ${a.lagSeconds !== null && a.lagSeconds > 86400 ? 'bad' : ''}">${age(a.lagSeconds)}</td>
<td class="num">${num(a.inboxPending)}</td>
<td class="err one-line" title="${escapeHtml(why)}">${escapeHtml(why)}</td>
<td class="small nowrap">${link(a.links.sync, 'syncs')}${a.links.fullSchedule ? ` · ${link(a.links.fullSchedule, 'full', 'The daily full pass: trigger it from the Temporal UI')} · ${link(a.links.incrementalSchedule, 'incremental', 'The incremental pass schedule')}` : ''}</td>
</tr>`;
}

/** The groups accounts are shown in, in this order (the overview lists them so: those needing attention first). */
const accountGroups = [
  { key: 'attention', title: 'Need attention: credentials refused, failed or stalled streams' },
  { key: 'linked', title: 'Linked' },
  { key: 'idle', title: 'Idle: unused for MIRROR_IDLE_AFTER, polled less often until their next read' },
  { key: 'unlinked', title: 'Unlinked' },
] as const;

function accountGroup(a: AccountRow): (typeof accountGroups)[number]['key'] {
  if (a.status === 'credentials_refused' || (a.states.failed ?? 0) + (a.states.stalled ?? 0) > 0) return 'attention';
  return a.status === 'idle' || a.status === 'unlinked' ? a.status : 'linked';
}

/** Accounts, with the pass running now: grouped, those needing attention first, with a count of each group on top. */
function renderAccounts(o: StatusOverview): string {
  const groups = accountGroups.map((g) => ({ ...g, rows: o.accounts.filter((a) => accountGroup(a) === g.key) })).filter((g) => g.rows.length > 0);
  const counts = groups.map(
    (g) => `<a class="chip group-${g.key}" href="#accounts-${g.key}">${escapeHtml(g.key === 'attention' ? 'need attention' : g.key)} ${num(g.rows.length)}</a>`,
  );
  const bodies = groups.map(
    (g) =>
      `<tbody id="accounts-${g.key}"><tr class="account-group"><th colspan="10">${escapeHtml(g.title)} · ${num(g.rows.length)}</th></tr>
${g.rows.map(accountRow).join('\n')}</tbody>`,
  );
  return `<section id="accounts"><h2>Accounts</h2>${counts.length > 1 ? `<p class="account-counts">${counts.join(' ')}</p>` : ''}
<table><thead><tr><th>account</th><th>source system</th><th>status</th><th>streams</th><th>pass now</th><th class="num">records</th><th title="Since the stalest stream was last brought up to date">lag</th><th class="num">inbox</th><th>last error</th><th>Temporal</th></tr></thead>
${bodies.join('\n') || '<tbody><tr><td colspan="10" class="muted">No linked account yet: <code>npx mirror link --reference-id &lt;id&gt;</code></td></tr></tbody>'}</table></section>`;
}

/** When incremental passes list streams next, and why: by reason, then the next few. */
function renderPolling(o: StatusOverview, now: number): string {
  const due = (iso: string | null) => (iso === null ? '–' : Date.parse(iso) <= now ? 'at the next pass' : `in ${age((Date.parse(iso) - now) / 1000)}`);
  const groupRows = o.polling.groups.map(
    (g) =>
      `<tr class="poll-group"><td><code>${short(g.accountId)}</code></td><td>${escapeHtml(g.reason)}</td><td class="num">${num(g.streams)}</td><td>${due(g.nextDueAt)}</td></tr>`,
  );
  const nextRows = o.polling.next.map(
    (n) =>
      `<tr class="poll-next"><td><code>${short(n.accountId)}</code></td><td>${escapeHtml(n.resource)}</td><td class="scope">${escapeHtml(n.scope || '–')}</td><td title="${escapeHtml(n.nextDueAt)}">${due(n.nextDueAt)}</td><td>${escapeHtml(n.reason ?? '')}</td></tr>`,
  );
  return `<section id="polling"><h2>Polling: when incremental passes list streams next</h2>
${
  groupRows.length
    ? `<table><thead><tr><th>account</th><th>why</th><th class="num">streams</th><th>first due</th></tr></thead><tbody>${groupRows.join('\n')}</tbody></table>
${nextRows.length ? `<table id="polling-next"><thead><tr><th>account</th><th>resource</th><th>scope</th><th>next due</th><th>why</th></tr></thead><tbody>${nextRows.join('\n')}</tbody></table>` : ''}`
    : '<p class="muted">No stream yet.</p>'
}</section>`;
}

type Freshness = NonNullable<StatusOverview['freshness']>;

function accountFreshnessRow(a: Freshness['accounts'][number]): string {
  return `<tr class="fresh-account" data-met="${a.met}"><td><code>${short(a.accountId)}</code></td><td class="${a.met ? '' : 'bad'}">${a.met ? 'met' : `missed by ${num(a.missingCount)} of ${num(a.polledLists)} lists`}</td><td class="num">${age(a.targetSeconds)}</td><td class="num">${age(a.cycleSeconds)}</td><td class="num">${age(a.floorSeconds)}</td><td class="small">${
    a.met
      ? ''
      : `${escapeHtml(a.missing.join(', '))}${a.missingCount > a.missing.length ? ' …' : ''}; would meet it: ${a.visitsPerMinuteNeeded.toFixed(1)} visits a minute${a.pollingShareNeeded !== null ? ` (SYNC_POLLING_SHARE=${a.pollingShareNeeded.toFixed(2)})` : " (more than the sync's budget: a higher limit or a longer target)"}`
  }</td></tr>`;
}

function resourceFreshnessRow(r: Freshness['resources'][number]): string {
  return `<tr class="fresh-resource" data-met="${r.met}"><td><code>${short(r.accountId)}</code></td><td>${escapeHtml(r.resource)}</td><td class="num">${num(r.lists)}</td><td class="num">${age(r.p50)}</td><td class="num">${age(r.p95)}</td><td class="num ${r.met ? '' : 'bad'}">${age(r.max)}</td><td>${r.met ? 'yes' : 'no'}</td></tr>`;
}

/** Freshness: how long ago each account's and resource's lists were verified, against the target. */
function renderFreshness(f: Freshness): string {
  const accountFresh = f.accounts.map(accountFreshnessRow);
  const resourceFresh = f.resources.map(resourceFreshnessRow);
  return `<section id="freshness"><h2>Freshness: time since each list was verified upstream</h2>
${accountFresh.length ? `<table id="freshness-accounts"><thead><tr><th>account</th><th>target</th><th class="num">target</th><th class="num">cycle</th><th class="num">longest wait</th><th>lists that miss it, and what would meet it</th></tr></thead><tbody>${accountFresh.join('\n')}</tbody></table>` : ''}
${resourceFresh.length ? `<table id="freshness-resources"><thead><tr><th>account</th><th>resource</th><th class="num">lists</th><th class="num">p50</th><th class="num">p95</th><th class="num">max</th><th>within target</th></tr></thead><tbody>${resourceFresh.join('\n')}</tbody></table>` : '<p class="muted">No list verified yet.</p>'}</section>`;
}

/** Streams syncing now. */
function renderActiveStreams(o: StatusOverview, now: number): string {
  const streamRows = o.active.map(
    (s) => `<tr class="stream" data-records="${s.records}">
<td><code>${short(s.accountId)}</code></td><td>${escapeHtml(s.resource)}</td><td class="scope">${escapeHtml(s.scope || '–')}</td><td>${escapeHtml(s.mode ?? '')}</td>
<td class="progress-cell">${bar(s.records, s.expected, `${s.resource} records`)}<div class="small">${num(s.records)}${s.expected ? ` of ~${num(s.expected)}` : ''} records · ${num(s.pages)} pages</div></td>
<td>${since(s.passStartedAt, now)}</td><td class="small">${link(s.link, 'workflow')}</td></tr>`,
  );
  return `<section id="active-streams"><h2>Syncing now</h2>
${streamRows.length ? `<table><thead><tr><th>account</th><th>resource</th><th>scope</th><th>mode</th><th>progress</th><th>started</th><th>Temporal</th></tr></thead><tbody>${streamRows.join('\n')}</tbody></table>` : '<p class="muted">No stream is syncing.</p>'}</section>`;
}

function budgetRow(b: StatusOverview['budgets'][number]): string {
  return `<tr><td><code>${escapeHtml(b.key)}</code></td><td>${escapeHtml(b.kind)}${b.sourceSystem ? ` · ${escapeHtml(b.sourceSystem)}` : ''}${b.lane === 'sync' ? ' · <span class="small">sync share lane</span>' : ''}</td>
<td class="progress-cell">${b.usedRatio === null ? '<span class="muted">no limit reported</span>' : `${bar(b.usedRatio * 100, 100, 'budget used')}<div class="small">${Math.round(b.usedRatio * 100)} % used</div>`}</td>
<td class="num">${num(b.remaining)} / ${num(b.total)}</td><td>${b.resetsInSeconds && b.resetsInSeconds > 0 ? `in ${age(b.resetsInSeconds)}` : '–'}</td>
<td class="${b.blockedForSeconds ? 'bad' : ''}">${b.blockedForSeconds ? `blocked ${age(b.blockedForSeconds)}` : ''}</td></tr>`;
}

/** What this process's governor let through, refused and made wait, by class. */
function upstreamClassesTable(o: StatusOverview): string {
  if (!o.upstreamClasses.length) return '';
  return `<table id="budget-classes"><thead><tr><th>class (this process)</th><th class="num">sent</th><th class="num">refused (429 at once)</th><th class="num">waited for a concurrency slot</th><th class="num">waited for the rate (pace, spent window, sync share)</th></tr></thead><tbody>${o.upstreamClasses
    .map(
      (c) =>
        `<tr><td>${c.class}</td><td class="num">${num(c.granted)}</td><td class="num">${num(c.refused)}</td><td class="num">${age(c.waitedForConcurrencySeconds)}</td><td class="num">${age(c.waitedForRateSeconds)}</td></tr>`,
    )
    .join('\n')}</tbody></table>`;
}

/** Rate budgets. */
function renderBudgets(o: StatusOverview): string {
  const budgetRows = o.budgets.map(budgetRow);
  return `<section id="budgets"><h2>Rate-limit budgets</h2>
${budgetRows.length ? `<table><thead><tr><th>budget</th><th>kind</th><th>use</th><th class="num">remaining</th><th>window resets</th><th></th></tr></thead><tbody>${budgetRows.join('\n')}</tbody></table>` : '<p class="muted">No request has spent a budget yet.</p>'}
${upstreamClassesTable(o)}</section>`;
}

/** This process's reads by server: each replica's state and lag, reads per server, fallbacks to the primary. */
function renderReads(r: NonNullable<StatusOverview['reads']>): string {
  const total = r.primaryReads + r.replicas.reduce((n, x) => n + x.reads, 0);
  const share = (n: number) => (total ? `${Math.round((n / total) * 1000) / 10} %` : '–');
  const rows = r.replicas.map(
    (x) =>
      `<tr><td><code>${escapeHtml(x.name)}</code></td><td class="${x.up ? '' : 'bad'}">${x.up ? 'up' : `skipped${x.retryInMs ? `, retried in ${age(x.retryInMs / 1000)}` : ''}`}</td><td class="num ${x.lagMs !== null && x.lagMs > r.maxLagMs ? 'bad' : ''}">${x.lagMs === null ? '–' : `${num(x.lagMs)} ms`}</td><td class="num">${num(x.reads)} (${share(x.reads)})</td><td class="num ${x.failedQueries ? 'bad' : ''}">${num(x.failedQueries)}</td><td class="err">${escapeHtml(x.lastError ?? '')}</td></tr>`,
  );
  const fallbacks = Object.entries(r.fallbacks)
    .map(([reason, n]) => `${escapeHtml(reason.replace('_', ' '))} ${num(n)}`)
    .join(' · ');
  return `<section id="reads"><h2>Reads by server (this API process)</h2>
<table><thead><tr><th>replica</th><th>state</th><th class="num">lag (max ${num(r.maxLagMs)} ms)</th><th class="num">reads</th><th class="num">failed queries</th><th>last error</th></tr></thead><tbody>${rows.join('\n')}
<tr><td>primary</td><td></td><td></td><td class="num">${num(r.primaryReads)} (${share(r.primaryReads)})</td><td></td><td></td></tr></tbody></table>
<p class="small">Fallbacks to the primary: ${fallbacks}.</p></section>`;
}

/** Inbox and outbound deliveries, side by side. */
function renderInboxAndDeliveries(o: StatusOverview): string {
  const inboxRows = o.inbox.map(
    (i) =>
      `<tr><td><code>${short(i.accountId)}</code></td><td class="num">${num(i.pending)}</td><td>${i.oldestPendingSeconds === null ? '–' : age(i.oldestPendingSeconds)}</td><td class="num">${num(i.appliedLastHour)}</td><td>${i.latencyP50Seconds === null ? '–' : `${i.latencyP50Seconds} s / ${i.latencyP95Seconds} s`}</td></tr>`,
  );
  const deliveryRows = o.deliveries.map(
    (d) =>
      `<tr><td><code>${short(d.accountId)}</code></td><td>${escapeHtml(d.event)} ${escapeHtml(d.type)}</td><td>${escapeHtml(d.callbackOrigin)}</td><td class="num">${num(d.delivered)}</td><td class="num">${num(d.backlog)}</td><td class="num ${d.failures ? 'bad' : ''}">${num(d.failures)}</td><td class="err">${escapeHtml(d.lastError ?? '')}</td></tr>`,
  );
  return `<section id="inbox" class="half"><h2>Webhook inbox</h2>
${inboxRows.length ? `<table><thead><tr><th>account</th><th class="num">pending</th><th>oldest</th><th class="num">applied (1 h)</th><th>latency p50 / p95</th></tr></thead><tbody>${inboxRows.join('\n')}</tbody></table>` : '<p class="muted">No webhook event in the last hour, none waiting.</p>'}</section>
<section id="deliveries" class="half"><h2>Outbound deliveries</h2>
${deliveryRows.length ? `<table><thead><tr><th>account</th><th>subscription</th><th>callback</th><th class="num">delivered</th><th class="num">backlog</th><th class="num">failures</th><th>last error</th></tr></thead><tbody>${deliveryRows.join('\n')}</tbody></table>` : '<p class="muted">No subscription.</p>'}</section>`;
}

/** Recent errors. */
function renderErrors(o: StatusOverview, now: number): string {
  const errorRows = o.errors.map(
    (e) =>
      `<tr><td>${since(e.at, now)} ago</td><td>${escapeHtml(e.kind)}</td><td><code>${short(e.accountId)}</code></td><td>${escapeHtml(e.what)}</td><td class="err">${escapeHtml(e.message)}</td></tr>`,
  );
  return `<section id="errors"><h2>Recent errors</h2>
${errorRows.length ? `<table><thead><tr><th>when</th><th>kind</th><th>account</th><th>what</th><th>error</th></tr></thead><tbody>${errorRows.join('\n')}</tbody></table>` : '<p class="muted">None.</p>'}</section>`;
}

function renderFooter(o: StatusOverview): string {
  return `<p class="small muted" id="generated" data-generated="${escapeHtml(o.generatedAt)}">Generated ${escapeHtml(o.generatedAt)}${o.temporal.taskQueue ? ` · task queue <code>${escapeHtml(o.temporal.taskQueue)}</code>` : ''}${o.temporal.uiUrl ? ` · ${link(o.temporal.uiUrl, 'Temporal UI')}` : ''} · <a href="/status.json">JSON</a> · <a href="/metrics">metrics</a> · <a href="/docs">API reference</a></p>`;
}

/** The page's main part, section by section (also what the page's script re-fetches). */
export function renderMain(o: StatusOverview): string {
  const now = Date.parse(o.generatedAt);
  const parts: string[] = [renderTotals(o)];
  if (!o.temporal.reachable) parts.push(`<p class="warn">Temporal: ${escapeHtml(o.temporal.error)}. Progress of running passes is not shown.</p>`);
  parts.push(renderAccounts(o), renderPolling(o, now));
  if (o.freshness) parts.push(renderFreshness(o.freshness));
  parts.push(renderActiveStreams(o, now), renderBudgets(o));
  if (o.reads) parts.push(renderReads(o.reads));
  parts.push(renderInboxAndDeliveries(o), renderErrors(o, now), renderFooter(o));
  return parts.join('\n');
}

const css = `
:root{--fg:#1b1f24;--muted:#6a737d;--line:#e3e6ea;--ok:#1a7f37;--busy:#0969da;--bad:#cf222e;--bg:#fff;--soft:#f6f8fa}
*{box-sizing:border-box}body{font:14px/1.4 system-ui,-apple-system,Segoe UI,sans-serif;color:var(--fg);background:var(--bg);margin:0}
header{display:flex;align-items:center;gap:1rem;padding:.7rem 1.2rem;border-bottom:1px solid var(--line);background:var(--soft)}
header h1{font-size:1.1rem;margin:0}header .live{margin-left:auto;color:var(--muted);font-size:.85rem}
main{padding:0 1.2rem 1.5rem;display:flex;flex-wrap:wrap;gap:0 2rem}main>section,main>p{flex:1 1 100%}main>section.half{flex:1 1 40%}
h2{font-size:.95rem;margin:1.2rem 0 .4rem;text-transform:uppercase;letter-spacing:.04em;color:var(--muted)}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.35rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:600;font-size:.8rem;color:var(--muted)}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.small{font-size:.8rem;color:var(--muted)}.muted{color:var(--muted)}.err{color:var(--bad);max-width:28rem;overflow-wrap:anywhere;font-size:.85rem}
.nowrap{white-space:nowrap}.err.one-line{white-space:nowrap;overflow:hidden;text-overflow:ellipsis;max-width:20rem}
tr.account-group th{background:var(--soft);color:var(--fg);font-size:.8rem;padding:.3rem .5rem}.account-counts{margin:.2rem 0 .5rem}
.chip.group-attention,.chip.stalled{color:var(--bad);border-color:#ffc1c1}a.chip{text-decoration:none}
.bad{color:var(--bad)}.warn{background:#fff8c5;padding:.5rem .8rem;border-radius:6px}code{font-size:.85em}
.scope{max-width:22rem;overflow-wrap:anywhere;font-size:.85rem}.progress-cell{min-width:12rem}
.tiles{display:flex;gap:.8rem;flex-wrap:wrap;margin-top:1rem}.tile{border:1px solid var(--line);border-radius:8px;padding:.5rem .9rem;min-width:7rem;color:var(--muted);font-size:.8rem}
.tile b{display:block;font-size:1.35rem;color:var(--fg)}.tile.busy b{color:var(--busy)}.tile.bad b{color:var(--bad)}
.chip{display:inline-block;border-radius:10px;padding:0 .5rem;font-size:.78rem;background:var(--soft);border:1px solid var(--line);white-space:nowrap}
.chip.synced{color:var(--ok)}.chip.syncing{color:var(--busy);border-color:#b6d4fe}.chip.failed,.chip.stalled{color:var(--bad);border-color:#ffc1c1}
.bar{height:.55rem;background:#eaeef2;border-radius:4px;overflow:hidden;margin:.2rem 0}.bar span{display:block;height:100%;background:var(--busy);transition:width .4s}
.bar.indeterminate span{width:35%;animation:slide 1.2s ease-in-out infinite}@keyframes slide{0%{margin-left:-35%}100%{margin-left:100%}}
a{color:var(--busy)}button{font:inherit;padding:.15rem .6rem}
`;

// Re-fetches the main part every few seconds; pauses while the tab is hidden or on request.
const script = `
(function(){
  var main=document.getElementById('main'),state=document.getElementById('live'),btn=document.getElementById('pause'),paused=false,busy=false;
  function tick(){
    if(paused||busy||document.hidden)return;busy=true;
    fetch(location.pathname+'?fragment=1',{credentials:'same-origin',headers:{accept:'text/html'}})
      .then(function(r){if(!r.ok)throw new Error('HTTP '+r.status);return r.text()})
      .then(function(html){main.innerHTML=html;state.textContent='live · updated '+new Date().toLocaleTimeString()})
      .catch(function(e){state.textContent='update failed ('+e.message+'), retrying'})
      .then(function(){busy=false});
  }
  btn.addEventListener('click',function(){paused=!paused;btn.textContent=paused?'resume':'pause';state.textContent=paused?'paused':'live'});
  setInterval(tick,REFRESH_MS);
})();
`;

export function renderPage(o: StatusOverview, options: { refreshMs?: number } = {}): string {
  const refresh = Math.max(500, options.refreshMs ?? 2000);
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Mirror status</title><style>${css}</style></head><body>
<header><h1>Mirror status</h1><span class="live" id="live">live</span><button id="pause" type="button">pause</button></header>
<main id="main">${renderMain(o)}</main>
<script>${script.replace('REFRESH_MS', String(refresh))}</script></body></html>`;
}
