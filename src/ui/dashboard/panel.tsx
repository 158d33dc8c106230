import type { Child } from 'hono/jsx';

/** A titled box of the dashboard; its heading names it for screen readers. */
export function Panel({ id, title, aside, children }: { id: string; title: string; aside?: Child; children: Child }) {
  return (
    <section class="panel" aria-labelledby={`${id}-title`}>
      <div class="panel-head">
        <h2 id={`${id}-title`}>{title}</h2>
        {aside}
      </div>
      {children}
    </section>
  );
}

/** A column heading; numeric columns are right-aligned, so their digits line up. */
export type Column = string | { numeric: string };

/**
 * A table that scrolls sideways on a narrow screen instead of squeezing its
 * columns. Its body is the script's to fill.
 */
export function ScrollTable({ id, label, columns }: { id: string; label: string; columns: Column[] }) {
  return (
    <div class="table-scroll">
      <table id={id} aria-label={label}>
        <thead>
          <tr>
            {columns.map((column) =>
              typeof column === 'string' ? (
                <th scope="col">{column}</th>
              ) : (
                <th scope="col" class="num">
                  {column.numeric}
                </th>
              ),
            )}
          </tr>
        </thead>
        <tbody />
      </table>
    </div>
  );
}
