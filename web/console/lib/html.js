// Markup as tagged templates (htm over Preact): values are always set as text or properties,
// never parsed as HTML, so a profile's "<img src=x onerror=…>" shows as those characters.
import { h } from 'preact';
import htm from 'htm';

export const html = htm.bind(h);
