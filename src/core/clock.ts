/** Milliseconds since the Unix epoch. Injected wherever time decides behaviour, so tests can move it. */
export type Clock = () => number;

export const systemClock: Clock = () => Date.now();
