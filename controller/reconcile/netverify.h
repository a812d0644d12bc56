/* Whether the cluster enforces the network floor's NetworkPolicies, found
 * out by the probe of sandbox/netprobe.h: a round at start, then every
 * network.verifyInterval, in network.verifyNamespace (default: the
 * controller's own, POD_NAMESPACE, else sandbox-system). The verdict is
 *
 *   - the gauge sandbox_network_policy_enforced (1 enforced, 0 not, -1 not
 *     known yet or the probe could not tell), the gauge
 *     sandbox_network_policy_direction_enforced{direction} (ingress, egress:
 *     the same values, each direction alone) and the counter
 *     sandbox_network_verifications_total{result};
 *   - the condition NetworkPolicyEnforced on every Sandbox (True/Verified,
 *     False/NotEnforced, Unknown/NotVerified with the probe's words, which
 *     name the direction not enforced): a change queues every Sandbox;
 *   - with network.requireEnforced, no sandbox pod is created unless it is
 *     1 (the Sandbox waits and says why).
 *
 * Off (nothing probed, no condition) with network.policies false or
 * network.verify false (its default). */
#ifndef SBX_RECONCILE_NETVERIFY_H
#define SBX_RECONCILE_NETVERIFY_H

#include <stddef.h>

#include "sandbox/status.h"

struct sbx_controller;

/* Starts the prober (c->netverify), whose pods run image (copied: the
 * controller's own, sbx_controller_prep_image); 0, or -1 when it cannot. */
int sbx_netverify_start(struct sbx_controller *c, const char *image);
void sbx_netverify_stop(struct sbx_controller *c);

/* Fills in's NetworkPolicyEnforced fields (left NULL when nothing is
 * verified); the strings live until the next call on this thread, or as long
 * as old_status (the Sandbox's cached .status, may be NULL): before the
 * probe's first round ends, a condition old_status carries (the verdict of
 * the controller before this one) is kept as it is, so a restart writes no
 * status of its own; the first round's verdict then queues every Sandbox. */
void sbx_netverify_condition(struct sbx_controller *c, const cJSON *old_status, struct sbx_status_in *in);

/* 0 when a sandbox pod may be created; else -1 with why in why (size n):
 * network.requireEnforced and enforcement not verified. */
int sbx_netverify_gate(struct sbx_controller *c, char *why, size_t n);

#endif
