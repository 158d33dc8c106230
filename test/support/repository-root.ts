import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** This repository's root, wherever the tests were started from. */
export const projectRoot = resolve(fileURLToPath(import.meta.url), '../../..');
