import { html } from '../lib/html.js';
import { Page } from '../lib/ui.js';

export default function Todo() {
  return html`<${Page} title="profile"><p>To come.</p><//>`;
}
