// The parts of the S3 emulator the tests use (the package ships no types).
declare module '@20minutes/s3rver' {
  import type { AddressInfo } from 'node:net';

  class S3rver {
    constructor(options: {
      address?: string;
      port?: number;
      silent?: boolean;
      directory?: string;
      configureBuckets?: { name: string }[];
    });
    run(): Promise<AddressInfo>;
    close(): Promise<void>;
  }
  export = S3rver;
}
