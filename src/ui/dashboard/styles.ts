/** The dashboard's layout; phone widths stack everything in one column and scroll wide tables sideways. */
export const dashboardCss = /* css */ `
.topbar {
  display: flex; flex-wrap: wrap; align-items: center; gap: 0.5rem 1.5rem;
  padding: 0.6rem 1.25rem; background: #14213d; color: #ffffff;
}
.topbar a { color: #ffffff; }
.brand { font-weight: 700; font-size: 1.15rem; text-decoration: none; letter-spacing: 0.02em; }
.topbar nav { display: flex; gap: 1rem; }
.topbar nav a { text-decoration: none; padding: 0.3rem 0.1rem; border-bottom: 2px solid transparent; }
.topbar nav a[aria-current="page"] { border-bottom-color: #ffffff; font-weight: 600; }
.topbar :focus-visible { outline-color: #ffffff; }
.session { margin-left: auto; display: flex; align-items: center; gap: 0.75rem; }
.refreshed { color: #d0d7e2; font-size: 0.85rem; }
.session button { min-height: 2rem; padding: 0.2rem 0.7rem; }

main { max-width: 1280px; margin: 0 auto; padding: 1rem 1.25rem 3rem; }
h1 { font-size: 1.5rem; margin: 0.5rem 0 1rem; }
h2 { font-size: 1.05rem; margin: 0; }
.panel {
  background: var(--panel); border: 1px solid var(--line); border-radius: var(--radius);
  padding: 1rem; margin-bottom: 1rem; min-width: 0;
}
.panel-head { display: flex; flex-wrap: wrap; justify-content: space-between; align-items: baseline; gap: 0.5rem; margin-bottom: 0.75rem; }
.columns { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 420px), 1fr)); gap: 0 1rem; }
.stack { display: grid; gap: 0.6rem; }
.narrow { max-width: 32rem; }
.field { display: grid; gap: 0.25rem; }
.row { display: flex; flex-wrap: wrap; gap: 0.75rem; }
.actions { display: flex; flex-wrap: wrap; gap: 0.5rem; }
fieldset { border: 1px solid var(--line); border-radius: 6px; padding: 0.5rem 0.75rem 0.75rem; margin: 0; }
legend { padding: 0 0.25rem; font-weight: 600; }
label { font-weight: 600; }
.error { color: var(--danger); font-weight: 600; margin: 0; }
.empty { margin: 0.5rem 0 0; }
.footnote { margin: 0.5rem 0 0; font-size: 0.85rem; }

.notice {
  position: sticky; top: 0.5rem; z-index: 1; margin: 0 0 1rem; padding: 0.6rem 0.9rem;
  border-radius: 6px; border: 1px solid; font-weight: 600;
}
.notice[data-kind="error"] { background: #fdecec; color: #8a1414; border-color: #f3b8b8; }
.notice[data-kind="ok"] { background: #e5f6ea; color: #14532a; border-color: #b2e0c0; }

.sign-in { max-width: 28rem; margin: 3rem auto; }

.totals { display: grid; grid-template-columns: repeat(auto-fit, minmax(9.5rem, 1fr)); gap: 0.75rem; margin: 0 0 1rem; }
.total { background: var(--panel); border: 1px solid var(--line); border-radius: var(--radius); padding: 0.75rem 1rem; }
.total dt { color: var(--muted); font-size: 0.85rem; }
.total dd { margin: 0.2rem 0 0; font-size: 1.6rem; font-weight: 700; font-variant-numeric: tabular-nums; }

.queue-settings { font-size: 0.8rem; font-weight: 400; }
.queue-action { display: block; min-height: 1.75rem; padding: 0.1rem 0.6rem; font-size: 0.8rem; margin-top: 0.3rem; }

.chart svg { display: block; width: 100%; height: 140px; }
.axis { display: flex; justify-content: space-between; margin: 0.3rem 0 0; font-size: 0.8rem; }
.legend { display: flex; flex-wrap: wrap; gap: 0.9rem; margin: 0; font-size: 0.85rem; color: var(--muted); }
.swatch::before { content: ""; display: inline-block; width: 0.75rem; height: 0.75rem; border-radius: 2px; margin-right: 0.3rem; vertical-align: -0.05rem; }
.swatch-succeeded::before, .bar-succeeded { background: var(--chart-succeeded); fill: var(--chart-succeeded); }
.swatch-failed::before, .bar-failed { background: var(--chart-failed); fill: var(--chart-failed); }
.swatch-queued::before, .depth-queued { background: var(--depth-queued); fill: var(--depth-queued); }
.swatch-scheduled::before, .depth-scheduled { background: var(--depth-scheduled); fill: var(--depth-scheduled); }
.swatch-retrying::before, .depth-retrying { background: var(--depth-retrying); fill: var(--depth-retrying); }
.swatch-running::before, .depth-running { background: var(--depth-running); fill: var(--depth-running); }
.depth-track { fill: #eef1f5; }
.spark-line { fill: none; stroke: var(--chart-succeeded); stroke-width: 1.5; }
.spark-base { stroke: var(--line); stroke-width: 1; }

.table-scroll { overflow-x: auto; }
table { width: 100%; border-collapse: collapse; }
th, td { padding: 0.45rem 0.6rem; border-bottom: 1px solid var(--line); text-align: left; white-space: nowrap; vertical-align: middle; }
thead th { font-size: 0.8rem; color: var(--muted); font-weight: 600; }
tbody th { font-weight: 600; }
tbody tr:last-child > * { border-bottom: none; }
td svg { display: block; }

.inline-form { display: flex; flex-wrap: wrap; align-items: center; gap: 0.5rem; margin-top: 0.75rem; }
.filters { display: flex; flex-wrap: wrap; align-items: end; gap: 0.75rem; }
.filters input, .filters select { width: 12rem; }
.bulk-title { flex: 1 1 100%; font-weight: 600; }
.check { display: flex; align-items: center; gap: 0.4rem; min-height: 2.5rem; }
.filters .check input { width: auto; }
.pager { display: flex; justify-content: space-between; margin-top: 0.75rem; }
.tag { display: inline-block; margin-right: 0.3rem; padding: 0 0.35rem; border: 1px solid var(--line); border-radius: 0.25rem; font-size: 0.8rem; }

.job-head { display: flex; flex-wrap: wrap; align-items: center; gap: 0.5rem 1rem; margin-bottom: 1rem; }
.job-head h1 { margin: 0; font-size: 1.2rem; overflow-wrap: anywhere; }
.job-head .actions { margin-left: auto; }
.details { display: grid; grid-template-columns: max-content 1fr; gap: 0.35rem 1rem; margin: 0; }
.details dt { color: var(--muted); }
.details dd { margin: 0; overflow-wrap: anywhere; font-variant-numeric: tabular-nums; }
.json { margin: 0; padding: 0.75rem; background: var(--page); border-radius: 6px; overflow: auto; max-height: 20rem; }
.timeline { list-style: none; margin: 0; padding: 0; }
.timeline li { position: relative; padding: 0 0 0.7rem 1.3rem; border-left: 2px solid var(--line); margin-left: 0.4rem; }
.timeline li::before {
  content: ""; position: absolute; left: -0.45rem; top: 0.3rem; width: 0.7rem; height: 0.7rem;
  border-radius: 50%; background: var(--panel); border: 2px solid var(--accent);
}
.timeline li:last-child { border-left-color: transparent; }
.event-kind { font-weight: 600; }
.event-detail { display: block; color: var(--muted); font-size: 0.85rem; overflow-wrap: anywhere; }

dialog { border: 1px solid var(--line); border-radius: var(--radius); padding: 1.25rem; max-width: min(30rem, calc(100vw - 2rem)); }
dialog::backdrop { background: rgb(20 33 61 / 0.45); }
dialog .actions { justify-content: flex-end; }

@media (max-width: 640px) {
  main { padding: 0.75rem 0.75rem 2rem; }
  .topbar { padding: 0.5rem 0.75rem; }
  .filters input, .filters select { width: 100%; }
  .filters .field { flex: 1 1 100%; }
  .job-head .actions { margin-left: 0; }
  .total dd { font-size: 1.3rem; }
}
`;
