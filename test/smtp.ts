import { Arrivals } from './arrivals.ts';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';

/** A message the receiver took: its envelope, its source and the source parsed by mailparser. */
export interface ReceivedMail {
  from: string;
  to: string[];
  source: Buffer;
  parsed: ParsedMail;
  /** The user that logged in, when one did. */
  user: string | undefined;
}

/** What the receiver answers at a step of a message: `undefined` takes it, a code refuses it with that code. */
export type SmtpAnswer = (step: 'rcpt' | 'data', address: string) => number | undefined;

/**
 * A real SMTP server on a loopback port (smtp-server, DESIGN.md "Test servers") that keeps what
 * it receives, parsed back with mailparser, and answers as `answer` says (taking everything by
 * default). With `auth`, clients must log in with that user and password; with `secure`, the
 * connection is TLS from the start (smtp-server's own self-signed certificate).
 */
export class SmtpReceiver {
  private readonly arrivals = new Arrivals<ReceivedMail>('messages');
  readonly received: ReceivedMail[] = this.arrivals.items;
  answer: SmtpAnswer = () => undefined;
  /** How many messages were refused, at either step. */
  refusals = 0;
  private readonly server: SMTPServer;
  readonly port: number;

  private constructor(server: SMTPServer, port: number) {
    this.server = server;
    this.port = port;
  }

  static async start(options: { auth?: { user: string; pass: string }; secure?: boolean } = {}): Promise<SmtpReceiver> {
    let receiver!: SmtpReceiver;
    // As Postfix does, the answer names the address it refuses.
    const refuse = (code: number, address: string) => {
      receiver.refusals++;
      return Object.assign(
        new Error(`<${address}>: Recipient address rejected: ${code >= 500 ? 'refused for good' : 'try again later'}`),
        { responseCode: code },
      );
    };
    const config: SMTPServerOptions = {
      secure: options.secure ?? false,
      // STARTTLS would need the client to trust smtp-server's self-signed certificate.
      disabledCommands: options.auth ? [] : ['AUTH', 'STARTTLS'],
      hideSTARTTLS: true,
      authOptional: !options.auth,
      allowInsecureAuth: true,
      logger: false,
      size: 10 * 1024 * 1024,
      onAuth(auth, _session, callback) {
        if (auth.username === options.auth?.user && auth.password === options.auth?.pass)
          return callback(null, { user: auth.username });
        callback(Object.assign(new Error('Invalid username or password'), { responseCode: 535 }));
      },
      onRcptTo(address, _session, callback) {
        const code = receiver.answer('rcpt', address.address);
        callback(code === undefined ? null : refuse(code, address.address));
      },
      onData(stream, session, callback) {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', async () => {
          const to = session.envelope.rcptTo.map((r) => r.address);
          const code = receiver.answer('data', to[0]);
          if (code !== undefined) return callback(refuse(code, to[0]));
          const source = Buffer.concat(chunks);
          const from = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
          receiver.arrivals.add({
            from,
            to,
            source,
            parsed: await simpleParser(source),
            user: session.user as string | undefined,
          });
          callback(null, 'Queued');
        });
      },
    };
    const server = new SMTPServer(config);
    server.on('error', () => {});
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    receiver = new SmtpReceiver(server, (server.server.address() as { port: number }).port);
    return receiver;
  }

  /** The SMTP_URL of this server; TLS certificates are not checked (the server's is self-signed). */
  url(auth?: { user: string; pass: string }, secure = false): string {
    const login = auth ? `${encodeURIComponent(auth.user)}:${encodeURIComponent(auth.pass)}@` : '';
    return `${secure ? 'smtps' : 'smtp'}://${login}127.0.0.1:${this.port}${secure ? '?tls.rejectUnauthorized=false' : ''}`;
  }

  /** Resolves once `count` messages have arrived; fails after `timeoutMs`. */
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedMail[]> {
    return this.arrivals.waitFor(count, timeoutMs);
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
