/**
 * The one line of news at the top of the page (an action's outcome, a
 * refusal, a failed refresh), and the dialog that confirms every action.
 */
export const noticeJs = /* js */ `
/** source: 'refresh' marks a notice that the next good refresh takes away. */
function showNotice(kind, text, source = 'action') {
  const notice = byId('notice');
  notice.dataset.kind = kind;
  notice.dataset.source = source;
  notice.textContent = text;
  notice.hidden = false;
}

function clearNotice(source) {
  const notice = byId('notice');
  if (source === undefined || notice.dataset.source === source) notice.hidden = true;
}

/** Resolves true only when the confirming button was pressed; Escape and "Keep as is" mean no. */
function confirmAction(title, text, confirmLabel) {
  const dialog = byId('confirm-dialog');
  byId('confirm-title').textContent = title;
  byId('confirm-text').textContent = text;
  byId('confirm-ok').textContent = confirmLabel;
  dialog.returnValue = '';
  dialog.showModal();
  return new Promise((resolve) => dialog.addEventListener('close', () => resolve(dialog.returnValue === 'confirm'), { once: true }));
}
`;
