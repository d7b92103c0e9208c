// Invite emails, sent only when an SMTP server is configured (SMTP_URL). Sending happens after
// the invite is stored and answered: a slow or failing mail server never fails the request,
// it is logged (PostHog also sends from a background task and only records the attempt).
import { createTransport, type Transporter } from 'nodemailer';
import type { Logger } from '../lib/index.js';

export interface InviteEmail {
  to: string;
  firstName: string;
  organizationName: string;
  inviterName: string;
  inviterEmail: string | null;
  message: string | null;
  inviteId: string;
  expiresAt: Date;
}

export class InviteMailer {
  private readonly transport: Transporter;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    smtpUrl: string,
    private readonly from: string,
    private readonly log: Logger,
  ) {
    this.transport = createTransport(smtpUrl);
  }

  /** Starts sending; resolves once the mail server accepted or refused it (errors are logged). */
  send(email: InviteEmail): Promise<void> {
    const greeting = email.firstName ? `Hi ${email.firstName},` : 'Hi,';
    const lines = [
      greeting,
      '',
      `${email.inviterName} invited you to join the organization "${email.organizationName}" on Spate.`,
      ...(email.message ? ['', `Their message: ${email.message}`] : []),
      '',
      `Invite id: ${email.inviteId}`,
      `The invite is valid until ${email.expiresAt.toISOString()}.`,
    ];
    const sending = this.transport
      .sendMail({
        from: this.from,
        to: email.to,
        replyTo: email.inviterEmail ?? undefined,
        subject: `${email.inviterName} invited you to join ${email.organizationName} on Spate`,
        text: lines.join('\n'),
      })
      .then(
        () => this.log.info({ invite: email.inviteId }, 'invite email sent'),
        (err: unknown) => this.log.error({ err, invite: email.inviteId }, 'invite email could not be sent'),
      );
    this.inFlight.add(sending);
    void sending.finally(() => this.inFlight.delete(sending));
    return sending;
  }

  /** Waits for emails being sent, then closes the connections. */
  async close(): Promise<void> {
    await Promise.all(this.inFlight);
    this.transport.close();
  }
}
