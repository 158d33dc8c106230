import { FINAL_STATUSES, type JobStatus } from '../../engine/types.js';
import { STATUS_LABELS } from '../job-status.js';

/*
 * Browser code that the dashboard's and the status page's scripts share.
 * Data only ever reaches a page as text (textContent, setAttribute), never
 * as HTML.
 */

/** A class of element, as `instanceof` takes it: HTMLInputElement, HTMLSelectElement, … */
type ElementClass<T extends Element> = abstract new (...args: never[]) => T;

/**
 * The page's element `id`, checked to be a `type` (any HTML element unless
 * said). Every id is in the page's own markup: one missing is a bug here.
 */
export function byId(id: string): HTMLElement;
export function byId<T extends Element>(id: string, type: ElementClass<T>): T;
export function byId(id: string, type: ElementClass<Element> = HTMLElement): Element {
  const element = document.getElementById(id);
  if (!(element instanceof type)) throw new Error(`the page has no ${type.name} #${id}`);
  return element;
}

/** The status words of the server side, so both sides say the same. */
export function setBadge(element: HTMLElement, status: JobStatus): void {
  element.dataset.status = status;
  element.textContent = STATUS_LABELS[status];
}

/** Whether a status is final; a page's data attribute may hold none. */
export function isFinal(status: string | undefined): boolean {
  return FINAL_STATUSES.some((final) => final === status);
}

export function formatTime(iso: string | null | undefined): string {
  return iso ? new Date(iso).toLocaleString() : '—';
}
