/* Fault points that only tests switch on: SBX_FAULT_POINTS is a comma list of
 * point names; reaching a listed point kills the process with SIGKILL, exactly
 * as a crash at that instant would. SBX_FAULT_ONCE_FILE, if set, names a file
 * that is created at the first kill and disables further kills while it exists,
 * so a restarted controller runs through. Unset, every point is a no-op. */
#ifndef SBX_BASE_FAULT_H
#define SBX_BASE_FAULT_H

void fault_point(const char *name);

/* Delays that only tests switch on: SBX_FAULT_DELAYS is a comma list of
 * name=milliseconds; reaching a listed name sleeps that long (an informer's
 * list, "list:<resource>", or each of its watch events, "watch:<resource>",
 * or each of its deletions or additions, "watch-delete:<resource>",
 * "watch-add:<resource>", arriving late; "gone:<resource>", a deletion out
 * of the cache before its handler hears of it; "token-review", a guarded
 * listener's TokenReview for a token not in its cache, answering late;
 * "webhook-start", the webhook's listener binding late). Each delay logs a
 * line naming its point to stderr first, so a test can tell the process is
 * held there. Unset, a no-op. */
void fault_delay(const char *name);

#endif
