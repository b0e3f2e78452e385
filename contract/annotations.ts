/** Annotations the facade writes on resources and the operator reads. */
export const SUPPRESS_RESET_ANNOTATION = 'gw.io/suppress-reset';
/**
 * A request to reset the key's live quota (cluster): the facade writes a fresh random token here on
 * every key write without suppress_reset; the controller resets the quota when the token differs from
 * status.quotaReset, then records it there (so the facade knows the reset happened, and a resync or a
 * restart does not reset again). Needed because a re-POST of a key does not change its key hash (the
 * controller's own first-write reset) and may not even change its spec (no new generation).
 */
export const QUOTA_RESET_ANNOTATION = 'gw.io/quota-reset';

/**
 * The label that lets the controller watch a Secret (`gw.io/secret: "true"`): the controller's Secret
 * informer selects only Secrets carrying it, so no unrelated Secret of the cluster enters its memory. The
 * Secrets the controller and the facade create carry it; a user's Secret named by a `secretRef` without it
 * is still read, by name, on each reconcile of the resources that name it (its changes are then seen at
 * the next resync rather than at once).
 */
export const SECRET_LABEL = 'gw.io/secret';
