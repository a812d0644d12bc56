/* What a pod's status says, in words a user understands: why it is not
 * running (not scheduled and why, a container waiting and why, one that
 * exited and how), from the fields the scheduler and the kubelet fill. Pure:
 * the Sandbox status (Ready's message) and the workspace preparation
 * (sandbox/wsprep.h) both read it. */
#ifndef SBX_SANDBOX_PODSTATE_H
#define SBX_SANDBOX_PODSTATE_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* Writes into out (size n >= 1) why container `container` of pod (NULL: the
 * first container it reports) is not running, or "" when its status tells
 * nothing beyond the phase:
 *   "container sandbox exited with code 3 (Error): <message>"
 *   "container sandbox is waiting: ErrImageNeverPull: <message>"
 *   "not scheduled: 0/3 nodes are available: ..."
 *   "DeadlineExceeded: <message>" (the pod's own reason)
 * in that order of precedence. Every part taken from the pod is cut to a
 * few hundred bytes; out is always terminated. Returns out. */
const char *sbx_pod_why(const cJSON *pod, const char *container, char *out, size_t n);

#endif
