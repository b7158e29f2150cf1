// Package notify delivers notifications: mail over SMTP (through go-mail)
// and SMS through a gateway, behind two small interfaces, Mailer and
// SMSGateway, and renders notification templates into messages.
//
// # Mail
//
// SMTPMailer sends one Message per call over a small pool of SMTP
// connections (host, port, TLS mode none, STARTTLS or implicit TLS, optional
// authentication). A Message carries an HTML part and a text part, inline
// images (referred to from the HTML as cid:<id>) and attachments; HTML
// images given as data: URIs are turned into inline parts. Severity maps to
// the priority headers mail clients read (X-Priority, Importance, Priority,
// X-MSMail-Priority).
//
// # SMS
//
// SMSGateway has two adapters: WebhookGateway posts JSON to any URL;
// TwilioGateway speaks the Twilio Messages REST API (or any API of that
// shape). Both retry answers that say "try again" (429, 5xx) a few times
// and never retry a request whose fate is unknown.
//
// # Outcomes
//
// Every send returns nil (accepted), or an error Classify sorts into
// Permanent (the server refused this message: do not retry), Temporary
// (nothing was delivered: retry later) or Uncertain (the message may have
// been delivered: never retry, or the recipient may get it twice).
//
// # Rendering
//
// Render fills %macro% placeholders: HTML-escaped in mail HTML, as they are
// in the subject, the text part and SMS. Wrap puts rendered HTML into a
// module's html_wrap at its {{body}} placeholder.
//
// # Outbox
//
// Outbox is a Mailer and an SMSGateway that write each message to a folder
// and one line to a log instead of sending it: `iam dev` uses it unless SMTP
// or a gateway is configured.
package notify
