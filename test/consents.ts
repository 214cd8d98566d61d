// What the tests of the consents area share: the names of the definitions they use (built-in
// ones, and those of their manifests: the sections Shop and Club and their topics), the limits
// they lift, and their accounts.

export const NS = 'com.vendor1';
export const S = `${NS}.sections.user-created.shop`;
export const CLUB = `${NS}.sections.user-created.club`;
export const EMAIL = `${NS}.keyspaces.email`;
export const MOBILE = `${NS}.keyspaces.mobile`;
export const CRM = `${NS}.keyspaces.crm-id`;
export const WEB = `${NS}.keyspaces.web`;
export const EXPORT = `${NS}.keyspaces.export`;
export const EMAIL_CH = `${NS}.channels.email`;
export const SMS_CH = `${NS}.channels.sms`;
export const WEB_CH = `${NS}.channels.web`;
export const EMAIL_ATTR = `${NS}.attributes.email`;
export const MOBILE_ATTR = `${NS}.attributes.mobile`;
export const topic = (name: string) => `${NS}.topics.user-created.${name}`;
export const WEEKLY = topic('weekly-news');
export const OFFERS = topic('offers');
export const SMS_OFFERS = topic('sms-offers');
export const CLUB_NEWS = topic('club-news');

/** Limits lifted for the tests that are not about them. */
export const NO_LIMITS = { requests_per_second: null, token_requests_per_minute: null, profile_key_operations_per_second: null };

export interface Account { accountId: string; token: string }
