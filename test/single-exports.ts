import type { Manifest } from '../src/definitions/schemas.ts';

/** The definitions of the single profile export's tests. */
export const SINGLE_MANIFEST: Manifest = {
  sections: [
    {
      name: 'Shop',
      attributes: [
        { name: 'Points', versions: [{ type: ['Number'] }] },
        { name: 'Secret', hidden: true, versions: [{ type: ['Text'] }] },
      ],
      tags: [{ name: 'VIP' }, { name: 'Hidden', hidden: true }],
      events: [{ name: 'Visit', versions: [{ type: [{ name: 'url', type: 'Text' }] }] }],
    },
    { name: 'Blog' },
  ],
};
