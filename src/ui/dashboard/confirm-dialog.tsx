/** Every action asks first; Escape or "Keep as is" changes nothing. */
export function ConfirmDialog() {
  return (
    <dialog id="confirm-dialog" aria-labelledby="confirm-title" aria-describedby="confirm-text">
      <form method="dialog" class="stack">
        {/* biome-ignore lint/a11y/useHeadingContent: filled in by the page before the dialog opens */}
        <h2 id="confirm-title" />
        <p id="confirm-text" />
        <div class="actions">
          <button type="submit" value="cancel" class="secondary">
            Keep as is
          </button>
          <button type="submit" value="confirm" id="confirm-ok" />
        </div>
      </form>
    </dialog>
  );
}
