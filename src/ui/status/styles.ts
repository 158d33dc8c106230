/** A card centred on the page; embedded (?embed=1) it fills its frame on a transparent background. */
export const statusCss = /* css */ `
body { min-height: 100vh; display: grid; place-items: center; padding: 1rem; }
.status-card {
  width: min(100%, 26rem); background: var(--panel); border: 1px solid var(--line);
  border-radius: 12px; padding: 1.5rem; box-shadow: 0 1px 3px rgb(20 33 61 / 0.08);
}
.eyebrow { margin: 0; color: var(--muted); font-size: 0.85rem; text-transform: uppercase; letter-spacing: 0.06em; }
.status-card h1 { margin: 0.4rem 0 1rem; font-size: 1.5rem; }
.status-card h1 .badge { font-size: 1.1rem; padding: 0.2em 0.8em; }
.progress { display: grid; gap: 0.3rem; margin-bottom: 1rem; }
progress { width: 100%; height: 0.75rem; accent-color: var(--accent); }
.times { display: grid; grid-template-columns: max-content 1fr; gap: 0.3rem 1rem; margin: 0; }
.times div { display: contents; }
.times dt { color: var(--muted); }
.times dd { margin: 0; font-variant-numeric: tabular-nums; }
.live { margin: 1rem 0 0; min-height: 1.2em; color: var(--muted); font-size: 0.85rem; }
.powered { margin: 1rem 0 0; text-align: center; color: var(--muted); font-size: 0.8rem; }
body.embed { background: transparent; padding: 0; place-items: stretch; min-height: 0; }
body.embed .status-card { width: 100%; border: none; box-shadow: none; border-radius: 0; padding: 0.75rem; background: transparent; }
`;
