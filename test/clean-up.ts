import { afterAll } from 'vitest';
import { cleanUpFile } from './scratch.ts';

// The folders and processes a test file made go when it ends (test/scratch.ts), after its own
// hooks: a setup file's afterAll runs after those of the file.
afterAll(cleanUpFile);
