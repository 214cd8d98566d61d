// The console's calls typed by the service's OpenAPI document (the generated client's paths): a
// route, a method, parameters or a body the document does not have fail `npm run typecheck`. Types
// only: the browser never loads this file.
import type { paths } from '../../../clients/typescript/src/schema.ts';

export type Method = 'GET' | 'PUT' | 'POST' | 'PATCH' | 'DELETE';

/** The routes (OpenAPI path templates, `/audience/sections/{section_discriminator}`) that answer `M`. */
export type Route<M extends Method> = {
  [R in keyof paths]: paths[R] extends { [K in Lowercase<M>]: object } ? R : never;
}[keyof paths];

type Operation<M extends Method, R extends Route<M>> = paths[R][Lowercase<M>];

type PathOf<Op> = Op extends { parameters: { path: infer P extends object } } ? P : never;
type QueryOf<Op> = Op extends { parameters: { query?: infer Q } }
  ? [Q] extends [never | undefined]
    ? never
    : Q
  : never;
type BodyOf<Op> = Op extends { requestBody?: { content: { 'application/json': infer B } } } ? B : never;
type BodyRequired<Op> = Op extends { requestBody: { content: object } } ? true : false;

/**
 * What a call sends beside its route: the path's parameters (by the route's names), the query (the
 * service fills in what a parameter's default says, so each may be left out) and the JSON body.
 */
export type Options<M extends Method, R extends Route<M>> = ([PathOf<Operation<M, R>>] extends [never]
  ? { params?: never }
  : { params: PathOf<Operation<M, R>> }) &
  ([QueryOf<Operation<M, R>>] extends [never] ? { query?: never } : { query?: Partial<QueryOf<Operation<M, R>>> }) &
  ([BodyOf<Operation<M, R>>] extends [never]
    ? { body?: never }
    : BodyRequired<Operation<M, R>> extends true
      ? { body: BodyOf<Operation<M, R>> }
      : { body?: BodyOf<Operation<M, R>> });

type RequiredKeys<T> = { [K in keyof T]-?: {} extends Pick<T, K> ? never : K }[keyof T];
/** The options argument: required when the route has parameters or the operation a required body. */
export type OptionsArg<M extends Method, R extends Route<M>> =
  RequiredKeys<Options<M, R>> extends never ? [options?: Options<M, R>] : [options: Options<M, R>];

type Json<Response> = Response extends { content: { 'application/json': infer A } } ? A : undefined;
/** The answer of a call that succeeded: the JSON of its 200, 201 or 202, else nothing (204). */
export type Answer<M extends Method, R extends Route<M>> =
  Operation<M, R> extends { responses: infer Rs }
    ? Rs extends { 200: infer A }
      ? Json<A>
      : Rs extends { 201: infer A }
        ? Json<A>
        : Rs extends { 202: infer A }
          ? Json<A>
          : undefined
    : never;

/** A call of the service, by method and route. */
export type Call = <M extends Method, R extends Route<M>>(
  method: M,
  route: R,
  ...options: OptionsArg<M, R>
) => Promise<Answer<M, R>>;

/** A read of the service kept in a component's state; a null route reads nothing. */
export interface Loaded<A> {
  data: A | undefined;
  error: (Error & { status?: number; problem?: any }) | undefined;
  loading: boolean;
  /** The address read (the route with its parameters and query), null for none. */
  address: string | null;
  reload: () => void;
}

/** Loads a route (GET) when its address changes. */
export type UseApi = <R extends Route<'GET'>>(
  route: R | null,
  ...options: OptionsArg<'GET', R>
) => Loaded<Answer<'GET', R>>;

/** The GET routes whose one path parameter is a section's discriminator. */
export type SectionRoute = {
  [R in Route<'GET'>]: keyof PathOf<Operation<'GET', R>> extends 'section_discriminator'
    ? [PathOf<Operation<'GET', R>>] extends [never]
      ? never
      : R
    : never;
}[Route<'GET'>];

/** A section picker and a section's route loaded when the chosen section changes. */
export type UseSectionApi = <R extends SectionRoute>(
  route: R,
) => { section: string | undefined; picker: unknown; state: Loaded<Answer<'GET', R>> };
