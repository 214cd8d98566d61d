import { html } from '../lib/html.js';
import { Page } from '../lib/ui.js';

export default function Todo() {
  return html`<${Page} title="profiles"><p>To come.</p><//>`;
}
