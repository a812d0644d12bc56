/* The keeper of the network floor (sandbox/netfloor.h): one NetworkPolicy
 * per namespace while it has pods the controller runs for sandboxes, and
 * one per namespace and set of allow profiles (sandbox/netprofile.h) while
 * it has pods of that set (they carry its label and names). The same rules
 * hold for both; a set's policy needs the API server's addresses, read from
 * the kubernetes Service of default and its endpoints when the first set is
 * kept and then on every resync (never without a set).
 *
 * - Before any such pod is created, sbx_netkeep_ensure makes the namespace's
 *   policy if the cache does not hold it, so no pod runs a moment without it.
 * - The pod informers report every pod (sbx_netkeep_pod); the policy
 *   informer (label sandbox.dev/network-floor) every change to a policy. A
 *   thread of its own then writes the rendered policy over one that was
 *   changed, makes one that was deleted, and deletes it when the namespace
 *   has had no such pod for SBX_NETKEEP_GRACE_S (and none was ensured).
 *   Every namespace it knows is looked at again every SBX_NETKEEP_RESYNC_S.
 * - It forgets a namespace (or set) with no pod counted, past its grace and
 *   with no policy in the cache, in every process; a pod or a policy seen
 *   later makes it known again. sandbox_network_keeper_entries{kind}
 *   counts what it knows.
 * - The thread does nothing until this process runs the workers (the
 *   leader; a standby only counts, so two replicas never fight over a
 *   policy), the policy cache is current and every pod informer has
 *   reported its whole first LIST: after a restart a floor with no pod
 *   counted under it yet is not one to delete. A policy first seen before
 *   any pod under it gets the same grace as a pod that just went.
 * - With network.policies false nothing is kept (and nothing deleted). */
#ifndef SBX_RECONCILE_NETKEEP_H
#define SBX_RECONCILE_NETKEEP_H

#include <cjson/cJSON.h>

#include "kube/client.h"

struct sbx_controller;

#define SBX_NETKEEP_GRACE_S 10
#define SBX_NETKEEP_RESYNC_S 60

/* Starts the policy informer and the keeper's thread (c->netkeep). Returns
 * 0, or -1 when they cannot be started. A no-op with network.policies false. */
int sbx_netkeep_start(struct sbx_controller *c);
/* The keeper's thread starts writing policies (called when the workers
 * start: only the leader writes). */
void sbx_netkeep_activate(struct sbx_controller *c);

/* 1 once the policy cache is current (or nothing is kept). */
int sbx_netkeep_synced(struct sbx_controller *c, long timeout_ms);
/* Stops the thread and the informer and frees them. */
void sbx_netkeep_stop(struct sbx_controller *c);
/* Asks the keeper's policy watch to stop without waiting (informer_request_stop),
 * so that sbx_netkeep_stop does not wait a second of its own for it. */
void sbx_netkeep_request_stop(struct sbx_controller *c);

/* The namespace's floor policy exists (or was just made): KUBE_OK, or the
 * API's error in err (the caller creates no pod). */
enum kube_err sbx_netkeep_ensure(struct sbx_controller *c, const char *ns, struct kube_error *err);

/* The policy of the set of profiles spec names (sandbox/netprofile.h) in
 * ns exists (or was just made): KUBE_OK (also when spec names none), or the
 * error in err, among them that the API server's addresses, which the policy
 * excepts, are not known yet (the caller creates no pod). */
enum kube_err sbx_netkeep_ensure_profiles(struct sbx_controller *c, const char *ns, const cJSON *spec,
					  struct kube_error *err);

/* A profile changed: every set's policy is rendered again. */
void sbx_netkeep_profiles_changed(struct sbx_controller *c);

/* A pod of a sandbox appeared (gone 0) or went (gone 1) in a pod cache; pod
 * is borrowed. Any of the pod informers may report the same pod. */
void sbx_netkeep_pod(struct sbx_controller *c, const cJSON *pod, int gone);

#endif
