// The segment builder: conditions on attributes and events, chosen by their names, combined in
// groups of "all" (&&) or "any" (||). It edits the tree of lib/aql.js; the page writes it as AQL.
// AQL (docs/aql.md) has no term for tags or consents and no negation: the builder offers what the
// query language can say, and the exports page filters by consent.
import { useEffect, useState } from 'preact/hooks';
import { api } from '../lib/api.js';
import { html } from '../lib/html.js';
import { UNITS } from '../lib/aql.js';
import { Field } from '../lib/ui.js';

/** The sections the session reads, each with its attributes and events: { sections, byVersion }. */
export function useDefinitions() {
  const [state, setState] = useState({ data: undefined, error: undefined });
  const [round, setRound] = useState(0);
  useEffect(() => {
    let live = true;
    (async () => {
      const { items } = await api('GET', '/audience/sections');
      const sections = await Promise.all(
        items.map(async (s) => {
          const of = { params: { section_discriminator: s.discriminator } };
          const [attributes, events] = await Promise.all([
            api('GET', '/audience/sections/{section_discriminator}/attributes', of),
            api('GET', '/audience/sections/{section_discriminator}/events', of),
          ]);
          return { ...s, attributes: attributes.items, events: events.items };
        }),
      );
      // Each version id of an attribute or event, with its section and definition.
      const byVersion = new Map();
      for (const section of sections)
        for (const kind of ['attributes', 'events'])
          for (const definition of section[kind])
            definition.versions.forEach((version, index) =>
              byVersion.set(`${kind}:${version.id}`, { section, definition, version, index }),
            );
      return { sections, byVersion };
    })().then(
      (data) => live && setState({ data, error: undefined }),
      (error) => live && setState({ data: undefined, error }),
    );
    return () => {
      live = false;
    };
  }, [round]);
  return { ...state, reload: () => setRound((r) => r + 1) };
}

/** The JSON kind a type compares with (docs/aql.md "Conditions"). */
function kindOf(type) {
  if (type === 'True/False') return 'boolean';
  if (type === 'Number' || type === 'Number with decimal' || type === 'Timestamp') return 'number';
  if (type === 'Struct') return 'struct';
  return 'string';
}

/** The comparisons a type takes, in words. */
function comparisonsOf(type) {
  if (type === 'True/False')
    return [
      ['eq', 'is'],
      ['neq', 'is not'],
    ];
  const [before, after] =
    type === 'Date' || type === 'Timestamp' ? ['is before', 'is after'] : ['is less than', 'is more than'];
  return [
    ['eq', 'is'],
    ['neq', 'is not'],
    ['lt', before],
    ['lte', type === 'Date' || type === 'Timestamp' ? 'is on or before' : 'is at most'],
    ['gt', after],
    ['gte', type === 'Date' || type === 'Timestamp' ? 'is on or after' : 'is at least'],
  ];
}

/** A value fit for a type: kept when it fits, else the type's plain default. */
function valueFor(type, value) {
  const kind = kindOf(type);
  if (kind === 'boolean') return value?.type === 'boolean' ? value : { type: 'boolean', text: 'true' };
  if (kind === 'number')
    return value?.type === 'number' ? value : { type: 'number', text: type === 'Timestamp' ? String(Date.now()) : '0' };
  return value?.type === 'string' ? value : { type: 'string', text: '' };
}

