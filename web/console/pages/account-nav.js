// The links between the pages of one account, for the operator.
import { html } from '../lib/html.js';

const PARTS = [
  ['', 'Account'],
  ['/keys', 'API keys'],
  ['/integrations', 'Integrations'],
  ['/suppressions', 'Suppressions'],
  ['/manifest', 'Manifest'],
  ['/outbox', 'Outbox'],
];

export function AccountNav({ accountId, current }) {
  return html`<nav aria-label="This account" class="subnav-wrap">
    <ul class="subnav">
      ${PARTS.map(
        ([part, label]) =>
          html`<li>
            <a
              href=${`#/accounts/${encodeURIComponent(accountId)}${part}`}
              aria-current=${current === part ? 'page' : undefined}
              >${label}</a
            >
          </li>`,
      )}
    </ul>
  </nav>`;
}
