import { byId } from '../../browser/shared.js';

/**
 * The one line of news at the top of the page (an action's outcome, a
 * refusal, a failed refresh), and the dialog that confirms every action.
 */

type NoticeKind = 'ok' | 'error';
/** 'refresh' marks a notice that the next good refresh takes away. */
type NoticeSource = 'action' | 'refresh';

export function showNotice(kind: NoticeKind, text: string, source: NoticeSource = 'action'): void {
  const notice = byId('notice');
  notice.dataset.kind = kind;
  notice.dataset.source = source;
  notice.textContent = text;
  notice.hidden = false;
}

/** Takes the notice away; with a source, only a notice from it. */
export function clearNotice(source?: NoticeSource): void {
  const notice = byId('notice');
  if (source === undefined || notice.dataset.source === source) notice.hidden = true;
}

/** Resolves true only when the confirming button was pressed; Escape and "Keep as is" mean no. */
export function confirmAction(title: string, text: string, confirmLabel: string): Promise<boolean> {
  const dialog = byId('confirm-dialog', HTMLDialogElement);
  byId('confirm-title').textContent = title;
  byId('confirm-text').textContent = text;
  byId('confirm-ok').textContent = confirmLabel;
  dialog.returnValue = '';
  dialog.showModal();
  return new Promise((resolve) =>
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'confirm'), { once: true }),
  );
}
