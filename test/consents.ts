import { builtIn, NS, userCreated } from './names.ts';

// What the tests of the consents area share: the names of the definitions they use (built-in
// ones, and those of their manifests: the sections Shop and Club and their topics), the limits
// they lift, and their accounts.

export { NS };
export const S = userCreated('sections', 'shop');
export const CLUB = userCreated('sections', 'club');
export const EMAIL = builtIn('keyspaces', 'email');
export const MOBILE = builtIn('keyspaces', 'mobile');
export const CRM = builtIn('keyspaces', 'crm-id');
export const WEB = builtIn('keyspaces', 'web');
export const EXPORT = builtIn('keyspaces', 'export');
export const EMAIL_CH = builtIn('channels', 'email');
export const SMS_CH = builtIn('channels', 'sms');
export const WEB_CH = builtIn('channels', 'web');
export const EMAIL_ATTR = builtIn('attributes', 'email');
export const MOBILE_ATTR = builtIn('attributes', 'mobile');
export const topic = (name: string) => userCreated('topics', name);
export const WEEKLY = topic('weekly-news');
export const OFFERS = topic('offers');
export const SMS_OFFERS = topic('sms-offers');
export const CLUB_NEWS = topic('club-news');

/** Limits lifted for the tests that are not about them. */
export const NO_LIMITS = {
  requests_per_second: null,
  token_requests_per_minute: null,
  profile_key_operations_per_second: null,
};

export interface Account {
  accountId: string;
  token: string;
}
