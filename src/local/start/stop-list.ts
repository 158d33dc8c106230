/** What `npm start` started, to be stopped newest first: the Worker before the database it uses. */
export class StopList {
  private readonly entries: Array<{ name: string; stop: () => Promise<void> | void }> = [];

  add(name: string, stop: () => Promise<void> | void): void {
    this.entries.push({ name, stop });
  }

  /** Stops everything, even past a failure, which is reported as one line. False when any failed. */
  async stopAll(report: (line: string) => void): Promise<boolean> {
    let clean = true;
    for (const { name, stop } of this.entries.splice(0).reverse()) {
      try {
        await stop();
      } catch (error) {
        clean = false;
        report(`could not stop ${name}: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    return clean;
  }
}
