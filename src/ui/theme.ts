/**
 * What both pages share: colours (each text colour at least 4.5:1 on its
 * background, chart colours at least 3:1 on white), the status badges,
 * buttons and a focus ring that keyboard users can always see.
 */
export const themeCss = /* css */ `
:root {
  --text: #1b1f24;
  --muted: #57606a;
  --line: #d0d7de;
  --page: #f6f8fa;
  --panel: #ffffff;
  --accent: #0a58ca;
  --accent-text: #ffffff;
  --danger: #b42318;
  --focus: #0a58ca;
  --radius: 8px;
  --chart-succeeded: #2f8f4e;
  --chart-failed: #d1242f;
  --depth-queued: #0a58ca;
  --depth-scheduled: #768390;
  --depth-retrying: #9a6700;
  --depth-running: #8250df;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  font-size: 15px;
  line-height: 1.45;
  color: var(--text);
  background: var(--page);
}
*, *::before, *::after { box-sizing: border-box; }
[hidden] { display: none !important; }
body { margin: 0; }
a { color: var(--accent); }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; border-radius: 3px; }
/* Headings take focus only when a view opens, to move screen readers there; no ring for that. */
[tabindex="-1"]:focus { outline: none; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono", monospace; font-size: 0.9em; }
.muted { color: var(--muted); }
.num { text-align: right; font-variant-numeric: tabular-nums; }

.badge {
  display: inline-block; padding: 0.1em 0.6em; border-radius: 999px;
  font-size: 0.85em; font-weight: 600; white-space: nowrap; border: 1px solid transparent;
}
.badge[data-status="scheduled"] { background: #eef1f5; color: #3d4654; border-color: #c9d1da; }
.badge[data-status="queued"] { background: #e7f0ff; color: #0a4fb4; border-color: #b6cff5; }
.badge[data-status="running"] { background: #f3edff; color: #5b2bb0; border-color: #d4c2f5; }
.badge[data-status="retrying"] { background: #fff4e0; color: #7d4300; border-color: #f0d19b; }
.badge[data-status="succeeded"] { background: #e5f6ea; color: #1a6b32; border-color: #b2e0c0; }
.badge[data-status="failed"] { background: #fdecec; color: #a11a1a; border-color: #f3b8b8; }
.badge[data-status="cancelled"] { background: #f0f0f0; color: #4a4a4a; border-color: #d0d0d0; }
.badge[data-status="expired"] { background: #f7ede2; color: #70421a; border-color: #e5cbb0; }

button, .button {
  font: inherit; font-weight: 600; cursor: pointer; min-height: 2.4rem; padding: 0.35rem 0.9rem;
  border-radius: 6px; border: 1px solid var(--accent); background: var(--accent); color: var(--accent-text);
}
button.secondary { background: var(--panel); color: var(--accent); }
button.danger { background: var(--panel); color: var(--danger); border-color: var(--danger); }
button:disabled { cursor: not-allowed; opacity: 0.55; }
input, select {
  font: inherit; min-height: 2.4rem; padding: 0.3rem 0.5rem; border: 1px solid #8c959f;
  border-radius: 6px; background: var(--panel); color: var(--text);
}
`;
