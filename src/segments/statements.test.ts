import { describe, it } from 'vitest';
import { expectGolden, scope } from '../../test/golden.ts';
import { countStatement, trendStatement } from './queries.ts';
import { countPlan, trendPlan } from './segments.ts';

/**
 * Golden statements of counts and trends (test/golden.ts): for fixed requests in fixed
 * definitions, the whole statement each runs, with its values, in `__snapshots__/<name>.sql`.
 */

describe('the statements of counts and trends', () => {
  it('count of a stored segment, known profiles only', async () => {
    const { predicate, known } = countPlan(scope, {
      section_discriminator: 'shop',
      segment: { timezone: 'Europe/Oslo', segment_discriminator: 'big' },
      known_profiles: true,
    });
    await expectGolden('count', [countStatement(predicate, known)], '__snapshots__/count.sql');
  });

  it('count of an inline definition', async () => {
    const { predicate, known } = countPlan(scope, {
      section_discriminator: 'shop',
      segment: { timezone: 'UTC', segment_definition: 'section(10).attribute(3301).lt(5)' },
    });
    await expectGolden('count-definition', [countStatement(predicate, known)], '__snapshots__/count-definition.sql');
  });

  it('trend of a stored segment over two points', async () => {
    const { compiled, keyspaceIds } = trendPlan(scope, 'shop', 'big', {
      sampling_points: ['2026-01-10T00:00:00Z', '2026-01-01T00:00:00Z'],
      timezone: 'UTC',
    });
    await expectGolden('trend', [trendStatement(compiled, keyspaceIds)], '__snapshots__/trend.sql');
  });
});
