import type { Child } from 'hono/jsx';
import { raw } from 'hono/html';

/** A small queue-shaped mark, so the tab is recognizable without fetching a file. */
const FAVICON =
  "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'%3E%3Crect width='16' height='16' rx='3' fill='%230a58ca'/%3E%3Cpath d='M4 5h8M4 8h8M4 11h5' stroke='white' stroke-width='1.6'/%3E%3C/svg%3E";

export interface DocumentProps {
  title: string;
  /** The request's CSP nonce: the only inline style and script that run carry it. */
  nonce: string;
  css: string;
  /** Without one, the page has no script at all. */
  script?: string;
  bodyClass?: string;
  children: Child;
}

/**
 * The HTML around every page: everything inline (style, script, icon), so a
 * page works offline and the CSP needs no source but this origin.
 */
export function Document({ title, nonce, css, script, bodyClass, children }: DocumentProps) {
  return (
    <>
      {raw('<!doctype html>')}
      <html lang="en">
        <head>
          <meta charset="utf-8" />
          <meta name="viewport" content="width=device-width, initial-scale=1" />
          <meta name="color-scheme" content="light" />
          <meta name="robots" content="noindex" />
          <title>{title}</title>
          <link rel="icon" href={FAVICON} />
          {/* Raw: CSS and JS are ours, and HTML-escaping would break them. */}
          <style nonce={nonce}>{raw(css)}</style>
        </head>
        <body class={bodyClass}>
          {children}
          {script === undefined ? null : <script nonce={nonce}>{raw(script)}</script>}
        </body>
      </html>
    </>
  );
}
