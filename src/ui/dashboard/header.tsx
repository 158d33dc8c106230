/** The bar on top: where you are, how fresh the numbers are, and signing out. */
export function Header() {
  return (
    <header class="topbar">
      <a class="brand" href="#/">
        skiplock
      </a>
      <nav aria-label="Dashboard" id="nav" hidden>
        <a href="#/">Overview</a>
        <a href="#/jobs">Jobs</a>
      </nav>
      <div class="session" id="session" hidden>
        <span id="refreshed" class="refreshed" />
        <button type="button" id="sign-out" class="secondary">
          Sign out
        </button>
      </div>
    </header>
  );
}
