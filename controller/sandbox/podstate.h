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

/* 1 when pod's phase is Succeeded or Failed: its containers ran and will
 * not run again (restartPolicy), whatever else it says. */
int sbx_pod_finished(const cJSON *pod);

/* The longest part of a pod's status a phrase keeps (bytes). */
#define SBX_POD_WHY_PART 300

/* The length of s cut to at most max bytes on a UTF-8 character boundary. */
int sbx_utf8_cut(const char *s, int max);

/* Copies into trimmed pod status out what sbx_pod_why reads of the pod's
 * status st (a cache keeps it, sandbox/trim.h): the state of container
 * `container` when it is waiting or terminated, a PodScheduled condition
 * that is False, the pod's reason and message; each string cut to
 * SBX_POD_WHY_PART bytes. Nothing for a running pod. */
void sbx_pod_why_keep(cJSON *out, const cJSON *st, const char *container);

#endif
