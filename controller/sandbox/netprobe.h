/* Whether the cluster enforces NetworkPolicy (contract section 9, issue 24
 * item 4), found out by a probe, never assumed. One round, in the probe
 * namespace (network.verifyNamespace):
 *
 *   1. the policy sbx-netprobe selects the probe's target pod and allows
 *      ingress to it on SBX_NETPROBE_OPEN only (so SBX_NETPROBE_SHUT is
 *      denied, as a sandbox pod's every port is);
 *   2. the target pod sbx-netprobe-target-<round> listens on both ports;
 *   3. the client pod sbx-netprobe-client-<round> connects to the target's
 *      address on both ports, once a second for SBX_NETPROBE_TRY_S, and exits
 *      0 once the open port answers while the shut one does not (enforced),
 *      SBX_NETPROBE_EXIT_OPEN when the shut port answered to the end (not
 *      enforced), SBX_NETPROBE_EXIT_NONET when the open port never answered
 *      (no verdict: the pods cannot talk at all);
 *   4. both pods are deleted.
 *
 * Both pods run the controller's own image (its `net-probe` subcommand, here)
 * as non-root with nothing added, where sandbox pods run (the config's node
 * selector, tolerations and runtime class). Pure but for the subcommand; the
 * controller runs the rounds (reconcile/netverify.c). */
#ifndef SBX_SANDBOX_NETPROBE_H
#define SBX_SANDBOX_NETPROBE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "sandbox/config.h"

#define SBX_NETPROBE_POLICY "sbx-netprobe"
#define SBX_NETPROBE_PREFIX "sbx-netprobe-"
/* The label of the probe's pods: "target" or "client". */
#define SBX_LABEL_NETPROBE "sandbox.dev/netprobe"
#define SBX_NETPROBE_OPEN 8081
#define SBX_NETPROBE_SHUT 8080
#define SBX_NETPROBE_TRY_S 10
#define SBX_NETPROBE_EXIT_OPEN 3
#define SBX_NETPROBE_EXIT_NONET 4

/* What a round found. */
enum sbx_netprobe_result {
	SBX_NETPROBE_UNKNOWN = -1, /* no verdict (yet): see the message */
	SBX_NETPROBE_NOT_ENFORCED = 0,
	SBX_NETPROBE_ENFORCED = 1
};

/* The probe's policy in namespace ns (new; caller frees). */
cJSON *sbx_netprobe_policy(const char *ns);
/* The target pod (role "target") or the client pod (role "client", which
 * connects to target_ip) of round (new; caller frees; NULL for a role,
 * round or address it does not know). */
cJSON *sbx_netprobe_pod(const char *ns, const char *role, unsigned long round, const char *target_ip,
			const struct sbx_config *cfg, const char *image);
/* The client pod's verdict from its status: UNKNOWN while it runs (*done
 * 0), else the result and why, in words, in why (size n). */
enum sbx_netprobe_result sbx_netprobe_verdict(const cJSON *client, int *done, char *why, size_t n);

/* `sandbox-controller net-probe listen PORT...` and `net-probe connect IP
 * SHUT OPEN SECONDS`; argv[0] is "net-probe". Returns the exit code. */
int sbx_netprobe_main(int argc, char **argv);

#endif
