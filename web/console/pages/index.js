// Every page of the console, in navigation order: its address (after #), its title, the menu
// group it is listed under (none: reached by links only), who may open it (an operator or an
// account session), and its module, loaded when the page is first opened.
// docs/console.md "Adding a page" says how to add one.

export const PAGES = [
  { path: '/accounts', title: 'Accounts', group: 'Operator', who: 'operator', load: () => import('./accounts.js') },
  { path: '/accounts/:account_id', title: 'Account', who: 'operator', load: () => import('./account.js') },
  { path: '/accounts/:account_id/keys', title: 'API keys', who: 'operator', load: () => import('./keys.js') },
  {
    path: '/accounts/:account_id/integrations',
    title: 'Integrations',
    who: 'operator',
    load: () => import('./integrations.js'),
  },
  {
    path: '/accounts/:account_id/suppressions',
    title: 'Suppressions',
    who: 'operator',
    load: () => import('./suppressions.js'),
  },
  {
    path: '/accounts/:account_id/manifest',
    title: 'Manifest',
    who: 'operator',
    load: () => import('./manifest.js'),
  },
  { path: '/accounts/:account_id/outbox', title: 'Outbox', who: 'operator', load: () => import('./outbox.js') },
  { path: '/jobs', title: 'Jobs', group: 'Operator', who: 'operator', load: () => import('./jobs.js') },
  {
    path: '/overview',
    title: 'Overview',
    group: 'Account',
    who: 'account',
    load: () => import('./overview.js'),
  },
  {
    path: '/definitions',
    title: 'Definitions',
    group: 'Definitions',
    who: 'account',
    load: () => import('./definitions.js'),
  },
  {
    path: '/profiles',
    title: 'Find a profile',
    group: 'Profiles',
    who: 'account',
    load: () => import('./profiles.js'),
  },
  {
    path: '/profiles/:keyspace/:key',
    title: 'Profile',
    who: 'account',
    load: () => import('./profile.js'),
  },
  { path: '/segments', title: 'Segments', group: 'Audience', who: 'account', load: () => import('./segments.js') },
  {
    path: '/imports',
    title: 'Imports',
    group: 'Imports and exports',
    who: 'account',
    load: () => import('./imports.js'),
  },
  {
    path: '/exports',
    title: 'Exports',
    group: 'Imports and exports',
    who: 'account',
    load: () => import('./exports.js'),
  },
  {
    path: '/activities',
    title: 'Activities',
    group: 'Activities',
    who: 'account',
    load: () => import('./activities.js'),
  },
  {
    path: '/webhooks',
    title: 'Webhooks',
    group: 'Integrations',
    who: 'account',
    load: () => import('./webhooks.js'),
  },
  {
    path: '/transactional',
    title: 'Transactional mail',
    group: 'Activities',
    who: 'account',
    load: () => import('./transactional.js'),
  },
];

/** The first page of a session of this kind. */
export function homeOf(kind) {
  return kind === 'operator' ? '/accounts' : '/overview';
}
