import {
  attributeOfVersion,
  attributeTypeOf,
  eventFieldsOf,
  eventOfVersion,
  JSON_KIND_OF,
  type AttributeType,
  type Definitions,
} from '../core/definitions.ts';
import type { AttributeTerm, Condition, EventTerm, Expression } from './ast.ts';
import { aqlError } from './errors.ts';

/** SPEC §7.3 "generated query size limit": more terms than this are refused. */
export const MAX_TERMS = 64;

/** What a checked term reads: the JSON type its conditions compare with. */
type Primitive = 'string' | 'number' | 'boolean';

/**
 * Checks a parsed query against an account's definitions: sections, attribute and event versions
 * exist and belong together, data paths point at fields, and conditions fit the field types.
 * Throws the 400 problem of the first fault, with its position in `text`.
 */
export function check(expression: Expression, defs: Definitions, text: string): void {
  let terms = 0;
  const visit = (expression: Expression): void => {
    if ('terms' in expression) {
      expression.terms.forEach(visit);
      return;
    }
    const e: AttributeTerm | EventTerm = expression;
    if (++terms > MAX_TERMS)
      throw aqlError('AUD-1710', text, e.at, `Generated query size limit reached: at most ${MAX_TERMS} terms`);
    const section = defs.sections.find((s) => s.id === e.sectionId);
    if (!section) throw aqlError('AUD-1111', text, e.sectionAt, `Section ${e.sectionId} not found`);
    if (e.kind === 'attribute') {
      const found = attributeOfVersion(section, e.versionId);
      if (!found)
        throw aqlError(
          'AUD-1111',
          text,
          e.versionAt,
          `Attribute version ${e.versionId} not found in section ${e.sectionId}`,
        );
      const typeName = attributeTypeOf(found.version);
      const kind = JSON_KIND_OF[typeName];
      if (kind === 'struct') {
        if (e.condition.path.length === 0)
          throw aqlError(
            'AUD-1404',
            text,
            e.condition.at,
            `Field condition on the struct attribute ${e.versionId}: select a field with attributeData("<field>")`,
          );
        // Struct layouts are not defined, so the field's type is the constant's.
        checkConstant(e.condition, typeof e.condition.value as Primitive, 'Struct field', text);
      } else {
        if (e.condition.path.length > 0)
          throw aqlError(
            'AUD-1402',
            text,
            e.condition.pathAt ?? e.condition.at,
            `The attribute ${e.versionId} is of type ${typeName}: attributeData paths only point into Struct attributes`,
          );
        checkConstant(e.condition, kind, typeName, text);
      }
      return;
    }
    const event = eventOfVersion(section, e.versionId);
    if (!event)
      throw aqlError('AUD-1111', text, e.versionAt, `Event version ${e.versionId} not found in section ${e.sectionId}`);
    const fields = eventFieldsOf(event.version);
    for (const condition of e.conditions) {
      const fieldType = fields.get(condition.path[0]);
      if (fieldType === undefined)
        throw aqlError(
          'AUD-1402',
          text,
          condition.pathAt ?? condition.at,
          `No such field "${condition.path.join('.')}" in event version ${e.versionId}`,
        );
      const kind = JSON_KIND_OF[fieldType as AttributeType] ?? 'string';
      if (kind === 'struct') {
        if (condition.path.length === 1)
          throw aqlError(
            'AUD-1404',
            text,
            condition.pathAt ?? condition.at,
            `Field condition on the struct field "${condition.path[0]}": select a field inside it`,
          );
        checkConstant(condition, typeof condition.value as Primitive, 'Struct field', text);
      } else {
        if (condition.path.length > 1)
          throw aqlError(
            'AUD-1402',
            text,
            condition.pathAt ?? condition.at,
            `The field "${condition.path[0]}" is of type ${fieldType}: the path "${condition.path.join('.')}" does not point to a data point`,
          );
        checkConstant(condition, kind, fieldType, text);
      }
    }
  };
  visit(expression);
}

/** The constant fits the type, and true or false is compared only by eq and neq (docs/aql.md "Conditions"). */
function checkConstant(condition: Condition, kind: Primitive, typeName: string, text: string): void {
  if (typeof condition.value !== kind) {
    throw aqlError(
      'AUD-1401',
      text,
      condition.valueAt,
      `Type processing error: ${typeName} values compare with a ${kind} constant, not ${JSON.stringify(condition.value)}`,
    );
  }
  if (kind === 'boolean' && condition.comparator !== 'eq' && condition.comparator !== 'neq') {
    throw aqlError(
      'AUD-1401',
      text,
      condition.at,
      `Type processing error: ${typeName} values compared with true or false take only eq and neq, not ${condition.comparator}`,
    );
  }
}
