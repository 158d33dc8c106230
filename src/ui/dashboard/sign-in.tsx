/**
 * The key stays in this tab's sessionStorage and travels only in the
 * Authorization header. The input has no name, so even with the script
 * blocked a submit cannot put the key in a URL.
 */
export function SignIn() {
  return (
    <section id="sign-in-view" class="sign-in" aria-labelledby="sign-in-title">
      <h1 id="sign-in-title" tabindex={-1}>
        Sign in
      </h1>
      <p class="muted">Paste an API key. It stays in this browser tab and is forgotten when the tab closes.</p>
      <form id="sign-in-form" class="panel stack">
        <label for="api-key">API key</label>
        <input id="api-key" type="password" autocomplete="off" spellcheck={false} required />
        <p id="sign-in-error" class="error" role="alert" hidden />
        <button type="submit">Sign in</button>
      </form>
      <noscript>
        <p class="error">The dashboard needs JavaScript.</p>
      </noscript>
    </section>
  );
}
