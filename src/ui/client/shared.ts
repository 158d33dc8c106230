import { FINAL_STATUSES } from '../../engine/index.js';
import { STATUS_LABELS } from '../job-status.js';

/*
 * Browser code shared by the dashboard's and the status page's inline
 * scripts. Plain ES2020 in strings: the pages need no build step and no file
 * of their own, and each script is wrapped in one function scope.
 * Data only ever reaches the page as text (textContent, setAttribute), never
 * as HTML.
 */

/** The words and final statuses of the server side, so both sides say the same. */
export const statusConstantsJs = /* js */ `
const STATUS_LABELS = ${JSON.stringify(STATUS_LABELS)};
const FINAL_STATUSES = ${JSON.stringify(FINAL_STATUSES)};
`;

export const domJs = /* js */ `
function byId(id) {
  return document.getElementById(id);
}

function setBadge(element, status) {
  element.dataset.status = status;
  element.textContent = STATUS_LABELS[status] || status;
}
`;

/** Building elements from data, for the dashboard's tables and charts. */
export const elementsJs = /* js */ `
function withAttributes(element, attributes, children) {
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value !== null && value !== undefined && value !== false) element.setAttribute(name, value === true ? '' : String(value));
  }
  // append() turns numbers and strings into text nodes.
  element.append(...children.filter((child) => child !== null && child !== undefined && child !== false));
  return element;
}

/** An HTML element; string and number children become text. */
function h(tag, attributes, ...children) {
  return withAttributes(document.createElement(tag), attributes, children);
}

/** An SVG element, for the charts. */
function svg(tag, attributes, ...children) {
  return withAttributes(document.createElementNS('http://www.w3.org/2000/svg', tag), attributes, children);
}
`;

export const timeJs = /* js */ `
function formatTime(iso) {
  return iso ? new Date(iso).toLocaleString() : '—';
}
`;
