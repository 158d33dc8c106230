import { byId } from '../../browser/shared.js';

/**
 * Building elements from data, for the dashboard's tables and charts:
 * numbers and strings become text nodes, never HTML.
 */

/** An attribute's value: true is present and empty; false, null and undefined leave it out. */
type AttributeValue = string | number | boolean | null | undefined;
type Attributes = Record<string, AttributeValue>;
/** A child: false, null and undefined are left out, so a child can be written as a condition. */
type ElementChild = Node | string | number | false | null | undefined;

function withAttributes<E extends Element>(element: E, attributes: Attributes, children: readonly ElementChild[]): E {
  for (const [name, value] of Object.entries(attributes)) {
    if (value !== null && value !== undefined && value !== false)
      element.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children) {
    if (child !== null && child !== undefined && child !== false)
      element.append(typeof child === 'number' ? String(child) : child);
  }
  return element;
}

/** An HTML element. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Attributes,
  ...children: ElementChild[]
): HTMLElementTagNameMap[K] {
  return withAttributes(document.createElement(tag), attributes, children);
}

/** An SVG element, for the charts. */
export function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attributes: Attributes,
  ...children: ElementChild[]
): SVGElementTagNameMap[K] {
  return withAttributes(document.createElementNS('http://www.w3.org/2000/svg', tag), attributes, children);
}

/** Puts `rows` in the body of table #tableId, in place of what it held. */
export function showRows(tableId: string, rows: readonly HTMLTableRowElement[]): void {
  const body = byId(tableId, HTMLTableElement).tBodies[0];
  if (body === undefined) throw new Error(`the table #${tableId} has no body`);
  body.replaceChildren(...rows);
}
