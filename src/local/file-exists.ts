import { access } from 'node:fs/promises';

/** Whether something exists at `path` that this process can see. */
export async function fileExists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}