/** A local date and time for a datetime-local input, from ms since the epoch. */
function localTime(ms) {
  const date = new Date(Number(ms));
  if (Number.isNaN(date.getTime())) return '';
  return new Date(date.getTime() - date.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
}

/** The value's input, by the type: yes/no, a number, a date, a date and time, or text. */
function ValueInput({ type, value, onChange, label }) {
  const set = (text) => onChange({ ...valueFor(type, value), text });
  if (type === 'True/False')
    return html`<${Field} label=${label} as="select" value=${value.text} onChange=${(e) => set(e.currentTarget.value)}>
      <option value="true">yes</option>
      <option value="false">no</option>
    <//>`;
  if (type === 'Timestamp')
    return html`<${Field}
      label=${label}
      type="datetime-local"
      value=${localTime(value.text)}
      onChange=${(e) => set(String(new Date(e.currentTarget.value).getTime()))}
    />`;
  if (kindOf(type) === 'number')
    return html`<${Field}
      label=${label}
      type="number"
      step="any"
      value=${value.text}
      onInput=${(e) => set(e.currentTarget.value)}
    />`;
  return html`<${Field}
    label=${label}
    type=${type === 'Date' ? 'date' : 'text'}
    value=${value.text}
    onInput=${(e) => set(e.currentTarget.value)}
  />`;
}

/** The attributes or events of every section as options, by section; older versions only where used. */
function DefinitionOptions({ defs, kind, current }) {
  return defs.sections.map(
    (section) =>
      html`<optgroup label=${section.name}>
        ${section[kind].map((definition) => {
          const latest = definition.versions.at(-1);
          const used = definition.versions.find((v) => v.id === current && v !== latest);
          return html`<option value=${latest.id}>${definition.name}</option>
            ${
              used
                ? html`<option value=${used.id}>
                    ${`${definition.name} (older version ${definition.versions.indexOf(used) + 1})`}
                  </option>`
                : null
            }`;
        })}
      </optgroup>`,
  );
}

function AttributeCondition({ node, defs, onChange, label }) {
  const found = defs.byVersion.get(`attributes:${node.version}`);
  const type = found?.version.type[0] ?? 'Text';
  const choose = (versionId) => {
    const next = defs.byVersion.get(`attributes:${versionId}`);
    const nextType = next.version.type[0];
    const comparator = comparisonsOf(nextType).some(([c]) => c === node.comparator) ? node.comparator : 'eq';
    onChange({
      ...node,
      section: next.section.id,
      version: versionId,
      path: '',
      comparator,
      value: valueFor(nextType, node.value),
    });
  };
  // A Struct's value is compared field by field: the field's type is not declared, so it is told by its value.
  const compared =
    type === 'Struct' ? { string: 'Text', number: 'Number', boolean: 'True/False' }[node.value.type] : type;
  return html`<div class="row condition-fields">
    <${Field} label="Attribute" as="select" value=${node.version} onChange=${(e) => choose(e.currentTarget.value)}>
      <${DefinitionOptions} defs=${defs} kind="attributes" current=${node.version} />
    <//>
    ${
      type === 'Struct'
        ? html`<${Field}
              label="Field"
              value=${node.path}
              spellcheck="false"
              hint="A field of the value, such as address.city"
              onInput=${(e) => onChange({ ...node, path: e.currentTarget.value })}
            />
            <${Field}
              label="Field type"
              as="select"
              value=${compared}
              onChange=${(e) => onChange({ ...node, value: valueFor(e.currentTarget.value, undefined) })}
            >
              <option value="Text">text</option>
              <option value="Number">number</option>
              <option value="True/False">yes or no</option>
            <//>`
        : null
    }
    <${Field}
      label="Comparison"
      as="select"
      value=${node.comparator}
      onChange=${(e) => onChange({ ...node, comparator: e.currentTarget.value })}
    >
      ${comparisonsOf(compared).map(([c, words]) => html`<option value=${c}>${words}</option>`)}
    <//>
    <${ValueInput}
      label="Value"
      type=${compared}
      value=${node.value}
      onChange=${(value) => onChange({ ...node, value })}
    />
  </div>`;
}

const UNIT_WORDS = { minute: 'minutes', hour: 'hours', day: 'days', week: 'weeks', month: 'months' };

function windowMode(window) {
  if (!window) return 'ever';
  if (window.kind === 'betweenDates') return 'dates';
  return window.from === 0 ? 'last' : 'ago';
}

function TimeWindow({ window, onChange }) {
  const mode = windowMode(window);
  const today = new Date().toISOString().slice(0, 10);
  const switchTo = (next) =>
    onChange(
      next === 'ever'
        ? null
        : next === 'dates'
          ? { kind: 'betweenDates', start: window?.start ?? today, end: window?.end ?? today }
          : {
              kind: 'inLast',
              unit: window?.unit ?? 'day',
              from: next === 'last' ? 0 : window?.from || 1,
              to: window?.to ?? 30,
            },
    );
  const number = (label, key) =>
    html`<${Field}
      label=${label}
      type="number"
      min="0"
      step="1"
      value=${String(window[key])}
      onInput=${(e) => onChange({ ...window, [key]: Math.max(0, Math.trunc(Number(e.currentTarget.value) || 0)) })}
    />`;
  return html`<${Field} label="When" as="select" value=${mode} onChange=${(e) => switchTo(e.currentTarget.value)}>
      <option value="ever">at any time</option>
      <option value="last">in the last…</option>
      <option value="ago">between … and … ago</option>
      <option value="dates">between two dates</option>
    <//>
    ${
      mode === 'last' || mode === 'ago'
        ? html`${mode === 'ago' ? number('From', 'from') : null} ${number(mode === 'ago' ? 'To' : 'How many', 'to')}
            <${Field}
              label="Unit"
              as="select"
              value=${window.unit}
              onChange=${(e) => onChange({ ...window, unit: e.currentTarget.value })}
            >
              ${UNITS.map((u) => html`<option value=${u}>${UNIT_WORDS[u]}</option>`)}
            <//>`
        : null
    }
    ${
      mode === 'dates'
        ? html`<${Field}
              label="From the day"
              type="date"
              value=${window.start}
              onInput=${(e) => onChange({ ...window, start: e.currentTarget.value })}
            />
            <${Field}
              label="To the day"
              type="date"
              value=${window.end}
              onInput=${(e) => onChange({ ...window, end: e.currentTarget.value })}
            />`
        : null
    }`;
}

function EventCondition({ node, defs, onChange }) {
  const found = defs.byVersion.get(`events:${node.version}`);
  const fields = found?.version.type ?? [];
  const setCondition = (i, condition) =>
    onChange({ ...node, conditions: node.conditions.map((c, j) => (j === i ? condition : c)) });
  const fieldType = (name) => fields.find((f) => f.name === name)?.type ?? 'Text';
  return html`<div class="row condition-fields">
      <${Field}
        label="Event"
        as="select"
        value=${node.version}
        onChange=${(e) => {
          const next = defs.byVersion.get(`events:${e.currentTarget.value}`);
          onChange({ ...node, section: next.section.id, version: e.currentTarget.value, conditions: [] });
        }}
      >
        <${DefinitionOptions} defs=${defs} kind="events" current=${node.version} />
      <//>
      <${TimeWindow} window=${node.window} onChange=${(window) => onChange({ ...node, window })} />
    </div>
    ${node.conditions.map(
      (c, i) =>
        html`<div class="row condition-fields event-data" role="group" aria-label=${`Event data ${i + 1}`}>
          <${Field}
            label="Event field"
            value=${c.path}
            list=${`fields-${node.version}`}
            spellcheck="false"
            onInput=${(e) => {
              const type = fieldType(e.currentTarget.value);
              setCondition(i, { ...c, path: e.currentTarget.value, value: valueFor(type, c.value) });
            }}
          />
          <${Field}
            label="Comparison"
            as="select"
            value=${c.comparator}
            onChange=${(e) => setCondition(i, { ...c, comparator: e.currentTarget.value })}
          >
            ${comparisonsOf(fieldType(c.path)).map(([k, words]) => html`<option value=${k}>${words}</option>`)}
          <//>
          <${ValueInput}
            label="Value"
            type=${fieldType(c.path)}
            value=${c.value}
            onChange=${(value) => setCondition(i, { ...c, value })}
          />
          <button
            type="button"
            onClick=${() => onChange({ ...node, conditions: node.conditions.filter((_, j) => j !== i) })}
          >
            Remove<span class="visually-hidden"> this event data condition</span>
          </button>
        </div>`,
    )}
    <datalist id=${`fields-${node.version}`}>${fields.map((f) => html`<option value=${f.name}></option>`)}</datalist>
    <div class="actions">
      <button
        type="button"
        onClick=${() =>
          onChange({
            ...node,
            conditions: [
              ...node.conditions,
              { path: fields[0]?.name ?? '', comparator: 'eq', value: valueFor(fields[0]?.type ?? 'Text') },
            ],
          })}
      >
        Add a condition on the event's data
      </button>
    </div>`;
}

/** A new condition of a kind: the first attribute or event of the chosen section. */
function newCondition(kind, defs, section) {
  const ordered = [section, ...defs.sections.filter((s) => s !== section)].filter(Boolean);
  const owner = ordered.find((s) => s[kind].length > 0);
  if (!owner) return undefined;
  const version = owner[kind][0].versions.at(-1);
  if (kind === 'events')
    return {
      kind: 'event',
      section: owner.id,
      version: version.id,
      conditions: [],
      window: { kind: 'inLast', unit: 'day', from: 0, to: 30 },
    };
  const type = version.type[0];
  return {
    kind: 'attribute',
    section: owner.id,
    version: version.id,
    path: '',
    comparator: 'eq',
    value: valueFor(type),
  };
}

/** A group of conditions: all or any of them, each an attribute, an event or a group. */
export function Group({ node, defs, section, onChange, onRemove, label = 'Conditions', depth = 0 }) {
  const set = (i, item) => onChange({ ...node, items: node.items.map((x, j) => (j === i ? item : x)) });
  const remove = (i) => onChange({ ...node, items: node.items.filter((_, j) => j !== i) });
  const add = (item) => item && onChange({ ...node, items: [...node.items, item] });
  const current = defs.sections.find((s) => s.discriminator === section);
  return html`<fieldset class=${`group depth-${depth % 2}`}>
    <legend>${label}</legend>
    <${Field}
      label="Profiles match"
      as="select"
      value=${node.kind}
      onChange=${(e) => onChange({ ...node, kind: e.currentTarget.value })}
    >
      <option value="all">all of these conditions</option>
      <option value="any">any of these conditions</option>
    <//>
    ${node.items.length === 0 ? html`<p class="muted">No condition yet: every profile matches.</p>` : null}
    ${node.items.map((item, i) => {
      const name = `${label} › ${i + 1}`;
      if (item.kind === 'all' || item.kind === 'any')
        return html`<${Group}
          node=${item}
          defs=${defs}
          section=${section}
          label=${`Group ${name}`}
          depth=${depth + 1}
          onChange=${(next) => set(i, next)}
          onRemove=${() => remove(i)}
        />`;
      return html`<fieldset class="condition">
        <legend>${`${item.kind === 'event' ? 'Event' : 'Attribute'} condition ${name}`}</legend>
        ${
          item.kind === 'event'
            ? html`<${EventCondition} node=${item} defs=${defs} onChange=${(next) => set(i, next)} />`
            : html`<${AttributeCondition} node=${item} defs=${defs} onChange=${(next) => set(i, next)} />`
        }
        <button type="button" class="remove" onClick=${() => remove(i)}>
          Remove<span class="visually-hidden">${` condition ${name}`}</span>
        </button>
      </fieldset>`;
    })}
    <div class="actions">
      <button type="button" onClick=${() => add(newCondition('attributes', defs, current))}>
        Add an attribute condition
      </button>
      <button type="button" onClick=${() => add(newCondition('events', defs, current))}>Add an event condition</button>
      <button type="button" onClick=${() => add({ kind: node.kind === 'all' ? 'any' : 'all', items: [] })}>
        Add a group
      </button>
      ${onRemove ? html`<button type="button" onClick=${onRemove}>Remove this group</button>` : null}
    </div>
  </fieldset>`;
}
