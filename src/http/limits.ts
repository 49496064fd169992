/** Input bounds of the HTTP layer, named once for the server options, the error messages and the API document. */
export const BODY_LIMIT_BYTES = 16 * 1024
/** The longest request URL (path and query) served; longer ones get 414. */
export const MAX_URL_LENGTH = 2048
/** The most header lines a request may carry (Apache's LimitRequestFields); more get 431, never a silent cut. */
export const MAX_HEADER_LINES = 100
